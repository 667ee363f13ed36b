"""Helpers of the approval fault tests (TOOL-9): a counting tool server, an agent whose three
server tools all wait for a person, a scripted model, and what "exactly once" means.

The model asks for the three tools in one step — ``lookup`` (read-only), ``set_flag``
(idempotent), ``send_payment`` (destructive) — each with the policy ``always``, so even
the read-only one waits. The server writes one line per effect to a file
(``tests.fakes.counting_server``), which the worker processes and the test read alike.
"""
from __future__ import annotations

import json
import os
import threading
from collections import Counter
from typing import Any

import pytest

from runloop.loop import run_execute
from runloop.reaper import runs_reap_interrupted
from sessions.models import Run, SessionMessage, ToolApproval
from sessions.selectors.approvals import approvals_waiting
from sessions.services.approvals import approval_decide
from sessions.services.dispatch import dispatcher_set
from sessions.services.run_controls import run_resume
from tests.fakes.counting_server import EFFECTS_FILE_ENV, TOOLS, CountingServer, effects_read
from tests.fakes.fake_provider import Hang, chat_stream
from tests.faults.support import celery_dispatcher
from toolservers.services import toolserver_register

FUNCTIONS = {tool: f"pay__{tool}" for tool in TOOLS}  # the names requests carry (context.tool_names)
CALLS = [
    {"id": "pay-1", "name": FUNCTIONS["lookup"], "arguments": json.dumps({"account": "ACME"})},
    {"id": "pay-2", "name": FUNCTIONS["set_flag"], "arguments": json.dumps({"name": "reviewed", "value": True})},
    {"id": "pay-3", "name": FUNCTIONS["send_payment"], "arguments": json.dumps({"to": "ACME", "amount": 120.0})},
]
ANSWER = "All three are settled."


@pytest.fixture
def counting(tmp_path, monkeypatch):
    """The counting server, its effects file named in this process's environment (the server
    serves from a thread of the test process; a worker started later inherits the variable)."""
    path = tmp_path / "effects.jsonl"
    monkeypatch.setenv(EFFECTS_FILE_ENV, str(path))
    with CountingServer() as server:
        yield server


@pytest.fixture
def pay_session(space, alice, fake, dialect, counting):
    """``make(policy="always")``: a session of Alice's on an agent with the three ``pay``
    tools, each with that approval policy, on the strict fake provider (on the module's
    provider wire)."""
    from agents.services import agent_create, agent_publish
    from models_catalog.models import ModelConnection
    from sessions.models import Session
    from tests.runloop.conftest import DIALECT_PROVIDERS, FAKE_KEY

    toolserver_register(space=space, data={"name": "pay", "url": counting.url})
    provider, model = DIALECT_PROVIDERS[dialect]
    connection = ModelConnection.objects.create(space=space, name="Fake", provider=provider,
                                                base_url=fake.base_url, api_key=FAKE_KEY, model=model,
                                                context_window=32_768, max_output_tokens=1_024)

    def make(policy: str = "always") -> Session:
        refs = [f"pay.{tool}" for tool in TOOLS]
        agent = agent_create(space=space, name="Payer", model_connection=connection, instructions="Be brief.",
                             tools=refs, tool_overrides={ref: {"approval": policy} for ref in refs},
                             created_by=alice)
        version = agent_publish(agent=agent, published_by=alice)
        return Session.objects.create(space=space, user=alice, agent=agent, version=version)

    return make


@pytest.fixture
def redis_dispatch(private_redis):
    """Runs queued (a question, a decision's re-queue) go to the private Redis."""
    dispatch, close = celery_dispatcher(private_redis.url)
    dispatcher_set(dispatch)
    yield private_redis
    dispatcher_set(lambda run_id: None)
    close()


class PayModel:
    """First request of a question: the three calls at once. Once their results are in: the
    answer — unless ``hang_after_results``, when that request is held (and ``arrived`` set)
    until ``resumed``. Every request's messages are kept, to check each one's pairing."""

    def __init__(self, *, hang_after_results: bool = False) -> None:
        self.hang_after_results = hang_after_results
        self.arrived = threading.Event()
        self.resumed = threading.Event()
        self.requests: list[list[dict[str, Any]]] = []

    def __call__(self, request):
        messages = request.json["messages"]
        self.requests.append(messages)
        question = max(i for i, m in enumerate(messages) if m["role"] == "user")
        if not any(m["role"] == "tool" for m in messages[question:]):
            return chat_stream(tool_calls=CALLS)
        if self.hang_after_results and not self.resumed.is_set():
            self.arrived.set()
            return Hang(seconds=30)
        return chat_stream([ANSWER])

    def tool_messages(self) -> list[dict[str, Any]]:
        """The tool results of the last request, as the model read them."""
        return [m for m in self.requests[-1] if m["role"] == "tool"]


