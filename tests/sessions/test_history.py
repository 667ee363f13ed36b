"""The history service: inheritance, sub-instances, resume, supplements, views (SPEC §6)."""
from __future__ import annotations

import pytest
from django.db import transaction

from core.errors import ActiveRunConflict, Conflict
from sessions.models import CompactionSnapshot, Instance, Run, SessionMessage, SessionView
from sessions.run_errors import RunError
from sessions.selectors.context import context_project
from sessions.selectors.instances import main_instance
from sessions.services.checkpoints import checkpoint_commit
from sessions.services.model_steps import step_save_assistant
from sessions.services.questions import question_ask
from sessions.services.records import NewRecord, record_append
from sessions.services.run_controls import run_cancel, run_resume
from sessions.services.runs import run_create, run_finish
from sessions.services.supplements import supplement_add, supplements_take
from tests.sessions.helpers import answer, call_tool, claim, seen_by, tool_result

pytestmark = pytest.mark.django_db

SUMMARY = [{"role": "user", "content": "[Summary] A asked about flights, B about hotels, C about cars."},
           {"role": "assistant", "content": "Understood; continuing from the summary."}]


def _complete(run: Run) -> None:
    assert run_finish(run=run, status=Run.Status.COMPLETED)


def test_run2_a_new_run_inherits_every_earlier_question_answer_failure_and_tool_exchange(make_session, alice):
    session = make_session(alice)
    first = claim(question_ask(session=session, content="Find my booking"))
    call_tool(first, "c1", "lookup", "s1")
    tool_result(first, "c1", "lookup", "booking ABC")
    answer(first, "It is ABC.", "s2")
    _complete(first)
    second = claim(question_ask(session=session, content="Cancel it"))
    run_finish(run=second, status=Run.Status.FAILED, error=RunError("provider_unavailable", "down", retryable=True))
    third = question_ask(session=session, content="Try again")
    assert seen_by(third) == [
        ("user", "Find my booking"), ("assistant", "calls lookup"), ("tool", "booking ABC"),
        ("assistant", "It is ABC."), ("user", "Cancel it"), ("user", "Try again"),
    ]


def test_run3_sub_instance_records_are_stored_but_only_the_delegation_result_is_inherited(make_session, alice):
    session = make_session(alice)
    run = claim(question_ask(session=session, content="Research this"))
    main = main_instance(run=run)
    call_tool(run, "d1", "delegate", "s1")
    sub = Instance.objects.create(run=run, parent=main, key="sub-1", depth=1)
    record_append(session=session, run=run, instance=sub, kind="user",
                  message={"role": "user", "content": "internal sub-agent prompt"}, entry_key="task")
    record_append(session=session, run=run, instance=sub, kind="assistant",
                  message={"role": "assistant", "content": "sub-agent working notes"}, entry_key="a1")
    record_append(session=session, run=run, instance=main, kind="delegation_result", entry_key="result-d1",
                  message={"role": "tool", "tool_call_id": "d1", "name": "delegate", "content": "the finding",
                           "status": "ok"})
    answer(run, "Done.", "s2")
    _complete(run)
    assert SessionMessage.objects.filter(instance=sub).count() == 2
    later = question_ask(session=session, content="And then?")
    seen = seen_by(later)
    assert ("tool", "the finding") in seen
    assert not any("sub-agent" in text for _, text in seen)
    sub_view = context_project(run=run, instance=sub).messages
    assert [m["content"] for m in sub_view] == ["internal sub-agent prompt", "sub-agent working notes"]


def test_run4_resume_keeps_its_inherited_history_and_never_sees_later_questions(make_session, alice):
    session = make_session(alice)
    a = claim(question_ask(session=session, content="Question A"))
    answer(a, "Partial A", "s1")
    run_cancel(run=a)
    assert run_finish(run=a, status=Run.Status.CANCELLED, reason="stopped by user")
    b = claim(question_ask(session=session, content="Question B"))
    answer(b, "Answer B", "s1")
    _complete(b)
    resumed = claim(run_resume(run=a))
    assert resumed.pk == a.pk and resumed.attempt == 1 and resumed.budget == a.budget
    assert seen_by(resumed) == [("user", "Question A"), ("assistant", "Partial A")]


def test_run4_resume_is_refused_while_another_run_is_active(make_session, alice):
    session = make_session(alice)
    a = claim(question_ask(session=session, content="A"))
    run_finish(run=a, status=Run.Status.CANCELLED)
    question_ask(session=session, content="B")
    with pytest.raises(ActiveRunConflict):
        run_resume(run=a)
    assert Run.objects.get(pk=a.pk).status == Run.Status.CANCELLED


def test_a_completed_run_cannot_be_resumed(make_session, alice):
    session = make_session(alice)
    a = claim(question_ask(session=session, content="A"))
    _complete(a)
    with pytest.raises(Conflict):
        run_resume(run=a)


