"""The journal is the one writer of a run's attempt, and writes only while it owns the run
(LOOP-1, issue #46).

For every writing method of ``RunJournal``: Alice's question is claimed by a worker, the
run is then reaped and claimed again by another worker under the next attempt, and the
first worker's journal tries the write. It raises ``RunLost`` and nothing of it reaches
the database (``ledger``: records, events, call logs, instances and frames, snapshots,
views, preparations, the run and session rows). The same writes by the journal that owns
the run do write: the check is not a refusal of everything.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents.tool_registry import registry
from runloop.errors import RunLost
from runloop.journal import ApprovalAsk, NewRecord, RunJournal
from runloop.loop import run_execute
from runloop.reaper import runs_reap_interrupted
from sessions.models import Instance, ModelCall, PreparedCompaction, Run, SessionMessage
from sessions.run_errors import RunError
from sessions.selectors.instances import main_instance
from sessions.services.model_calls import CallChain
from sessions.services.questions import question_ask
from sessions.services.run_controls import run_resume
from sessions.services.supplements import supplement_add
from tests.fakes.fake_provider import chat_stream
from tests.runloop.test_lost_run_writes import ledger, take_over
from toolservers.asking import Question

pytestmark = pytest.mark.django_db(transaction=True)

BODY = {"model": "fake-model", "messages": [{"role": "user", "content": "What is 6*7?"}]}
CALL = {"provider": "openai_compatible", "model": "fake-model", "estimator_id": "dense-o200k-v1",
        "estimated_tokens": 12, "body": BODY}
SNAPSHOT = {"system": {"role": "system", "content": "Be brief."}, "tools": [], "messages": BODY["messages"],
            "sources": [None]}


def _prepared(journal: RunJournal) -> PreparedCompaction:
    return PreparedCompaction.objects.create(
        session_id=journal.run.session_id, run=journal.run, instance=journal.main, snapshot=SNAPSHOT, tokens=10,
        estimator_id="dense-o200k-v1", status=PreparedCompaction.Status.READY, summary="A summary.", prefix=1,
        ready_at=timezone.now())


def _open_call(journal: RunJournal) -> ModelCall:
    return journal.call_open(journal.main, chain=CallChain(), purpose=ModelCall.Purpose.COMPACTION, **CALL)


QUESTION = Question("form", "Which branch?", schema={"type": "object", "properties": {"branch": {"type": "string"}}})

# Each write, given the journal and what was made for it before the takeover.
WRITES: dict[str, Callable[[RunJournal, Any], Any]] = {
    "touch": lambda j, _: j.touch(),
    "owned": lambda j, _: _owned_write(j),
    "check": lambda j, _: _check_after_a_quiet_spell(j),
    "emit": lambda j, _: j.emit("compaction_started", {"trigger": "budget"}),
    "deltas": lambda j, _: _streamed(j),
    "step": lambda j, _: j.step(j.main, records=[NewRecord("assistant", {"role": "assistant", "content": "42"},
                                                          "assistant-1")],
                                events=[("context_measured", {"tokens": 10})], model_steps=1),
    "announce": lambda j, _: j.announce([("tool_started", {"call_id": "c1", "name": "calculator"})]),
    "supplements_take": lambda j, _: j.supplements_take(j.main),
    "reopen": lambda j, _: j.reopen(j.main),
    "sub_instance": lambda j, _: j.sub_instance(j.main, key="sub-1-1-0", depth=1, task="Sum 2 and 2.",
                                                call_id="d1"),
    "verdict": lambda j, _: j.verdict(j.main, {"status": "passed", "reason": "It is right."}),
    "frame": lambda j, _: j.frame(j.main, compaction_failure={"tokens": 1, "at": 1.0, "reason": "x"}),
    "model_noted": lambda j, _: j.model_noted(provider="openai_compatible", model="fake-model", other_models=False),
    "action_logged": lambda j, _: j.action_logged(j.main, outcome="provider_unavailable", finished=True, **CALL),
    "call_open": lambda j, _: _open_call(j),
    "call_close": lambda j, call: j.call_close(call, outcome="ok", usage={"prompt_tokens": 12}),
    "preparation_open": lambda j, _: j.preparation_open(),
    "preparation_request": lambda j, _: j.preparation_request(j.main, snapshot=SNAPSHOT, tokens=10, policy={},
                                                              estimator_id="dense-o200k-v1"),
    "preparation_discard": lambda j, prepared: j.preparation_discard(prepared, reason="view_changed"),
    "checkpoint": lambda j, prepared: j.checkpoint(
        j.main, prepared=prepared, messages=BODY["messages"], covered_seq=1, estimator_id="dense-o200k-v1",
        metrics={}, records=[NewRecord("compaction_summary", {"summary": "A summary.", "metrics": {}},
                                       "compaction-1-budget")]),
    "finish": lambda j, _: j.finish(Run.Status.COMPLETED),
    "finish_failed": lambda j, _: j.finish(Run.Status.FAILED, error=RunError("internal_error", "It broke.")),
    "wait_for_server": lambda j, _: j.wait_for_server(seconds=60, error=RunError("rate_limited", "Wait.")),
    "wait_for_approvals": lambda j, _: j.wait_for_approvals(j.main, step=1, asks=[ApprovalAsk(
        index=0, call_id="c1", tool="calculator", label="calculator", description="Adds.", arguments={},
        why="This tool asks before every call.")]),
    "approved_call_starts": lambda j, _: j.approved_call_starts(1),
    "input_open": lambda j, _: j.input_open(j.main, call_id="c1", question=QUESTION),
    "input_close": lambda j, row: j.input_close(row, status="expired"),
    "input_delivered": lambda j, row: j.input_delivered(row),
}
# What some writes need made while the journal still owns the run.
BEFORE: dict[str, Callable[[RunJournal], Any]] = {
    "call_close": _open_call,
    "preparation_discard": _prepared,
    "checkpoint": _prepared,
    "input_close": lambda j: j.input_open(j.main, call_id="c1", question=QUESTION),
    "input_delivered": lambda j: j.input_open(j.main, call_id="c1", question=QUESTION),
}
# Methods that write nothing: reads, what is kept in memory, the wake-ups.
NOT_WRITES = {"claim", "side", "attention", "asked", "bump", "hold", "release", "load", "step_number", "call_chain",
              "action_log"}


def _owned_write(journal: RunJournal) -> None:
    with journal.owned():
        Instance.objects.filter(pk=journal.main.pk).update(frame={"plan": []})


def _check_after_a_quiet_spell(journal: RunJournal) -> None:
    journal.touched_at = 0.0  # long ago: the check asks the run row again
    journal.check()


def _streamed(journal: RunJournal) -> None:
    text = journal.deltas("message_delta", extra={"instance": "main"}, redact=str, hold=lambda text: 0)
    text.add("Once upon")
    text.flush(final=True)


@pytest.fixture
def journal_of(fake_session, strict):
    """``journal_of(write)`` → a journal of Alice's claimed question, and what ``write``
    needed made before the run was taken over."""

    def make(write: str) -> tuple[RunJournal, Any]:
        run = question_ask(session=fake_session(), content="What is 6*7?")
        journal = RunJournal.claim(run_id=run.pk)
        assert journal is not None
        journal.main = journal.main or main_instance(run=journal.run)
        made = BEFORE[write](journal) if write in BEFORE else None
        return journal, made

    return make


def test_every_writing_method_of_the_journal_is_checked_here():
    methods = {name for name, _ in inspect.getmembers(RunJournal, callable) if not name.startswith("_")}
    assert methods - NOT_WRITES == set(WRITES) - {"finish_failed"}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_loop1_a_journal_whose_run_another_attempt_owns_writes_nothing_and_raises_run_lost(journal_of, write):
    journal, made = journal_of(write)
    take_over(journal.run.pk)
    if write == "supplements_take":  # queued for the attempt that owns the run now
        supplement_add(run=Run.objects.get(pk=journal.run.pk), content="Also: in French.")
    before = ledger(journal.run.pk)
    with pytest.raises(RunLost):
        WRITES[write](journal, made)
    assert ledger(journal.run.pk) == before


@pytest.mark.parametrize("write", ["step", "sub_instance", "verdict", "frame", "action_logged", "checkpoint",
                                   "finish"])
def test_loop1_the_journal_that_owns_the_run_writes(journal_of, write):
    journal, made = journal_of(write)
    before = ledger(journal.run.pk)
    WRITES[write](journal, made)
    assert ledger(journal.run.pk) != before


def test_loop9_a_lost_verdict_is_not_left_in_the_journals_counters(journal_of):
    journal, _ = journal_of("verdict")
    take_over(journal.run.pk)
    with pytest.raises(RunLost):
        journal.verdict(journal.main, {"status": "passed", "reason": "It is right."})
    assert "verification" not in journal.counters  # nor announced with the end by a later write
    assert not SessionMessage.objects.filter(run=journal.run, kind="context").exists()


# ------------------------------------------------------------------ end to end


def test_run6_a_pending_call_re_run_while_the_run_is_taken_over_settles_nothing(fake_session, fake, strict,
                                                                                   monkeypatch):
    """Alice's run was interrupted with a calculator call pending; resumed, its worker runs
    the call again (idempotent) and, while it runs, the run is reaped and claimed by
    another worker: the result is not saved, and nothing else is written after."""
    strict.handler = lambda request: chat_stream(["Not asked."])
    run = question_ask(session=fake_session(tools=("calculator",)), content="What is 6*7?")
    first = RunJournal.claim(run_id=run.pk)
    assert first is not None
    call = {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "6*7"}'}}
    first.step(first.main or main_instance(run=run),
               records=[NewRecord("assistant", {"role": "assistant", "content": "", "tool_calls": [call]},
                                  "assistant-1")])
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    runs_reap_interrupted()
    run_resume(run=Run.objects.select_related("session").get(pk=run.pk))  # attempt 2, the call still pending
    seen: dict[str, Any] = {}

    def taking_over(arguments, context):
        take_over(run.pk)  # attempt 3 is another worker's while the call runs again
        seen["ledger"] = ledger(run.pk)
        return "6*7 = 42"

    monkeypatch.setitem(registry, "calculator", replace(registry["calculator"], run=taking_over))
    run_execute(run_id=run.pk)
    assert seen["ledger"] and ledger(run.pk) == seen["ledger"]
    assert not SessionMessage.objects.filter(run=run, kind="tool_result").exists()
    assert fake.requests == []
