"""What one execution of a run knows, built once when a worker claims it.

The version and budget the run froze (RUN-4), its limits (LOOP-2), its tools, where its
model calls go (a ``ModelTarget``), the run's figures (one estimator and calibration,
CTX-24/25) and one context pipeline per instance (``context.ContextPipeline``), which keep
each step O(new). It writes nothing: every write of the run's execution is its journal's
(``runloop.journal.RunJournal``), which the state carries for the step machine.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings

from agents.run_limits import RunLimits
from agents.server_tools import run_tool_sessions, version_credentials
from agents.tool_registry import DEFAULT_BUILTIN_APPROVAL, Tool, registry
from context import (
    Budget,
    ContextPipeline,
    ContextPolicy,
    EstimateCache,
    InstanceContext,
    PolicyError,
    RequestShape,
    RunFigures,
    answer_limit,
    get_estimator,
)
from context.anthropic_validate import MEMORY_TOOL_TYPE
from context.attachments import READ_FILE_TOOL
from context.compaction.masking import READ_TOOL as READ_RECORD_TOOL
from core.redaction import Redactor
from models_catalog.http import CHAT_LIMITS
from models_catalog.learning import budget_in_force, calibration_get, figures_set
from models_catalog.selectors import effective_base_url
from models_catalog.target import ModelTarget, model_target
from runloop.errors import RunStopped
from runloop.journal import RunJournal
from runloop.learning import prior
from sessions.frames import run_budget
from sessions.models import Instance, Run
from sessions.run_errors import RunErrorCode, window_refused
from sessions.selectors.sessions import SessionTraits, session_traits
from tools.read_file import files_in_view
from tools.server_tools import server_tools_build
from toolservers.sessions import RunToolSessions

MEMORY_TOOL = "memory"
NO_NATIVE_MEMORY = ("claude-3", "claude-2", "claude-instant")  # Anthropic's memory tool came with Claude 4

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
    redactor: Redactor
    target: ModelTarget
    # One estimator and one calibration per run (CTX-24, CTX-25): what the provider counted
    # against our estimates for this model, read once per run from what every earlier
    # session of the connection taught. Every decision reads its figures.
    figures: RunFigures
    # The run's one writer (``runloop.journal``): every write of its execution, and what the
    # run row said at the last of them (Stop, the API's requests).
    journal: RunJournal
    # The run's protocol sessions with its tool servers (TOOL-4): closed when the run ends.
    tool_sessions: RunToolSessions = field(default_factory=lambda: RunToolSessions({}))
    started: float = field(default_factory=time.monotonic)
    sub_instances: int = 0
    pipelines: dict[int, ContextPipeline] = field(default_factory=dict)  # per instance
    # Signed thinking blocks may go back only to the model that wrote them (CTX-11): true
    # when every earlier action call of the session went to this model, and nothing was imported.
    thinking_continues: bool = False
    # The session has noted that its action calls go to this run's model (CTX-11; noted
    # before the run's first action call otherwise, ``action_call``), and whether an
    # earlier call went to another.
    model_noted: bool = False
    other_models: bool = False
    unsaved_samples: list[float] = field(default_factory=list)
    # CTX-45: the starting points of views a background summary was asked for (or not,
    # when one was under way or ready): asked once per view, not at every step.
    preparations_asked: set[tuple[Any, ...]] = field(default_factory=set)
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
    def shape(self) -> RequestShape:
        """What shapes this run's requests: its target's, with the memory tool offered as
        Anthropic's own on the native wire (MEM-2)."""
        if self.target.dialect != "anthropic" or not any(tool.name == MEMORY_TOOL for tool in self.tools):
            return self.target.shape
        if self.target.model.startswith(NO_NATIVE_MEMORY):
            return self.target.shape  # models before Claude 4 have no memory tool: the function
        return replace(self.target.shape, native_tools=((MEMORY_TOOL, MEMORY_TOOL_TYPE),))

    def request_parts(self, depth: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The system message and the tool schemas of every request of an instance at ``depth``."""
        return system_message(self, depth), [tool.schema() for tool in self.tools_at(depth)]

    def pipeline(self, instance: Instance, depth: int) -> ContextPipeline:
        """The context pipeline of an instance, made at its first step and kept (LOOP-1)."""
        pipeline = self.pipelines.get(instance.pk)
        first_load = pipeline is None
        if pipeline is None:
            context = InstanceContext(open_runs={self.run.pk}, screen_tools=self.screen_tools(depth),
                                      answer_limit=answer_limit(self.figures.budget))
            pipeline = self.pipelines[instance.pk] = ContextPipeline(
                shape=self.shape, figures=self.figures, policy=self.policy, context=context,
                track=("request", instance.pk), keep_thinking=self.thinking_continues)
            self.journal.feeds[instance.pk] = pipeline  # what the journal writes is the next step's context
        if not pipeline.context.loaded:  # the first step, or the first after a compaction
            # The loop's first attempt at a run: its main instance was made with the run, and
            # only a compaction of this execution can give it a snapshot, none to look for
            # before (issue #29). Not a manual compaction of a finished run (no ``main`` set
            # by the loop): that run may have compacted, and so may an earlier manual one.
            main = self.journal.main if self.journal.executes else None
            made_with_run = first_load and self.run.attempt == 0 and main is not None and instance.pk == main.pk
            pipeline.context.load(*self.journal.load(instance=instance, snapshots=not made_with_run))
        return pipeline

    def screen_tools(self, depth: int) -> list[str]:
        """The tools whose results show a screen (CTX-8), beside the engine's default."""
        return [tool.name for tool in self.tools_at(depth) if tool.observes_screen]

    def check(self) -> None:
        """Between steps: a Stop request, then the per-run bounds (LOOP-2). Ownership and the
        Stop flag come back with every write (``RunJournal.check``); then the limits."""
        self.journal.check()
        counters = self.journal.counters
        reached = self.limits.reached(model_calls=counters.get("model_calls", 0),
                                      tool_calls=counters.get("tool_calls", 0),
                                      seconds=time.monotonic() - self.started)
        if reached is not None:
            raise RunStopped(RunErrorCode.LIMIT_REACHED, reached)

    def tools_at(self, depth: int) -> list[Tool]:
        """The tools an instance at ``depth`` may call: no delegation past the depth limit (RUN-3)."""
        # A sub-agent has no memory: the person's memory is the main agent's (MEM-3).
        return [tool for tool in self.tools if (depth < self.limits.max_depth or not tool.delegates)
                and not (depth and tool.name == MEMORY_TOOL)]


def run_state_build(run: Run, journal: RunJournal | None = None) -> RunState:
    """The state of one execution of ``run``, from what it froze (RUN-4) and its connection.
    ``journal``: its writer — by default the journal of the attempt that claimed it; a side
    writer (a manual compaction, a summary prepared in the background) passes its own
    (``RunJournal.side``), whose writes are kept by their own guards."""
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
    policy = ContextPolicy.from_dict(frozen["context_policy"]) if frozen["context_policy"] else None
    approvals = version.tool_approvals or {}  # TOOL-7: the built-ins' policies as frozen
    chosen = [*(replace(registry[name], approval=approvals.get(name, DEFAULT_BUILTIN_APPROVAL))
                for name in version.tools if name in registry), *_file_tools(run, version, traits),
              *server_tools_build(version=version, sessions=sessions), *_memory_tool(run, approvals)]
    return RunState(
        thinking_continues=not traits.other_models and not traits.imported,
        model_noted=traits.model_noted,
        other_models=traits.other_models,
        run=run,
        limits=limits,
        frozen_budget=budget,
        margin_set=margin_set,
        output_set=output_set,
        policy=policy,
        tools=[*chosen, *_record_tools(chosen, policy)],
        journal=journal if journal is not None else RunJournal(
            run=run, instance=getattr(run, "main_as_claimed", None), attempt=run.attempt),
        redactor=Redactor(version_credentials(version=version, sessions=sessions)),
        target=target,
        figures=_figures(target, budget),
        tool_sessions=sessions,
    )


def _figures(target: ModelTarget, budget: Budget) -> RunFigures:
    estimates = EstimateCache(get_estimator(target.model, exact_tokenizer=target.exact_tokenizer))
    calibration = calibration_get(connection_id=target.connection_id, model=target.model, estimator_id=estimates.id,
                                  prior=prior(target, estimates.id))
    return RunFigures(estimates, calibration, budget)


def _file_tools(run: Run, version: Any, traits: SessionTraits) -> list[Tool]:
    """RUN-13: ``read_file`` for every agent whose run sees a question with files (the
    view names it for the rest of a long file), unless the agent chose it already."""
    if READ_FILE_TOOL in version.tools:
        return []
    try:
        return [registry[READ_FILE_TOOL]] if files_in_view(run=run, traits=traits) else []
    except Instance.DoesNotExist:  # no main line yet: no question, no files
        return []


def _memory_tool(run: Run, approvals: dict[str, str]) -> list[Tool]:
    """MEM-2: the ``memory`` tool for a run that carries its person's memory (``Run.memory``
    is set when the version has memory and the person uses it), under its frozen policy."""
    if run.memory is None:
        return []
    return [replace(registry[MEMORY_TOOL], approval=approvals.get(MEMORY_TOOL, DEFAULT_BUILTIN_APPROVAL))]


def _record_tools(chosen: list[Tool], policy: ContextPolicy | None) -> list[Tool]:
    """CTX-47: ``read_record`` for an agent with tools whose policy folds older tool results
    (``mask_tool_results``), unless it chose it already: a folded result's note says how to
    read it back whole, and a note naming a tool the agent cannot call would be a dead end.
    Offered from the first request, not from the first fold, so the tool list -- part of the
    cached prefix -- stays the same for the whole session."""
    if policy is None or not policy.mask_tool_results or not chosen:
        return []
    if any(tool.name == READ_RECORD_TOOL for tool in chosen):
        return []
    return [registry[READ_RECORD_TOOL]]


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
    """The instructions of the version; a sub-agent is told what it is for (RUN-3). The
    main agent's carries the person's memory after them, as a block of its own (MEM-3):
    frozen with the run, so every request of the run starts with the same bytes, and
    outside the messages, so no compaction summarizes or folds it."""
    text = state.run.version.instructions or "You are a helpful assistant."
    if depth:
        return {"role": "system", "content": f"{text}\n\n{SUB_AGENT_NOTE}"}
    if state.run.memory is None:
        return {"role": "system", "content": text}
    return {"role": "system", "content": [{"type": "text", "text": text}, {"type": "text", "text": state.run.memory}]}