def test_run5_a_supplement_waits_in_the_queue_and_never_lands_between_a_call_and_its_result(make_session, alice):
    session = make_session(alice)
    run = claim(question_ask(session=session, content="Book it"))
    call_tool(run, "c1", "book", "s1")
    supplement_add(run=run, content="window seat please")
    assert SessionMessage.objects.filter(session=session, kind="supplement").count() == 0
    tool_result(run, "c1", "book", "booked")
    taken = supplements_take(run=run, instance=main_instance(run=run))
    assert len(taken) == 1
    assert [role for role, _ in seen_by(run)] == ["user", "assistant", "tool", "user"]
    assert main_instance(run=run).user_turns == 1  # a supplement is not a user turn
    assert supplements_take(run=run, instance=main_instance(run=run)) == []


def test_run5_a_supplement_to_a_finished_run_is_refused(make_session, alice):
    session = make_session(alice)
    run = claim(question_ask(session=session, content="Hi"))
    _complete(run)
    with pytest.raises(Conflict):
        supplement_add(run=run, content="one more thing")


def test_run10_saving_the_same_checkpoint_a_hundred_times_adds_nothing(make_session, alice):
    session = make_session(alice)
    run = claim(question_ask(session=session, content="Hi"))
    for _ in range(100):
        step_save_assistant(run=run, instance=main_instance(run=run), entry_key="step-1",
                            message={"role": "assistant", "content": "Hello"})
    assert SessionMessage.objects.filter(session=session).count() == 2
    assert main_instance(run=run).model_steps == 1


def test_run10_a_failure_between_the_records_and_the_view_leaves_no_half_state(make_session, alice):
    session = make_session(alice)
    run = claim(question_ask(session=session, content="Hi"))
    answer(run, "Hello", "s1")
    before = SessionMessage.objects.filter(session=session).count()

    class Boom(Exception):
        pass

    with pytest.raises(Boom), transaction.atomic():
        checkpoint_commit(run=run, instance=main_instance(run=run), messages=SUMMARY, covered_seq=3,
                          estimator_id="bytes-v1",
                          records=[NewRecord("compaction_summary", {"summary": "x"}, "compaction-1")])
        raise Boom
    assert SessionMessage.objects.filter(session=session).count() == before
    assert not CompactionSnapshot.objects.exists() and not SessionView.objects.exists()


def test_run7_a_checkpoint_becomes_a_view_only_over_an_observed_prefix(make_session, alice):
    session = make_session(alice)
    run = claim(question_ask(session=session, content="Hi"))
    answer(run, "Hello", "s1")
    result = checkpoint_commit(run=run, instance=main_instance(run=run), messages=SUMMARY, covered_seq=2,
                               estimator_id="bytes-v1")
    assert result.view is not None and result.view.watermark == 2
    supplement_add(run=run, content="wait")
    blocked = checkpoint_commit(run=run, instance=main_instance(run=run), messages=SUMMARY, covered_seq=2,
                                estimator_id="bytes-v1")
    assert blocked.view is None  # a queued supplement the view does not contain
    assert blocked.snapshot.revision == 2


def test_run9_the_interleaving_case(make_session, alice):
    session = make_session(alice)
    def views():
        return list(SessionView.objects.filter(session=session).order_by("watermark")
                    .values_list("watermark", flat=True))

    # A: a question, a tool exchange, then Stop.
    a = claim(question_ask(session=session, content="Question A"))
    call_tool(a, "c1", "search", "s1")
    tool_result(a, "c1", "search", "result for A")
    run_cancel(run=a)
    run_finish(run=a, status=Run.Status.CANCELLED, reason="stopped by user")
    assert views() == []

    # B inherits A.
    b = claim(question_ask(session=session, content="Question B"))
    assert seen_by(b) == [("user", "Question A"), ("assistant", "calls search"), ("tool", "result for A"),
                          ("user", "Question B")]
    answer(b, "Answer B", "s1")
    _complete(b)
    assert views() == []

    # C inherits A and B, and compacts: its records are the whole prefix, so a view is saved.
    c = claim(question_ask(session=session, content="Question C"))
    assert [t for _, t in seen_by(c)] == ["Question A", "calls search", "result for A", "Question B", "Answer B",
                                          "Question C"]
    answer(c, "Answer C", "s1")
    covered_c = session.records.order_by("-seq").values_list("seq", flat=True).first()
    c_main = main_instance(run=c)
    checkpoint_commit(run=c, instance=c_main, messages=SUMMARY, covered_seq=covered_c, estimator_id="bytes-v1")
    _complete(c)
    assert views() == [covered_c]

    # A resumed: only A's checkpoint and A's supplements, not B or C.
    resumed = claim(run_resume(run=a))
    supplement_add(run=resumed, content="Supplement for A")
    supplements_take(run=resumed, instance=main_instance(run=resumed))
    assert seen_by(resumed) == [("user", "Question A"), ("assistant", "calls search"), ("tool", "result for A"),
                                ("user", "[Supplement: the user sent this while the previous request was running]"
                                         "\nSupplement for A")]
    answer(resumed, "Answer A", "resume-1-s1")
    a_new_seqs = list(SessionMessage.objects.filter(run=a, seq__gt=covered_c).values_list("seq", flat=True))
    assert a_new_seqs and min(a_new_seqs) > covered_c  # appended at the end of the session
    covered_a = session.records.order_by("-seq").values_list("seq", flat=True).first()
    result = checkpoint_commit(run=resumed, instance=main_instance(run=resumed), messages=SUMMARY,
                               covered_seq=covered_a, estimator_id="bytes-v1")
    assert result.view is None  # resumed A never observed B and C
    _complete(resumed)
    assert views() == [covered_c]

    # D sees A, B, C (through C's view) and resumed A's new records exactly once each.
    d = question_ask(session=session, content="Question D")
    seen = seen_by(d)
    assert seen == [
        ("user", SUMMARY[0]["content"]), ("assistant", SUMMARY[1]["content"]),
        ("user", "[Supplement: the user sent this while the previous request was running]\nSupplement for A"),
        ("assistant", "Answer A"), ("user", "Question D"),
    ]
    d_main = main_instance(run=d)
    # Counts from the records: questions A, B, C, D; model steps A×2, B, C.
    assert (d_main.user_turns, d_main.model_steps) == (4, 4)
    # Baselines from the view D started from (C's compaction: 3 questions, 3 steps).
    assert (d_main.baseline_user_turns, d_main.baseline_model_steps) == (c_main.user_turns, 3)
    assert views() == [covered_c]


