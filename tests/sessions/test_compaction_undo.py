"""CTX-51: undoing the newest compaction through the API, with named people (alice creates
the session, bob shares her space, mallory is an outsider): who may, when it is refused
(409, nothing written), and two undos at once on PostgreSQL (one wins)."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from core.errors import Conflict
from sessions.models import CompactionSnapshot, Instance, Run, RunAttention, SessionMessage, SessionView
from sessions.selectors.context import context_project
from sessions.selectors.instances import main_instance
from sessions.services.checkpoints import checkpoint_commit
from sessions.services.compaction_undo import compaction_undo
from sessions.services.questions import question_ask
from sessions.services.records import NewRecord
from sessions.services.runs import run_finish
from tests.foundation.test_concurrency import _in_threads
from tests.sessions.helpers import answer, claim

pytestmark = pytest.mark.django_db(transaction=True)
SUMMARY = {"role": "user", "content": "This session is being continued: a summary of Q1 and A1."}


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def undo_url(session) -> str:
    return f"/api/v1/sessions/{session.pk}/compactions/undo"


def answered(session, question: str, reply: str) -> Run:
    run = claim(question_ask(session=session, content=question))
    answer(run, reply, f"a-{question}")
    return run


def compact(run: Run) -> CompactionSnapshot:
    """A committed compaction of the run's main instance, as the worker saves it (RUN-10)."""
    run.session.refresh_from_db()
    covered = run.session.last_seq
    result = checkpoint_commit(
        run=run, instance=main_instance(run=run), covered_seq=covered, estimator_id="bytes-v1",
        messages=[SUMMARY, {"role": "user", "content": "Q2"}], metrics={"trigger": "budget"},
        records=[NewRecord("compaction_summary", {"summary": "Q1 and A1.", "metrics": {}},
                           f"compaction-{covered}-budget")])
    assert result.view is not None
    return result.snapshot


@pytest.fixture
def compacted(make_session, alice):
    """alice's session: Q1/A1, then Q2/A2 whose run compacted after its answer (a view saved)."""
    session = make_session(alice)
    first = answered(session, "Q1", "A1")
    assert run_finish(run=first, status=Run.Status.COMPLETED)
    second = answered(session, "Q2", "A2")
    compact(second)
    assert run_finish(run=second, status=Run.Status.COMPLETED)
    return session


def written(session) -> tuple:
    """Everything an undo writes, to assert that a refused one wrote nothing."""
    return (list(SessionMessage.objects.filter(session=session).values_list("seq", "kind")),
            list(CompactionSnapshot.objects.filter(instance__run__session=session).values_list("id", flat=True)),
            list(SessionView.objects.filter(session=session).values_list("id", flat=True)),
            [i.frame.get("compaction_failure") for i in Instance.objects.filter(run__session=session).order_by("id")])


def next_view(session) -> list[dict]:
    """What a new question's run would read: the messages its context starts with."""
    run = question_ask(session=session, content="Q3")
    view = context_project(run=run, instance=main_instance(run=run)).messages
    return view


def test_ctx51_the_creator_undoes_and_the_next_run_reads_every_record_again(compacted, alice):
    response = api(alice).post(undo_url(compacted))
    assert response.status_code == 200, response.json()
    assert not SessionView.objects.filter(session=compacted).exists()  # the compaction's view is gone
    assert [m["content"] for m in next_view(compacted)] == ["Q1", "A1", "Q2", "A2", "Q3"]
    marker = SessionMessage.objects.filter(session=compacted, kind="compaction_undone").get()
    assert marker.message["by"] == "creator" and marker.message["undone_revision"] == 1


def test_ctx51_an_undo_holds_the_triggers_in_the_frame_the_next_question_carries(compacted, alice):
    assert api(alice).post(undo_url(compacted)).status_code == 200
    run = question_ask(session=compacted, content="Q3")
    hold = main_instance(run=run).frame["compaction_failure"]
    assert hold["reason"] == "undone" and hold["tokens"] == 0  # the first step pins the size it measures


@pytest.mark.parametrize("who", ["bob", "mallory"])
def test_ctx51_someone_who_did_not_create_the_session_gets_404_and_nothing_is_written(compacted, who, request):
    before = written(compacted)
    response = api(request.getfixturevalue(who)).post(undo_url(compacted))
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert written(compacted) == before


def test_ctx51_while_a_run_is_active_the_undo_is_409_and_nothing_is_written(compacted, alice):
    question_ask(session=compacted, content="Q3")  # queued: active
    before = written(compacted)
    response = api(alice).post(undo_url(compacted))
    assert response.status_code == 409 and response.json()["error"]["code"] == "answer_running"
    assert "Wait for it to finish" in response.json()["error"]["message"]
    assert written(compacted) == before


