"""A worker that lost its run writes nothing more (LOOP-1, issue #44 item 8).

Each write an execution can make — a step, a tool announcement, a heartbeat, an event on its
own, streamed text, a frame, a supplement taken, a sub-agent, a pending call settled, a
completion check, a plan, a tool's progress, a call log, a summary — is tried by a worker
whose run was taken over meanwhile: reaped (``interrupted``), resumed and claimed by another
worker under the next attempt, as the reaper and a resume do. The write raises ``RunLost``
and nothing of it reaches the database: the ledger (records, events, call logs, instances
and their frames, snapshots, views, preparations, the run and session rows) is what the
takeover left. End to end, the same holds of a completion check, a delegation, a resumed
run settling its pending calls and a run that could not start, when the run is taken over
while they are under way.
"""
from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from agents.tool_registry import registry
from models_catalog.models import ModelConnection
from models_catalog.providers.events import ToolCall
from runloop.compaction import step_request
from runloop.errors import RunLost
from runloop.journal import RunWatch
from runloop.loop import instance_loop, run_execute
from runloop.reaper import runs_reap_interrupted
from runloop.state import RunState, run_state_build, system_message
from runloop.tool_calls import ToolGroup, resolve_pending_calls, tool_context
from runloop.verification import run_verify
from sessions.models import (
    CompactionSnapshot,
    Instance,
    ModelCall,
    PreparedCompaction,
    Run,
    RunAttention,
    RunEvent,
    SentBlob,
    Session,
    SessionMessage,
    SessionView,
)
from sessions.selectors.instances import main_instance
from sessions.services.frames import frame_update
from sessions.services.questions import question_ask
from sessions.services.records import NewRecord
from sessions.services.run_controls import run_resume
from sessions.services.runs import run_claim
from sessions.services.supplements import supplement_add
from tests.fakes.fake_provider import chat_stream, error
from tools.invoke import tool_invoke

pytestmark = pytest.mark.django_db(transaction=True)


def take_over(run_id: int) -> None:
    """What happens to a run whose worker went quiet: the reaper ends it (``interrupted``),
    its person resumes it, and another worker claims it under the next attempt."""
    Run.objects.filter(pk=run_id).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert run_id in runs_reap_interrupted()
    run_resume(run=Run.objects.select_related("session").get(pk=run_id))
    assert run_claim(run_id=run_id) is not None


def ledger(run_id: int) -> dict[str, Any]:
    """Everything an execution of the run could write."""
    run = Run.objects.get(pk=run_id)
    instances = Instance.objects.filter(run_id=run_id)
    session = Session.objects.get(pk=run.session_id)
    return {
        "records": list(SessionMessage.objects.filter(session_id=run.session_id).order_by("seq")
                        .values_list("seq", "kind", "entry_key")),
        "events": list(RunEvent.objects.filter(run_id=run_id).order_by("seq").values_list("seq", "type")),
        "calls": list(ModelCall.objects.filter(run_id=run_id).order_by("pk")
                      .values_list("pk", "purpose", "outcome", "finished_at")),
        "blobs": SentBlob.objects.filter(session_id=run.session_id).count(),
        "instances": [(row.pk, row.key, row.model_steps, row.baseline_model_steps, row.frame)
                      for row in instances.order_by("pk")],
        "snapshots": CompactionSnapshot.objects.filter(instance__in=instances).count(),
        "views": SessionView.objects.filter(session_id=run.session_id).count(),
        "preparations": list(PreparedCompaction.objects.filter(session_id=run.session_id).values_list("pk", "status")),
        "run": (run.status, run.attempt, run.counters, run.heartbeat_at, run.event_seq, run.attention, run.error),
        "session": (session.last_seq, session.action_model),
    }


@pytest.fixture
def lost(fake_session, strict):
    """``lost(**agent)`` → the state of a worker's execution of a fresh question, whose run
    another attempt now owns; the ledger is taken after the takeover."""
    strict.handler = lambda request: chat_stream(["An answer nobody should save."])

    def make(before=None, **agent_options) -> tuple[RunState, dict[str, Any]]:
        run = question_ask(session=fake_session(**agent_options), content="What is 6*7?")
        claimed = run_claim(run_id=run.pk)
        state = run_state_build(claimed)
        state.journal.main = main_instance(run=claimed)
        if before is not None:
            before(state)
        take_over(run.pk)
        return state, ledger(run.pk)

    return make


