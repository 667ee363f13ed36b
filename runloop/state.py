"""What one execution of a run knows, built once when a worker claims it.

The version and budget the run froze (RUN-4), its limits (LOOP-2), its tools, where its
model calls go (a ``ModelTarget``), the watch that reads Stop and writes heartbeats, the
run's figures (one estimator and calibration, CTX-24/25) and one context pipeline per
instance (``context.ContextPipeline``), which keep each step O(new).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.db import transaction

from agents.run_limits import RunLimits
from agents.server_tools import run_tool_sessions, version_credentials
from agents.tool_registry import Tool, registry
from context import (
    Budget,
    ContextPipeline,
    ContextPolicy,
    EstimateCache,
    InstanceContext,
    PolicyError,
    RunFigures,
    answer_limit,
    budget_under_window,
    estimate_is_exact,
    get_estimator,
    prior_ratio,
)
from context.attachments import READ_FILE_TOOL
from core.redaction import Redactor
from models_catalog.errors import ContextOverflowError
from models_catalog.http import CHAT_LIMITS
from models_catalog.learning import (
    PROVIDER_REFUSAL,
    TRUNCATED_PROMPT,
    budget_in_force,
    calibration_get,
    calibration_record,
    figures_set,
    window_from_refusal,
    window_learn,
)
from models_catalog.selectors import effective_base_url
from models_catalog.target import ModelTarget, model_target
from runloop.errors import RunCancelled, RunLost, RunStopped
from runloop.watch import RunWatch
from sessions.frames import run_budget
from sessions.models import Instance, Run, SessionMessage
from sessions.run_errors import RunErrorCode, window_refused
from sessions.selectors.context import context_load
from sessions.selectors.records import record_as_engine_dict
from sessions.selectors.sessions import SessionTraits, session_traits
from sessions.services.events import BroadcastHold, events_write
from sessions.services.model_calls import CallChain
from sessions.services.ownership import RunSignals, run_owned, run_touch
from sessions.services.steps import step_announce, step_commit
from tools.read_file import files_in_view
from tools.server_tools import server_tools_build
from toolservers.sessions import RunToolSessions

CALIBRATION_SAVE_EVERY = 8
SUB_AGENT_NOTE = ("You are a sub-agent working on one delegated task. Work it through with your tools if needed, "
                  "then answer with the result only; your answer is returned to the agent that delegated.")


@dataclass
class RunState:
    """Everything one execution of a run needs, built once per claim (``run_state_build``)."""

    run: Run
    limits: RunLimits
    frozen_budget: Budget  # as the run froze it (RUN-4), under the window the server proved (CAT-9);
    # ``figures.budget`` is the one in force (a refusal during the run lowers it)
    policy: ContextPolicy | None  # the frozen context policy; None keeps the legacy threshold (CTX-40)
    tools: list[Tool]
    watch: RunWatch
    redactor: Redactor
    target: ModelTarget
    # The run's protocol sessions with its tool servers (TOOL-4): closed when the run ends.
    tool_sessions: RunToolSessions = field(default_factory=lambda: RunToolSessions({}))
    started: float = field(default_factory=time.monotonic)
    sub_instances: int = 0
    pipelines: dict[int, ContextPipeline] = field(default_factory=dict)  # per instance
    _figures: RunFigures | None = None
    # Signed thinking blocks may go back only to the model that wrote them (CTX-11): true
    # when every earlier action call of the session went to this model, and nothing was imported.
    thinking_continues: bool = False
    # The session has noted that its action calls go to this run's model (CTX-11; noted
    # before the run's first action call otherwise, ``action_call``), and whether an
    # earlier call went to another.
    model_noted: bool = False
    other_models: bool = False
    call_chains: dict[tuple[int, str], CallChain] = field(default_factory=dict)
    # What the run row said at the last write (Stop, API requests), and when that was:
    # each step reads it from its own commit instead of asking again (LOOP-1, LOOP-7).
    signals: RunSignals = field(default_factory=RunSignals)
    touched_at: float = field(default_factory=time.monotonic)
    steps: dict[int, int] = field(default_factory=dict)  # assistant records per instance
    main: Instance | None = None  # the main instance, once the run is driven
    unsaved_samples: list[float] = field(default_factory=list)
    # CTX-45: the starting points of views a background summary was asked for (or not,
    # when one was under way or ready): asked once per view, not at every step.
    preparations_asked: set[tuple[Any, ...]] = field(default_factory=set)
    # Wake-ups of streams held back for a moment (issue #29): a final answer's until the
    # run's end, a tool call's announcement until its ``tool_started``.
    broadcasts: BroadcastHold = field(default_factory=BroadcastHold)
    # The run's execution, whose every write checks that its attempt still owns the run
    # (``sessions.services.ownership``). False for the side writers that build a state to
    # make summary calls for a run they do not execute — a manual compaction of a finished
    # run, a summary prepared in the background — whose own guards keep their writes (the
    # session's compaction hold, the preparation's lease).
    executes: bool = True
    # CAT-11: whose turn a call of this state takes for a slot of the model server: the
    # run's own calls (``action``) go before summaries prepared in the background.
    slot_kind: str = "action"
    # What a side writer does at each look while its call waits for the model server: a
    # background summary keeps its preparation's lease, and gives up once it was discarded.
    slot_poll: Callable[[], None] | None = None
    # CAT-9: whether an admin set the frozen safety margin and output reserve; what was not
    # set follows a window the server proves (``context.budget_under_window``).
    margin_set: bool = False
    output_set: bool = False

    @property
    def figures(self) -> RunFigures:
        """One estimator and one calibration per run (CTX-24, CTX-25): what the provider
        counted against our estimates for this model, read once per run from what every
        earlier session of the connection taught. Every decision reads its figures."""
        if self._figures is None:
            estimates = EstimateCache(get_estimator(self.target.model, exact_tokenizer=self.target.exact_tokenizer))
            calibration = calibration_get(connection_id=self.target.connection_id, model=self.target.model,
                                          estimator_id=estimates.id, prior=self._prior(estimates.id))
            self._figures = RunFigures(estimates, calibration, self.frozen_budget)
        return self._figures

    def _prior(self, estimator_id: str) -> float:
        return prior_ratio(estimator_id, exact=estimate_is_exact(estimator_id, self.target.model,
                                                                 exact_tokenizer=self.target.exact_tokenizer))

    def pipeline(self, instance: Instance, depth: int) -> ContextPipeline:
        """The context pipeline of an instance, made at its first step and kept (LOOP-1)."""
        pipeline = self.pipelines.get(instance.pk)
        first_load = pipeline is None
        if pipeline is None:
            context = InstanceContext(open_runs={self.run.pk}, screen_tools=self.screen_tools(depth),
                                      answer_limit=answer_limit(self.figures.budget))
            pipeline = self.pipelines[instance.pk] = ContextPipeline(
                shape=self.target.shape, figures=self.figures, policy=self.policy, context=context,
                track=("request", instance.pk), keep_thinking=self.thinking_continues)
        if not pipeline.context.loaded:  # the first step, or the first after a compaction
            # The loop's first attempt at a run: its main instance was made with the run, and
            # only a compaction of this execution can give it a snapshot, none to look for
            # before (issue #29). Not a manual compaction of a finished run (no ``main`` set
            # by the loop): that run may have compacted, and so may an earlier manual one.
            made_with_run = (first_load and self.run.attempt == 0 and self.main is not None
                             and instance.pk == self.main.pk)
            pipeline.context.load(*context_load(run=self.run, instance=instance, snapshots=not made_with_run))
        return pipeline

    def screen_tools(self, depth: int) -> list[str]:
        """The tools whose results show a screen (CTX-8), beside the engine's default."""
        return [tool.name for tool in self.tools_at(depth) if tool.observes_screen]

    def call_chain(self, instance: Any, purpose: str) -> CallChain:
        """What this run last logged for an instance and purpose: the next log is its delta."""
        return self.call_chains.setdefault((instance.pk, purpose), CallChain())

    def learn_usage(self, *, estimate: int, provider_count: int | None) -> None:
        """Keep a provider's count of a request we estimated (any call: action, summary,
        check). In force at once; saved for later sessions every few samples and when the
        run ends (``calibration_save``), not with every step."""
        sample = self.figures.learn(estimate=estimate, provider_count=provider_count)
        if sample is not None:
            self.unsaved_samples.append(sample)
            if len(self.unsaved_samples) >= CALIBRATION_SAVE_EVERY:
                self.calibration_save()

    def calibration_save(self) -> None:
        """Add this run's new samples to the connection's stored calibration."""
        samples, self.unsaved_samples = self.unsaved_samples, []
        if samples:
            estimator_id = self.figures.estimator_id
            calibration_record(connection_id=self.target.connection_id, model=self.target.model,
                               estimator_id=estimator_id, prior=self._prior(estimator_id), samples=samples)

    @property
    def estimate_exact(self) -> bool:
        """Whether the run's estimator is the model's own tokenizer (CAT-10 reads its
        estimate as the count to expect)."""
        return estimate_is_exact(self.figures.estimator_id, self.target.model,
                                 exact_tokenizer=self.target.exact_tokenizer)

    def learn_refusal(self, error: ContextOverflowError, *, estimate: int, truncated: bool = False) -> int:
        """CAT-3: a context-overflow refusal. Keep its count as a calibration sample, lower
        the connection's window to what the server keeps, and this run's budget with it.
        Returns the window now in force."""
        self.learn_usage(estimate=estimate, provider_count=error.prompt_tokens)
        figures = self.figures
        refused = figures.figure(estimate)
        window = window_from_refusal(error=error, refused_tokens=refused,
                                     max_output_tokens=figures.budget.max_output_tokens)
        window = min(window, figures.budget.context_window)
        note = (f"{TRUNCATED_PROMPT}: kept {window:,} tokens of a request of about {refused:,}" if truncated else
                f"{PROVIDER_REFUSAL}: refused a request of about {refused:,} tokens"
                + (f" (it counted {error.prompt_tokens:,})" if error.prompt_tokens else "")
                + (f"; its window is {error.window:,}" if error.window else ""))
        window_learn(connection_id=self.target.connection_id, window=window, note=note)
        # CAT-9: the margin and output reserve follow the proven window unless an admin set
        # them (a 32k default's 1,024-token margin would leave a 2,048 window no input).
        # PolicyError when what the admin set leaves no input.
        figures.budget = budget_under_window(figures.budget, window, margin_set=self.margin_set,
                                             output_set=self.output_set)
        return figures.budget.context_window

    @property
    def counters(self) -> dict[str, int]:
        return self.run.counters

    def noted(self, signals: RunSignals) -> None:
        """Keep what a write just read back from the run row (a fresh Stop flag included)."""
        self.signals, self.touched_at = signals, time.monotonic()
        self.watch.noted(cancelled=signals.cancel_requested)

    def touch(self) -> None:
        """Heartbeat, counters and ownership in one UPDATE; RunLost when it is not ours."""
        signals, _ = run_touch(run=self.run, counters=self.run.counters)
        self.noted(signals)

    @contextmanager
    def owned(self) -> Iterator[None]:
        """The transaction every write of the execution that is not a step's commit goes in
        (a checkpoint, a frame, a sub-instance, a call log, a record outside a step): it
        opens with the ownership check (with the counters and heartbeat), so the block
        writes only while this attempt owns the run, else RunLost and nothing is written.
        A side writer's (``executes`` False) is a plain transaction."""
        if not self.executes:
            with transaction.atomic():
                yield
            return
        with run_owned(run=self.run, counters=self.run.counters) as signals:
            self.noted(signals)
            yield

    def emit(self, type: str, data: dict[str, Any] | None = None) -> None:
        """An event of the execution on its own: its seq taken by the ownership check
        (RunLost, nothing written, once the run is not ours), the Stop flag read back."""
        events_write(run_id=self.run.pk, events=[(type, data)], stop_flag=self.watch.stop_flag_read,
                     of_attempt=self.run.attempt if self.executes else None)

    def bump(self, name: str, by: int = 1) -> None:
        """Count in memory; the next write of the step saves the counters with it."""
        self.run.counters[name] = self.run.counters.get(name, 0) + by

    def commit(self, instance: Any, **step: Any) -> list[Any]:
        """Save a step (``sessions.services.steps.step_commit``) with the run's counters;
        RunLost when the run is not this worker's any more (then nothing was written)."""
        rows, signals = step_commit(run=self.run, instance=instance, counters=self.run.counters, **step)
        self.noted(signals)
        self.written(instance, rows)
        return rows

    def written(self, instance: Any, rows: list[SessionMessage]) -> None:
        """Records the worker just wrote to an instance: the context of its next step,
        without reading them back (LOOP-1)."""
        pipeline = self.pipelines.get(instance.pk)
        if pipeline is not None:
            pipeline.context.feed([record_as_engine_dict(row) for row in rows])

    def announce(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        """Events that go out on their own, with a fresh read of the Stop flag."""
        self.noted(step_announce(run=self.run, events=events, counters=self.run.counters))

    def step_number(self, instance: Any) -> int:
        """The next assistant step of an instance (counted once, then kept)."""
        if instance.pk not in self.steps:
            self.steps[instance.pk] = SessionMessage.objects.filter(instance=instance, kind="assistant").count()
        self.steps[instance.pk] += 1
        return self.steps[instance.pk]

    def check(self) -> None:
        """Between steps: a Stop request, then the per-run bounds (LOOP-2). Ownership and the
        Stop flag come back with every write; only a long quiet spell asks the row again."""
        if self.watch.lost:  # the heartbeat found the run taken over meanwhile
            raise RunLost()
        if time.monotonic() - self.touched_at >= self.watch.heartbeat_every:
            self.touch()
        if self.signals.cancel_requested:
            raise RunCancelled()
        reached = self.limits.reached(model_calls=self.counters.get("model_calls", 0),
                                      tool_calls=self.counters.get("tool_calls", 0),
                                      seconds=time.monotonic() - self.started)
        if reached is not None:
            raise RunStopped(RunErrorCode.LIMIT_REACHED, reached)

    def tools_at(self, depth: int) -> list[Tool]:
        """The tools an instance at ``depth`` may call: no delegation past the depth limit (RUN-3)."""
        return [tool for tool in self.tools if depth < self.limits.max_depth or not tool.delegates]


def run_state_build(run: Run) -> RunState:
    """The state of one execution of ``run``, from what it froze (RUN-4) and its connection."""
    version = run.version
    frozen = run_budget(run.budget, version=version)
    limits = RunLimits.from_dict(frozen["limits"])
    connection = version.model_connection
    endpoint_check(version=version)
    api_key = connection.api_key if connection is not None else ""
    budget = Budget(context_window=frozen["context_window"], max_output_tokens=frozen["max_output_tokens"],
                    safety_margin_tokens=frozen["safety_margin_tokens"])
    margin_set, output_set = figures_set(connection=connection)
    try:  # what the server proved of its window applies to every version and run (CAT-9)
        budget = budget_in_force(connection=connection, budget=budget)
    except PolicyError:  # the figures an admin set leave no input in the window the server keeps
        assert connection is not None
        raise RunStopped.of(window_refused(
            connection=connection.name, server_window=connection.effective_context_window(budget.context_window),
            output_limit=budget.max_output_tokens, safety_margin=budget.safety_margin_tokens,
            after_summary=False)) from None
    target = model_target(
        provider=frozen["provider"], model=frozen["model"],
        base_url=version.base_url, api_key=api_key,
        supports_images=bool(connection.supports_images) if connection is not None else False,
        # One set of limits for every call of the run: action, summary and verification.
        limits=replace(CHAT_LIMITS, read_timeout=settings.AGENTLOOM_PROVIDER_READ_TIMEOUT),
        connection_id=connection.pk if connection is not None else None,
        concurrency=connection.concurrency if connection is not None else None,
    )
    sessions = run_tool_sessions(version=version)
    traits = session_traits(session_id=run.session_id, provider=target.provider, model=target.model)
    return RunState(
        thinking_continues=not traits.other_models and not traits.imported,
        model_noted=traits.model_noted,
        other_models=traits.other_models,
        signals=RunSignals(cancel_requested=run.cancel_requested, attention=run.attention),
        run=run,
        limits=limits,
        frozen_budget=budget,
        margin_set=margin_set,
        output_set=output_set,
        policy=ContextPolicy.from_dict(frozen["context_policy"]) if frozen["context_policy"] else None,
        tools=[*(registry[name] for name in version.tools if name in registry), *_file_tools(run, version, traits),
               *server_tools_build(version=version, sessions=sessions)],
        watch=RunWatch(run.pk, attempt=run.attempt),
        redactor=Redactor(version_credentials(version=version, sessions=sessions)),
        target=target,
        tool_sessions=sessions,
    )


def _file_tools(run: Run, version: Any, traits: SessionTraits) -> list[Tool]:
    """RUN-13: ``read_file`` for every agent whose run sees a question with files (the
    view names it for the rest of a long file), unless the agent chose it already."""
    if READ_FILE_TOOL in version.tools:
        return []
    try:
        return [registry[READ_FILE_TOOL]] if files_in_view(run=run, traits=traits) else []
    except Instance.DoesNotExist:  # no main line yet: no question, no files
        return []


def endpoint_check(*, version: Any) -> None:
    """CAT-6: a key goes only to the endpoint it was entered for. A version froze its
    connection's endpoint when it was published; the key is read live. When the connection
    has since moved (a new base URL or provider, with a key entered for *that* endpoint),
    the version's endpoint is no longer the key's: refuse, and say who can fix it."""
    connection = version.model_connection
    if connection is None:
        return
    frozen = (version.provider, effective_base_url(provider=version.provider, base_url=version.base_url))
    current = (connection.provider, effective_base_url(provider=connection.provider, base_url=connection.base_url))
    if frozen != current:
        raise RunStopped(RunErrorCode.ENDPOINT_CHANGED, "This agent's model connection now points to another "
                         "endpoint than the published version; nothing was sent. An admin must publish the agent "
                         "again.")


def system_message(state: RunState, depth: int) -> dict[str, Any]:
    """The instructions of the version; a sub-agent is told what it is for (RUN-3)."""
    text = state.run.version.instructions or "You are a helpful assistant."
    if depth:
        text = f"{text}\n\n{SUB_AGENT_NOTE}"
    return {"role": "system", "content": text}
