"""The frame of an instance: its execution state, typed (SPEC §2 "Instance").

The frame is one encrypted JSON column on ``Instance``. These types say what it may hold;
``sessions.services.frames`` is its one writer. What the model reads lives in the records
and checkpoints, never here: the frame holds what code must remember between steps.
"""
from __future__ import annotations

from typing import Any, TypedDict


class QueuedSupplement(TypedDict):
    """A supplement sent while the run works, not yet in the records (RUN-5)."""

    id: str
    content: str
    at: str  # ISO time it arrived


class PlanStep(TypedDict):
    """One step of the agent's plan (``update_plan``, LOOP-4)."""

    step: str
    status: str  # "pending" | "in_progress" | "done"


PLAN_STATUSES = ("pending", "in_progress", "done")


class PendingCall(TypedDict):
    """A tool call of the group in flight (RUN-7 refuses views while one is; CTX-36 shows it)."""

    id: str
    name: str
    arguments: str


class CompactionFailure(TypedDict):
    """The last failed compaction, so the next tries back off (CTX-44)."""

    tokens: int  # the calibrated size of the request that could not be compacted
    at: float  # Unix time
    reason: str


class Frame(TypedDict, total=False):
    """An instance's execution state. Every key may be absent; a missing key means empty.

    ``supplements``: queued supplements (main instance only), taken into the records at
    the next safe point. ``pending_calls``: the tool group in flight — a view is never
    saved while one is (RUN-7). ``plan``: the agent's plan as it last wrote it with
    ``update_plan``; it belongs to the session's main line (LOOP-4), so a new question's
    main instance starts with the previous one's; carried verbatim through compaction by
    the runtime-state block (CTX-36), shown in the chat and handed to the completion check
    (LOOP-9). ``compaction_failure``: the back-off state of CTX-44, inherited by the
    session's next run. ``compact_requested``: a manual compaction asked for while the run
    works (CTX-43).
    """

    supplements: list[QueuedSupplement]
    pending_calls: list[PendingCall]
    plan: list[PlanStep] | str | None  # str: written before plans were lists of steps
    compaction_failure: CompactionFailure
    compact_requested: bool


def plan_text(plan: object) -> str | None:
    """The plan as the model and the completion check read it, one numbered line a step."""
    if isinstance(plan, str):  # a plan stored as text before steps had a status
        return plan.strip() or None
    if not isinstance(plan, list) or not plan:
        return None
    lines = [f"{n}. [{str(item.get('status', 'pending')).replace('_', ' ')}] {item.get('step', '')}"
             for n, item in enumerate(plan, 1) if isinstance(item, dict)]
    return "\n".join(lines) or None


def pending_calls_of(frame: Frame) -> list[PendingCall]:
    """The tool group in flight (frames from before calls had names hold bare ids)."""
    calls: list[PendingCall] = []
    for item in frame.get("pending_calls") or []:
        if isinstance(item, dict):
            calls.append(PendingCall(id=str(item.get("id", "")), name=str(item.get("name", "")),
                                     arguments=str(item.get("arguments", ""))))
        else:
            calls.append(PendingCall(id=str(item), name="", arguments=""))
    return calls


def frame_initial(*, compaction_failure: CompactionFailure | None = None,
                  plan: list[PlanStep] | str | None = None) -> Frame:
    """The frame of a new main instance (a new question): what the session's main line
    carries from its previous question — the agent's plan (LOOP-4) and the compaction
    back-off (CTX-44) — and nothing else. A plan stored as text (frames written before
    plans were lists) is carried as that text: ``list()`` of it would be its characters,
    which ``plan_text`` reads as no plan at all."""
    carried = (plan if isinstance(plan, str) else list(plan)) if plan else None
    frame: Frame = {"supplements": [], "pending_calls": [], "plan": carried}
    if compaction_failure:
        frame["compaction_failure"] = compaction_failure
    return frame


class RunBudget(TypedDict):
    """What a run froze when it was created, for its whole life, resumes included (RUN-4):
    ``Run.budget``, written by ``sessions.services.runs.budget_freeze`` and read back whole
    by ``run_budget`` (a row from before a field was frozen reads it from its version)."""

    provider: str
    model: str
    context_window: int
    max_output_tokens: int
    safety_margin_tokens: int
    context_policy: dict[str, Any] | None  # None: the legacy character threshold (CTX-40)
    limits: dict[str, int]


def run_budget(stored: dict[str, Any] | None, *, version: Any) -> RunBudget:
    """A run's frozen budget with every field present: what was frozen, else the version's."""
    frozen = stored or {}
    limits = frozen.get("limits") or {}
    return RunBudget(
        provider=frozen.get("provider", version.provider),
        model=frozen.get("model", version.model),
        context_window=frozen.get("context_window", version.context_window),
        max_output_tokens=frozen.get("max_output_tokens", version.max_output_tokens),
        safety_margin_tokens=frozen.get("safety_margin_tokens", version.safety_margin_tokens),
        context_policy=frozen.get("context_policy") or None,
        limits={k: v for k, v in limits.items() if isinstance(v, int) and not isinstance(v, bool)},
    )