def test_run8_a_new_run_starts_from_the_highest_view_plus_the_records_after_it(make_session, alice):
    session = make_session(alice)
    first = claim(question_ask(session=session, content="One"))
    answer(first, "Answer one", "s1")
    _complete(first)
    SessionView.objects.create(session=session, watermark=1, messages=[{"role": "user", "content": "[view at 1]"}],
                               estimator_id="bytes-v1")
    SessionView.objects.create(session=session, watermark=2, messages=[{"role": "user", "content": "[view at 2]"},
                                                                       {"role": "assistant", "content": "ok"}],
                               estimator_id="tiktoken-o200k_base-v1")  # another estimator: messages still used
    second = question_ask(session=session, content="Two")
    prepared = context_project(run=second, instance=main_instance(run=second))
    assert prepared.start == "view" and prepared.start_watermark == 2
    assert [m["content"] for m in prepared.messages] == ["[view at 2]", "ok", "Two"]
    # Records after the view's watermark: the run_status (projects nothing) and the new question.
    assert prepared.records_read == 2


@pytest.mark.django_db(transaction=True)  # asking in a transaction of its own, as the API asks
def test_a_second_question_while_one_is_active_is_refused_with_nothing_written_and_no_savepoint(make_session,
                                                                                                alice):
    """The one-active-run constraint refuses the second run without an error the database
    would abort the transaction for: asking takes no savepoint (two round trips on every
    question, issue #29), and a refused question writes nothing."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from sessions.models import Instance, SessionMessage

    session = make_session(alice)
    with CaptureQueriesContext(connection) as asked:
        first = question_ask(session=session, content="A")
    assert not [q["sql"] for q in asked.captured_queries if "SAVEPOINT" in q["sql"].upper()]
    with transaction.atomic():
        with pytest.raises(ActiveRunConflict):
            question_ask(session=session, content="B")
        with pytest.raises(ActiveRunConflict):
            run_create(session=session)  # no savepoint of its own: the caller's transaction is not broken
        assert Run.objects.filter(session=session).count() == 1  # the transaction still answers
    assert list(Run.objects.filter(session=session).values_list("pk", flat=True)) == [first.pk]
    assert Instance.objects.filter(run__session=session).count() == 1
    assert [m.message["content"] for m in SessionMessage.objects.filter(session=session)] == ["A"]


def test_an_earlier_attempt_cannot_end_the_attempt_that_resumed_it(make_session, alice):
    """A worker still finishing attempt 0 after the run was stopped, resumed and claimed
    again must not end attempt 1: the end's UPDATE checks the attempt (RUN-10)."""
    first = claim(question_ask(session=make_session(alice), content="A"))
    stale = Run.objects.get(pk=first.pk)  # attempt 0, as the slow worker still holds it
    assert run_finish(run=first, status=Run.Status.CANCELLED)
    first.refresh_from_db()
    again = claim(run_resume(run=first))
    assert again.attempt == 1
    assert not run_finish(run=stale, status=Run.Status.COMPLETED, expected_from=(Run.Status.RUNNING,),
                          of_attempt=stale.attempt)
    assert Run.objects.get(pk=first.pk).status == Run.Status.RUNNING
    assert run_finish(run=again, status=Run.Status.COMPLETED, expected_from=(Run.Status.RUNNING,),
                      of_attempt=again.attempt)
    assert Run.objects.get(pk=first.pk).status == Run.Status.COMPLETED