def _assistant_with_call(name: str, arguments: dict[str, Any]) -> NewRecord:
    return NewRecord("assistant", {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]},
        "assistant-1")


def _step(state: RunState) -> None:
    answer = NewRecord("assistant", {"role": "assistant", "content": "42"}, "assistant-1")
    state.journal.step(state.journal.main, records=[answer], events=[("context_measured", {"tokens": 10})])


def _announcement(state: RunState) -> None:
    state.journal.announce([("tool_started", {"call_id": "c1", "name": "calculator"})])


def _heartbeat_and_counters(state: RunState) -> None:
    state.journal.bump("model_calls")
    state.journal.touch()


def _event_alone(state: RunState) -> None:
    state.journal.emit("compaction_started", {"trigger": "budget", "tokens": 1})


def _events_in_a_transaction(state: RunState) -> None:
    with transaction.atomic():
        state.journal.emit("compaction_started", {"trigger": "budget", "tokens": 1})


def _streamed_text(state: RunState) -> None:
    buffer = state.journal.deltas("message_delta", extra={}, redact=str, hold=lambda text: 0)
    buffer.add("Once upon")
    buffer.flush(final=True)


def _frame(state: RunState) -> None:
    with state.journal.owned():
        frame_update(instance=state.journal.main, compaction_failure={"tokens": 1, "at": 1.0, "reason": "x"})


def _first_step_notes_the_model(state: RunState) -> None:
    instance_loop(state, state.journal.main, 0)


def _delegation(state: RunState) -> None:
    call = ToolCall(id="d1", name="delegate", arguments=json.dumps({"task": "Sum 2 and 2."}))
    ToolGroup(state, state.journal.main, 1, [call]).run_delegations(instance_loop, 0)


def _completion_check(state: RunState) -> None:
    run_verify(state, state.journal.main, "42")


def _plan(state: RunState) -> None:
    call = ToolCall(id="p1", name="update_plan", arguments=json.dumps({"steps": [{"step": "x", "status": "done"}]}))
    tool_invoke(registry["update_plan"], call.arguments, tool_context(state, state.journal.main, call))


def _tool_progress(state: RunState) -> None:
    call = ToolCall(id="t1", name="calculator", arguments="{}")
    tool_context(state, state.journal.main, call).services["progress"](1.0, 2.0, "half way")


def _compaction(state: RunState) -> None:
    schemas = [tool.schema() for tool in state.tools_at(0)]
    main = state.journal.main
    step_request(state, main, state.pipeline(main, 0), system_message(state, 0), schemas, depth=0, force="budget")


WRITES = [_step, _announcement, _heartbeat_and_counters, _event_alone, _events_in_a_transaction, _streamed_text,
          _frame, _first_step_notes_the_model, _delegation, _completion_check, _plan, _tool_progress, _compaction]


@pytest.mark.parametrize("write", WRITES, ids=[write.__name__.strip("_") for write in WRITES])
def test_loop1_a_write_of_a_run_another_attempt_owns_raises_run_lost_and_writes_nothing(lost, fake, write):
    state, before = lost(tools=("calculator", "delegate", "update_plan"))
    with pytest.raises(RunLost):
        write(state)
    assert ledger(state.run.pk) == before
    assert fake.requests == []  # nothing was sent for it either


def test_loop1_a_lost_worker_takes_no_supplement(lost):
    def supplement_seen(state):
        supplement_add(run=state.run, content="Also: in French.")
        state.journal.touch()  # the worker learns of it from a write, as after a step
        assert state.journal.signals.attention & RunAttention.SUPPLEMENT

    state, before = lost(before=supplement_seen)
    with pytest.raises(RunLost):
        instance_loop(state, state.journal.main, 0)
    assert ledger(state.run.pk) == before  # still queued for the attempt that owns the run


def test_run6_a_lost_worker_settles_no_pending_call(lost):
    def a_call_left_pending(state):
        state.journal.step(state.journal.main, records=[_assistant_with_call("calculator", {"expression": "6*7"})])

    state, before = lost(before=a_call_left_pending)
    with pytest.raises(RunLost):
        resolve_pending_calls(state, state.journal.main)
    assert ledger(state.run.pk) == before