def unpaired(messages: list[dict[str, Any]]) -> list[str]:
    """The ids of tool calls a request carries without their results right after them."""
    missing: list[str] = []
    for position, message in enumerate(messages):
        if message["role"] != "assistant" or not message.get("tool_calls"):
            continue
        answered = set()
        for later in messages[position + 1:]:
            if later["role"] != "tool":
                break
            answered.add(later["tool_call_id"])
        missing += [call["id"] for call in message["tool_calls"] if call["id"] not in answered]
    return missing


def decide_all(run: Run, user, decision: str = "approve", reason: str = "") -> list[ToolApproval]:
    """Every waiting call of ``run`` decided by ``user``, one decision each, in call order."""
    waiting = approvals_waiting(run=run)
    return [approval_decide(run=run, user=user, call_id=approval.call_id, decision=decision, reason=reason)
            for approval in waiting]


def finish_elsewhere(run_id: int) -> Run:
    """What a fresh worker does with a run whose worker was killed: the reaper ends a run
    left ``running``, the person resumes it, and it is executed (here, in the test's
    process); a run left ``queued`` is simply executed."""
    run = Run.objects.get(pk=run_id)
    if run.status == Run.Status.RUNNING:
        assert runs_reap_interrupted(stale_after=0) == [run_id]
        run = Run.objects.get(pk=run_id)
    if run.status == Run.Status.INTERRUPTED:
        run_resume(run=run)
    run_execute(run_id=run_id)
    return Run.objects.get(pk=run_id)


def effects() -> list[dict[str, Any]]:
    """Every effect the counting server has written in this test (tests.fakes.counting_server)."""
    return effects_read(os.environ[EFFECTS_FILE_ENV])


def effect_counts() -> Counter[str]:
    return Counter(effect["tool"] for effect in effects())


def results_by_function(run: Run) -> dict[str, list[dict[str, Any]]]:
    """The stored tool results of ``run``, by the function they answer."""
    out: dict[str, list[dict[str, Any]]] = {}
    for record in SessionMessage.objects.filter(run=run, kind="tool_result").order_by("seq"):
        out.setdefault(record.message["name"], []).append(record.message)
    return out


def at_the_kill(run: Run) -> dict[str, str]:
    """What had become of each call when its worker died: ``stored`` (its result is
    committed), ``sent`` (the server took effect, no result stored), ``started`` (marked
    started, nothing reached the server) or ``not_started``. A call that reached the server
    was marked started first (``ToolApproval.started_at``): that mark is what keeps it from
    being sent again."""
    stored = set(results_by_function(run))
    done = effect_counts()
    started = set(ToolApproval.objects.filter(run=run, started_at__isnull=False).values_list("tool", flat=True))
    states = {}
    for tool in TOOLS:
        function = FUNCTIONS[tool]
        if function in stored:
            states[function] = "stored"
        elif done[tool]:
            assert function in started, f"{function} reached the server without being marked started"
            states[function] = "sent"
        else:
            states[function] = "started" if function in started else "not_started"
    return states


# What each call must end as, from what had become of it at the kill: (result status, the
# effects it may have had). A call that had started and has no stored result is an unknown
# outcome and never sent again; one that had not started runs once, when the run goes on.
# A call marked started with nothing at the server yet may still have been on the wire
# when its worker died, and a server finishes what it received: at most once, not exactly.
ENDS = {"stored": ("ok", {1}), "sent": ("unknown", {1}), "started": ("unknown", {0, 1}), "not_started": ("ok", {1})}


def assert_exactly_once(run: Run, model: PayModel, strict, *, at_kill: dict[str, str] | None = None) -> None:
    """The run ended with its answer; each approved call took effect at most once — exactly
    once unless it was killed between its mark and the server — with one result each,
    ``unknown`` where it was never stored; no request the model received had a call without
    its result right after it. ``at_kill``: :func:`at_the_kill` (default: nothing started)."""
    states = at_kill or {FUNCTIONS[tool]: "not_started" for tool in TOOLS}
    run = Run.objects.get(pk=run.pk)
    assert run.status == Run.Status.COMPLETED, run.error
    results = results_by_function(run)
    assert {name: [r["status"] for r in found] for name, found in results.items()} == {
        function: [ENDS[state][0]] for function, state in states.items()}, states
    assert all("may or may not" in found[0]["content"] for found in results.values()
               if found[0]["status"] == "unknown"), results
    counts = effect_counts()
    assert all(counts[tool] in ENDS[states[FUNCTIONS[tool]]][1] for tool in TOOLS), (states, effects())
    assert list(ToolApproval.objects.filter(run=run).values_list("status", flat=True)) == ["approved"] * len(TOOLS)
    assert model.requests and all(unpaired(messages) == [] for messages in model.requests)
    assert SessionMessage.objects.filter(run=run, kind="assistant").last().message["content"] == ANSWER
    assert strict.rejections == []