def test_ctx51_with_no_compaction_there_is_nothing_to_undo(make_session, alice):
    session = make_session(alice)
    run = answered(session, "Q1", "A1")
    assert run_finish(run=run, status=Run.Status.COMPLETED)
    before = written(session)
    response = api(alice).post(undo_url(session))
    assert response.status_code == 409 and response.json()["error"]["code"] == "nothing_to_undo"
    assert written(session) == before


def test_ctx51_a_second_undo_is_409_already_undone_and_compact_now_summarizes_again(compacted, alice):
    client = api(alice)
    assert client.post(undo_url(compacted)).status_code == 200
    before = written(compacted)
    again = client.post(undo_url(compacted))
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_undone"
    assert "Compact now" in again.json()["error"]["message"]
    assert written(compacted) == before
    # The records the summary covered are new to summarize again (CTX-43).
    assert client.post(f"/api/v1/sessions/{compacted.pk}/compact").status_code == 202


def test_ctx51_a_page_that_shows_another_compaction_as_the_latest_is_told_so(compacted, alice):
    newest = CompactionSnapshot.objects.get(instance__run__session=compacted)
    before = written(compacted)
    stale = api(alice).post(undo_url(compacted), {"compaction": newest.pk + 1000}, format="json")
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "not_newest"
    assert written(compacted) == before
    bad = api(alice).post(undo_url(compacted), {"compaction": "x"}, format="json")
    assert bad.status_code == 400 and written(compacted) == before
    assert api(alice).post(undo_url(compacted), {"compaction": newest.pk}, format="json").status_code == 200


def test_ctx51_while_compact_now_runs_the_undo_is_409(compacted, alice):
    # Compact now holds the session until its worker is done (its run's status after the view is new).
    assert api(alice).post(f"/api/v1/sessions/{compacted.pk}/compact").status_code == 202
    assert Run.objects.filter(session=compacted, attention=RunAttention.COMPACT).exists()
    before = written(compacted)
    response = api(alice).post(undo_url(compacted))
    assert response.status_code == 409 and response.json()["error"]["code"] == "compaction_running"
    assert written(compacted) == before


def test_ctx51_undoing_a_second_compaction_of_one_run_returns_to_its_first(make_session, alice):
    session = make_session(alice)
    run = answered(session, "Q1", "A1")
    first = compact(run)
    answer(run, "A1 again", "a-again")
    second = compact(run)
    assert run_finish(run=run, status=Run.Status.COMPLETED)
    result = compaction_undo(session=session, by=alice)
    assert result.undone.pk == second.pk and result.snapshot.revision == 3
    assert result.snapshot.covered_seq == first.covered_seq and result.snapshot.messages == first.messages


@pytest.mark.usefixtures("require_postgres")
def test_ctx51_two_tabs_undoing_at_once_exactly_one_wins(compacted, alice):
    results = _in_threads(2, lambda index: compaction_undo(session=compacted, by=alice))
    refused = [r for r in results if isinstance(r, Conflict)]
    assert len(refused) == 1 and refused[0].code == "already_undone", results
    assert SessionMessage.objects.filter(session=compacted, kind="compaction_undone").count() == 1
    assert CompactionSnapshot.objects.filter(instance__run__session=compacted).count() == 2


@pytest.mark.usefixtures("require_postgres")
def test_ctx51_an_undo_and_a_question_at_once_are_ordered_by_the_session_lock(compacted, alice):
    def work(index: int):
        if index == 0:
            return compaction_undo(session=compacted, by=alice)
        return question_ask(session=compacted, content="Q3")

    undo, asked = _in_threads(2, work)
    assert isinstance(asked, Run), asked
    if isinstance(undo, Conflict):  # the question came first: its run is active
        assert undo.code == "answer_running"
        assert not SessionMessage.objects.filter(session=compacted, kind="compaction_undone").exists()
    else:  # the undo came first: the question's run reads every record again
        marker = SessionMessage.objects.get(session=compacted, kind="compaction_undone")
        assert asked.inherited_watermark >= marker.seq
        assert [m["content"] for m in context_project(run=asked, instance=main_instance(run=asked)).messages] == [
            "Q1", "A1", "Q2", "A2", "Q3"]


def test_ctx51_an_undo_discards_every_summary_prepared_of_the_view_it_replaced(compacted, alice):
    """CTX-45: a summary prepared in the background summarized the compacted view; after the
    undo it no longer fits anything, so it is discarded, never committed later."""
    from sessions.models import PreparedCompaction

    run = Run.objects.filter(session=compacted).order_by("-id").first()
    prepared = PreparedCompaction.objects.create(
        session=compacted, run=run, instance=main_instance(run=run), status=PreparedCompaction.Status.READY,
        estimator_id="bytes-v1", summary="a summary of the compacted view", prefix=1, digest="d")
    assert api(alice).post(undo_url(compacted)).status_code == 200
    prepared.refresh_from_db()
    assert prepared.status == PreparedCompaction.Status.DISCARDED and prepared.reason == "view_changed"
