"""The wake-ups of waiting streams that are held for a moment (issue #29, LOOP-6).

A run's final answer wakes streams together with its ``run_finished``, and a step that
announces a tool call together with the call's ``tool_started``: one wake-up, one read and
one write to each stream instead of two. Whatever way a run goes, every committed event
reaches the batch sinks once, in seq order, and the per-event sinks (the log) are never
held. Observed through the public sink lists, with the run driven as a worker drives it.
"""
from __future__ import annotations

import json

import pytest

from sessions.models import Run, RunEvent
from sessions.services import events as events_module
from sessions.services.supplements import supplement_add
from tests.fakes.fake_provider import chat_stream, sequence
from tests.runloop.driving import ask_and_run

pytestmark = pytest.mark.django_db(transaction=True)

CALCULATOR = [{"id": "c1", "name": "calculator", "arguments": json.dumps({"expression": "2+2"})}]


class Wakeups(list):
    """Every batch the batch sinks (the streams' wake-ups) were handed, as (seq, type)
    lists, and the run of each (``runs``)."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[int] = []

    def __call__(self, events) -> None:
        self.append([(event.seq, event.type) for event in events])
        self.runs.append(events[0].run_id)


@pytest.fixture
def wakeups():
    recorded = Wakeups()
    events_module.batch_sinks.append(recorded)
    yield recorded
    events_module.batch_sinks.remove(recorded)


def _committed(run: Run) -> list[tuple[int, str]]:
    return list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", "type"))


def _woken_once_in_order(run: Run, batches: Wakeups) -> None:
    mine = [batch for batch, run_id in zip(batches, batches.runs) if run_id == run.pk]
    assert [event for batch in mine for event in batch] == _committed(run)


def test_a_final_answer_wakes_its_streams_together_with_the_end_of_the_run(fake_session, strict, wakeups):
    session = fake_session()
    strict.handler = sequence(chat_stream(["The ", "answer ", "is ", "four."]))
    run = ask_and_run(session, "Hi")
    assert run.status == Run.Status.COMPLETED
    _woken_once_in_order(run, wakeups)
    last = [event_type for _, event_type in wakeups[-1]]
    assert last[-1] == "run_finished"
    # The answer's step (its last words and the meter) came in the same wake-up.
    assert "context_measured" in last and "message_delta" in last
    assert all("run_finished" not in [t for _, t in batch] for batch in wakeups[:-1])


def test_a_tool_call_is_announced_together_with_its_start(fake_session, strict, wakeups):
    session = fake_session()
    strict.handler = sequence(chat_stream(tool_calls=CALCULATOR), chat_stream(["It is 4."]))
    run = ask_and_run(session, "Add two and two")
    assert run.status == Run.Status.COMPLETED
    _woken_once_in_order(run, wakeups)
    announced = next(batch for batch in wakeups if any(t == "tool_call_detected" for _, t in batch))
    assert [t for _, t in announced][-1] == "tool_started"
    # The tool's end is not held: it wakes streams on its own, before the answer.
    finished = next(batch for batch in wakeups if any(t == "tool_finished" for _, t in batch))
    assert "message_delta" not in [t for _, t in finished]


def test_the_log_sees_each_event_as_it_is_committed_not_when_its_wakeup_goes(fake_session, strict, wakeups,
                                                                             extra_sink):
    session = fake_session()
    strict.handler = sequence(chat_stream(tool_calls=CALCULATOR), chat_stream(["It is 4."]))
    logged_before_woken = []

    def per_event(event):
        if event.type == "tool_call_detected":  # its wake-up is held until tool_started is committed
            logged_before_woken.append(not any(t == "tool_call_detected" for batch in wakeups for _, t in batch))

    extra_sink(per_event)
    run = ask_and_run(session, "Add two and two")
    assert run.status == Run.Status.COMPLETED
    assert logged_before_woken == [True]
    _woken_once_in_order(run, wakeups)


def test_run5_an_answer_held_at_the_end_is_released_before_a_late_supplement_is_answered(fake_session, strict,
                                                                                       wakeups, extra_sink):
    session = fake_session()
    strict.handler = sequence(chat_stream(["First answer."]), chat_stream(["Second answer."]))
    added = {}

    def add_while_finishing(event):  # the answer's step is committed; the run is about to end
        if event.type == "context_measured" and not added:
            added["item"] = supplement_add(run=Run.objects.get(pk=event.run_id), content="Also this")

    extra_sink(add_while_finishing)
    run = ask_and_run(session, "Hi")
    assert run.status == Run.Status.COMPLETED and added
    _woken_once_in_order(run, wakeups)
    # The first answer's end woke streams on its own, before the second answer's words:
    # held past the late supplement, they would have shared a wake-up with them.
    woken_in = {seq: index for index, batch in enumerate(wakeups) for seq, _ in batch}
    committed = _committed(run)
    first_end = next(seq for seq, t in committed if t == "context_measured")
    second_words = next(seq for seq, t in committed if t == "message_delta" and seq > first_end)
    assert woken_in[first_end] < woken_in[second_words]
    assert [t for _, t in wakeups[-1]][-1] == "run_finished"


def test_a_run_that_fails_after_its_answer_was_held_still_wakes_every_stream(fake_session, strict, wakeups,
                                                                             monkeypatch):
    from runloop import loop

    session = fake_session()
    strict.handler = sequence(chat_stream(["An answer."]))

    def prepare_fails(state):  # anything between the held answer and the run's end
        raise RuntimeError("boom")

    monkeypatch.setattr(loop.compaction, "prepare_at_end", prepare_fails)
    run = ask_and_run(session, "Hi")
    assert run.status == Run.Status.FAILED
    _woken_once_in_order(run, wakeups)
    assert [t for _, t in wakeups[-1]][-1] == "run_finished"


def test_a_worker_that_loses_its_run_after_a_held_step_still_wakes_streams_for_what_it_wrote(
        fake_session, strict, wakeups):
    from runloop.reaper import runs_reap_interrupted

    session = fake_session()
    strict.handler = sequence(chat_stream(tool_calls=CALCULATOR), chat_stream(["It is 4."]))

    def reap_before_the_announcement(event):
        if event.type == "tool_call_detected":  # committed and held; the run is taken away now
            Run.objects.filter(pk=event.run_id).update(heartbeat_at="2000-01-01T00:00:00Z")
            runs_reap_interrupted()

    events_module.sinks.append(reap_before_the_announcement)
    try:
        run = ask_and_run(session, "Add two and two")
    finally:
        events_module.sinks.remove(reap_before_the_announcement)
    assert run.status != Run.Status.RUNNING
    _woken_once_in_order(run, wakeups)
    assert any(t == "tool_call_detected" for batch in wakeups for _, t in batch)



def test_loop9_an_answer_being_checked_is_shown_before_the_check(fake_session, strict, wakeups):
    session = fake_session()
    type(session.version).objects.filter(pk=session.version.pk).update(verify_before_complete=True)
    woken_when_checked = []

    def handler(request):
        if request.json["messages"][0]["content"].startswith("You check a candidate answer"):
            woken_when_checked.append([t for batch in wakeups for _, t in batch])
            return chat_stream(["VERIFIED\nfine"])
        return chat_stream(["The answer."])

    strict.handler = handler
    run = ask_and_run(session, "Hi")
    assert run.status == Run.Status.COMPLETED
    # The answer's step (its words and the meter) woke streams before the checking call.
    assert woken_when_checked and "context_measured" in woken_when_checked[0]
    _woken_once_in_order(run, wakeups)


def test_ctx45_a_run_that_asks_for_a_summary_wakes_streams_with_its_answer_before_asking(
        fake_session, strict, wakeups):
    from sessions.services.dispatch import preparation_dispatcher_set
    from tests.runloop.test_prepared_compaction import ASKED, LONG, SMALL

    session = fake_session(**SMALL)
    strict.handler = lambda request: chat_stream(["Noted. " + "Growth is steady. " * 6])
    asked_with = []  # what had woken streams when a preparation was dispatched (on its commit)
    preparation_dispatcher_set(lambda prepared_id: asked_with.append(
        {(run_id, seq) for batch, run_id in zip(wakeups, wakeups.runs) for seq, _ in batch}))
    for number in range(1, 13):
        run = ask_and_run(session, f"{ASKED} {number}. {LONG}")
        assert run.status == Run.Status.COMPLETED, run.error
        if asked_with:
            break
    assert asked_with, "the session never reached the prepare point"
    # The run's answer (its last words and the meter) had woken streams before the summary
    # was asked for; its end came after, on its own.
    answer = RunEvent.objects.filter(run=run, type="context_measured").order_by("-seq").first()
    assert (run.pk, answer.seq) in asked_with[0]
    _woken_once_in_order(run, wakeups)
    assert any(t == "compaction_preparing" for batch in wakeups for _, t in batch)


def test_a_hold_left_unreleased_on_a_thread_is_delivered_by_the_next_never_dropped(fake_session, strict, wakeups,
                                                                                   caplog):
    from sessions.services.events import BroadcastHold, event_emit

    session = fake_session()
    strict.handler = sequence(chat_stream(["Hi."]))
    run = ask_and_run(session, "Hi")
    forgotten = BroadcastHold()
    forgotten.hold()  # a holder that never releases (a bug the next hold must not inherit)
    event_emit(run_id=run.pk, type="plan_updated", data={"plan": []})
    assert not any(t == "plan_updated" for batch in wakeups for _, t in batch)
    following = BroadcastHold()
    following.hold()
    try:
        assert any(t == "plan_updated" for batch in wakeups for _, t in batch)
        assert "never released" in caplog.text
    finally:
        following.release()
    _woken_once_in_order(run, wakeups)
