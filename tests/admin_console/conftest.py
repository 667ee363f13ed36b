"""Fixtures of the admin-console tests: the operator, a console client, and a session whose
rows were all made by the services (records, events, model calls, compactions).

People come from tests/conftest.py: alice owns the session, bob shares her space.
olivia is the operator: a staff superuser who reads other people's sessions in the console.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from sessions.models import Instance, ModelCall, Run, RunEvent, Session  # noqa: F401
from sessions.selectors.instances import main_instance
from sessions.services.checkpoints import checkpoint_commit
from sessions.services.model_calls import model_call_close, model_call_open
from sessions.services.questions import question_ask
from sessions.services.records import record_append
from sessions.services.runs import run_finish
from tests.fakes.fake_provider import fake_provider  # noqa: F401  (the fixture: a provider on a loopback socket)
from tests.runloop.conftest import fake, fake_agent_factory, fake_session, strict  # noqa: F401  (runs by the real loop)
from tests.sessions.helpers import answer, call_tool, claim, tool_result

SECRET = "The vault code is 7-4-1-9"  # only ever readable decrypted


@dataclass
class Story:
    """alice's session: a finished first run with a tool call, a sub-instance and a second run."""

    session: Session
    first: Run
    second: Run
    sub: Instance
    extra: dict[str, Any] = field(default_factory=dict)


def finish(run: Run) -> None:
    assert run_finish(run=run, status=Run.Status.COMPLETED)


@pytest.fixture
def story(make_session, alice) -> Story:
    session = make_session(alice)
    first = claim(question_ask(session=session, content=f"Remember this: {SECRET}"))  # seq 1
    call_tool(first, "call_1", "calculator", "s1")  # seq 2
    tool_result(first, "call_1", "calculator", "42")  # seq 3
    sub = Instance.objects.create(run=first, parent=main_instance(run=first), key="sub-1", depth=1)
    record_append(session=session, run=first, instance=sub, kind="user",
                  message={"role": "user", "content": "Sub-task: count the pages"}, entry_key="sub-q")  # seq 4
    answer(first, "Noted. It is 42.", "s2")  # seq 5
    finish(first)  # seq 6: run_status
    second = claim(question_ask(session=session, content="And now?"))  # seq 7
    session.refresh_from_db()
    # Finishing a run logs its run_finished event; the timeline tests script their own
    # events from seq 1, so the story starts with an empty event log.
    RunEvent.objects.filter(run__session=session).delete()
    Run.objects.filter(session=session).update(event_seq=0)
    return Story(session=session, first=first, second=second, sub=sub)


ESTIMATOR_ID = "tiktoken-o200k_base-v1"  # what the loop writes for a model with no known tokenizer


def model_call(run: Run, *, purpose: str = "action", estimate: int = 1000, prompt_tokens: int | None = 1100,
               messages: list[dict] | None = None, estimates: list[int] | None = None,
               tools: list[dict] | None = None) -> ModelCall:
    """A model call logged through the loop's own service, opened then closed with its usage."""
    messages = messages if messages is not None else [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": f"Remember this: {SECRET}"}]
    call = model_call_open(
        run=run, instance=main_instance(run=run), purpose=purpose, provider="openai_compatible", model="qwen3-8b",
        estimator_id=ESTIMATOR_ID, estimated_tokens=estimate, body={"model": "qwen3-8b", "messages": messages,
                                                                     "tools": tools or []},
        estimates=estimates if estimates is not None else [10 * (i + 1) for i in range(len(messages))])
    model_call_close(call=call, outcome="ok",
                     usage={"prompt_tokens": prompt_tokens, "completion_tokens": 12} if prompt_tokens is not None
                     else None)
    return call


def metrics(*, trigger: str = "budget", before: int = 90_000, after: int = 30_000,
            segments: list[dict] | None = None, **extra: Any) -> dict[str, Any]:
    """The CTX-41 figures with every key the compaction worker stores (the engine's, then
    the worker's: duration, estimated and calibrated figures, the ratio); a test of the
    console against a real compaction is in test_compactions.py."""
    return {
        "trigger": trigger, "tokens_before_estimated": before, "tokens_before_calibrated": before,
        "tokens_after_estimated": after, "tokens_after_calibrated": after, "threshold": 80_000,
        "target": 40_000, "target_reached": after <= 40_000, "hard_limit": 100_000, "summary_calls": 2,
        "retries": 1, "summary_chars": 4_321, "summary_cap": 4_096, "summary_output_limit": 4_096,
        "summary_cut_chars": 0, "estimator_id": ESTIMATOR_ID,
        "segments": segments if segments is not None else [
            {"index": 0, "consumed": [1, 3], "messages": 3}, {"index": 1, "consumed": None, "messages": 1}],
        "planned_segments": 2, "covered": [1, 3], "retained_messages": 2, "summarized_messages": 4,
        "summary_failure": None, "error_code": None, "duration_ms": 2_500,
        "calibration_ratio": 1.0, "calibration_samples": 3, **extra,
    }


def compaction(run: Run, *, covered_seq: int, **figures: Any):
    """A committed compaction (RUN-10) with its summary record, as the worker saves it."""
    from sessions.services.records import NewRecord

    values = metrics(**figures)
    return checkpoint_commit(
        run=run, instance=main_instance(run=run), covered_seq=covered_seq, estimator_id=ESTIMATOR_ID,
        messages=[{"role": "user", "content": "summary of the earlier conversation"}], metrics=values,
        records=[NewRecord("compaction_summary", {"summary": "Earlier: the user shared a code.", "metrics": values},
                           f"compaction-{covered_seq}-{values['trigger']}")])