def test_loop1_a_heartbeat_of_a_lost_run_writes_nothing_and_stops_what_it_runs(lost):
    state, before = lost()
    watch = RunWatch(state.run.pk, attempt=state.run.attempt)
    watch.beat(force=True)
    assert watch.lost and watch.cancel_requested()  # what streams or runs for it is told to stop
    assert ledger(state.run.pk) == before


# ------------------------------------------------------------------ end to end


def test_loop9_a_completion_check_of_a_reaped_run_writes_no_verdict(fake_session, strict):
    session = fake_session()
    type(session.version).objects.filter(pk=session.version_id).update(verify_before_complete=True)
    seen: dict[str, Any] = {}

    def handler(request):
        if request.json["messages"][0]["content"].startswith("You check a candidate answer"):
            take_over(seen["run"])  # another worker has the run while its answer is checked
            seen["ledger"] = ledger(seen["run"])
            return chat_stream(["VERIFIED\nIt is right."])
        return chat_stream(["42."])

    strict.handler = handler
    run = question_ask(session=session, content="What is 6*7?")
    seen["run"] = run.pk
    run_execute(run_id=run.pk)
    after = ledger(run.pk)
    assert after == seen["ledger"]  # no verdict in the counters, no check record, the check's log left open
    assert "verification" not in after["run"][2]
    assert not SessionMessage.objects.filter(run=run, kind="context").exists()


def test_run3_a_delegation_of_a_reaped_run_writes_nothing_more(fake_session, strict):
    seen: dict[str, Any] = {}

    def handler(request):
        messages = request.json["messages"]
        if "sub-agent" in messages[0]["content"]:
            take_over(seen["run"])  # while the sub-agent's model call is under way
            seen["ledger"] = ledger(seen["run"])
            return error(400, "bad request", code="invalid_request_error")  # the sub-agent fails: no retry
        return chat_stream(tool_calls=[{"id": "d1", "name": "delegate", "arguments": json.dumps({"task": "Sum."})}])

    strict.handler = handler
    run = question_ask(session=fake_session(tools=["delegate"]), content="Delegate it.")
    seen["run"] = run.pk
    run_execute(run_id=run.pk)
    # Neither the failed call's log, nor the sub-agent's end, nor the delegation's result.
    assert ledger(run.pk) == seen["ledger"]


def test_run6_a_resumed_run_taken_over_as_it_starts_settles_no_pending_call(fake_session, fake, strict, extra_sink):
    strict.handler = lambda request: chat_stream(["Not asked."])
    run = question_ask(session=fake_session(), content="What is 6*7?")
    first = run_claim(run_id=run.pk)
    state = run_state_build(first)
    state.journal.step(main_instance(run=first), records=[_assistant_with_call("calculator", {"expression": "6*7"})])
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    runs_reap_interrupted()
    run_resume(run=Run.objects.select_related("session").get(pk=run.pk))  # attempt 1, with a call pending
    seen: dict[str, Any] = {}

    def taken_over_once_claimed(event):
        if event.type == "run_started" and event.payload.get("attempt") == 1 and "ledger" not in seen:
            seen["ledger"] = {}
            take_over(run.pk)  # attempt 2 is another worker's before attempt 1 writes anything
            seen["ledger"] = ledger(run.pk)

    extra_sink(taken_over_once_claimed)
    run_execute(run_id=run.pk)
    assert seen["ledger"] and ledger(run.pk) == seen["ledger"]  # no "resumed" record, no settled call
    assert not SessionMessage.objects.filter(run=run, kind="tool_result").exists()
    assert fake.requests == []


def test_loop1_a_run_that_cannot_start_is_not_failed_once_another_attempt_owns_it(fake_session, extra_sink):
    session = fake_session()
    ModelConnection.objects.filter(pk=session.version.model_connection_id).update(base_url="http://127.0.0.1:9/v1")
    run = question_ask(session=session, content="Hi")
    seen: dict[str, Any] = {}

    def taken_over_once_claimed(event):
        if event.type == "run_started" and "ledger" not in seen:
            seen["ledger"] = {}
            take_over(run.pk)
            seen["ledger"] = ledger(run.pk)

    extra_sink(taken_over_once_claimed)
    run_execute(run_id=run.pk)  # its connection moved (CAT-6): this attempt cannot start
    assert ledger(run.pk) == seen["ledger"]
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING  # the next attempt's, untouched
