"""What one execution of a run knows, built once when a worker claims it.

The version and budget the run froze (RUN-4), its limits (LOOP-2), its tools, where its
model calls go (a ``ModelTarget``), the watch that reads Stop and writes heartbeats, and
the per-run caches that keep each step O(new) (CTX-24).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.utils import timezone

from agentloom.agents.tool_registry import Tool, registry
from agentloom.runloop.errors import RunCancelled, RunLost, RunStopped
from agentloom.runloop.redaction import Redactor
from agentloom.runloop.watch import RunWatch
from agentloom.tools.delegate import MAX_DEPTH
from context import Budget, EstimateCache, get_estimator
from models_catalog.http import CHAT_LIMITS
from models_catalog.target import ModelTarget, model_target
from sessions.models import Run
from sessions.services.history import ContextCache

DEFAULT_LIMITS = {"max_model_calls": 25, "max_tool_calls": 50, "max_wall_seconds": 900, "max_depth": MAX_DEPTH,
                  "max_sub_instances": 8}
SUB_AGENT_NOTE = ("You are a sub-agent working on one delegated task. Work it through with your tools if needed, "
                  "then answer with the result only; your answer is returned to the agent that delegated.")


@dataclass
class RunState:
    """Everything one execution of a run needs, built once per claim (``run_state_build``)."""

    run: Run
    limits: dict[str, int]
    budget: Budget
    tools: list[Tool]
    watch: RunWatch
    redactor: Redactor
    target: ModelTarget
    started: float = field(default_factory=time.monotonic)
    sub_instances: int = 0
    caches: dict[int, ContextCache] = field(default_factory=dict)
    estimates: EstimateCache | None = None
    calibration: float = 1.0  # provider count / our estimate, set at each preparation (CTX-25)

    def estimator(self) -> EstimateCache:
        """One estimate cache per run: each step estimates only what is new (CTX-24)."""
        if self.estimates is None:
            self.estimates = EstimateCache(get_estimator(self.target.model,
                                                         exact_tokenizer=self.target.exact_tokenizer))
        return self.estimates

    @property
    def counters(self) -> dict[str, int]:
        return self.run.counters

    def ensure_owned(self) -> None:
        self.watch.beat(force=True)
        if self.watch.lost:
            raise RunLost()

    def bump(self, name: str, by: int = 1) -> None:
        self.run.counters[name] = self.run.counters.get(name, 0) + by
        Run.objects.filter(pk=self.run.pk).update(counters=self.run.counters, heartbeat_at=timezone.now())

    def check(self) -> None:
        """Between steps: ownership, a Stop request, then the per-run bounds (LOOP-2)."""
        self.ensure_owned()
        if self.watch.cancel_requested(fresh=True):
            raise RunCancelled()
        self.watch.beat()
        for counter, limit in (("model_calls", "max_model_calls"), ("tool_calls", "max_tool_calls")):
            if self.counters.get(counter, 0) >= self.limits[limit]:
                noun = counter.replace("_", " ")
                raise RunStopped("limit_reached", f"The run reached its limit of {self.limits[limit]} {noun}.")
        if time.monotonic() - self.started > self.limits["max_wall_seconds"]:
            raise RunStopped("limit_reached", f"The run reached its time limit of {self.limits['max_wall_seconds']} seconds.")

    def tools_at(self, depth: int) -> list[Tool]:
        """The tools an instance at ``depth`` may call: no delegation past the depth limit (RUN-3)."""
        return [tool for tool in self.tools if depth < self.limits["max_depth"] or not tool.delegates]


def run_state_build(run: Run) -> RunState:
    """The state of one execution of ``run``, from what it froze (RUN-4) and its connection."""
    version = run.version
    frozen = run.budget or {}
    limits = {**DEFAULT_LIMITS, **{k: v for k, v in (frozen.get("limits") or {}).items() if isinstance(v, int)}}
    connection = version.model_connection
    api_key = connection.api_key if connection is not None else ""
    target = model_target(
        provider=frozen.get("provider", version.provider), model=frozen.get("model", version.model),
        base_url=version.base_url, api_key=api_key,
        supports_images=bool(connection.supports_images) if connection is not None else False,
        # One set of limits for every call of the run: action, summary and verification.
        limits=replace(CHAT_LIMITS, read_timeout=settings.AGENTLOOM_PROVIDER_READ_TIMEOUT),
    )
    return RunState(
        run=run,
        limits=limits,
        budget=Budget(context_window=frozen.get("context_window", version.context_window),
                      max_output_tokens=frozen.get("max_output_tokens", version.max_output_tokens),
                      safety_margin_tokens=frozen.get("safety_margin_tokens", version.safety_margin_tokens)),
        tools=[registry[name] for name in version.tools if name in registry],
        watch=RunWatch(run.pk, attempt=run.attempt),
        redactor=Redactor([api_key]),
        target=target,
    )


def system_message(state: RunState, depth: int) -> dict[str, Any]:
    """The instructions of the version; a sub-agent is told what it is for (RUN-3)."""
    text = state.run.version.instructions or "You are a helpful assistant."
    if depth:
        text = f"{text}\n\n{SUB_AGENT_NOTE}"
    return {"role": "system", "content": text}
