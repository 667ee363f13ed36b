"""The frame of an instance: its execution state, typed (SPEC §2 "Instance").

The frame is one encrypted JSON column on ``Instance``. These types say what it may hold;
``sessions.services.frames`` is its one writer. What the model reads lives in the records
and checkpoints, never here: the frame holds what code must remember between steps.
"""
from __future__ import annotations

from typing import TypedDict


class QueuedSupplement(TypedDict):
    """A supplement sent while the run works, not yet in the records (RUN-5)."""

    id: str
    content: str
    at: str  # ISO time it arrived


class CompactionFailure(TypedDict):
    """The last failed compaction, so the next tries back off (CTX-44)."""

    tokens: int  # the calibrated size of the request that could not be compacted
    at: float  # Unix time
    reason: str


class Frame(TypedDict, total=False):
    """An instance's execution state. Every key may be absent; a missing key means empty.

    ``supplements``: queued supplements (main instance only), taken into the records at
    the next safe point. ``pending_calls``: the ids of the tool group in flight — a view
    is never saved while one is (RUN-7). ``plan``: the agent's plan, carried through
    compaction by the runtime-state block (CTX-36). ``compaction_failure``: the back-off
    state of CTX-44, inherited by the session's next run. ``compact_requested``: a manual
    compaction asked for while the run works (CTX-43).
    """

    supplements: list[QueuedSupplement]
    pending_calls: list[str]
    plan: str | None
    compaction_failure: CompactionFailure
    compact_requested: bool


def frame_initial(*, compaction_failure: CompactionFailure | None = None) -> Frame:
    """The frame of a new main instance (a new question)."""
    frame: Frame = {"supplements": [], "pending_calls": [], "plan": None}
    if compaction_failure:
        frame["compaction_failure"] = compaction_failure
    return frame
