"""Undoing a compaction (CTX-51): which checkpoint an undo returns to, and the hold it leaves.

A compaction replaces an instance's starting point (its snapshot, the session's view) by a
compacted one; undoing the newest one puts back the starting point that compaction replaced
— the previous checkpoint's messages at its watermark, or the records themselves — so every
later step projects what it would have projected had that compaction never been committed.
Nothing is re-projected here or stored twice at compaction time: the previous starting point
is already kept, and the projector reads it with the records after it as it always does.

The undo then holds the triggers back (``undo_holds``), so the next step does not simply
compact again: the person chose the longer view.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The reason of the hold an undone compaction leaves in the frame (``compaction_failure``,
# CTX-44's back-off state). Its ``tokens`` stay unknown until the next step measures the
# restored view; the worker pins them then (``undo_hold_unpinned``).
UNDONE = "undone"

# Why an undo is refused: stable slugs, as the engine's reasons are.
NOTHING_TO_UNDO = "nothing_to_undo"  # no compaction of the main line yet
ALREADY_UNDONE = "already_undone"  # the newest checkpoint is an undo: one step back only


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of an instance, oldest first by ``revision``: a compaction, or an
    undo (``undoes`` the revision it undid). ``covered_seq``/``messages``/``traces`` are
    the starting point it gives the instance."""

    revision: int
    covered_seq: int
    messages: Sequence[Mapping[str, Any]]
    traces: Any = None
    estimator_id: str | None = None
    undoes: int | None = None


@dataclass(frozen=True)
class Base:
    """Where the instance started before its first checkpoint: a view (its messages at its
    watermark) or, with ``messages`` None, the records themselves."""

    watermark: int = 0
    messages: Sequence[Mapping[str, Any]] | None = None
    traces: Any = None
    estimator_id: str | None = None


@dataclass(frozen=True)
class UndoDecision:
    """``undone`` is the revision to undo and ``restored`` the starting point to put back
    (``Base``: a records start has ``messages`` None); or ``reason`` says why not."""

    undone: int | None = None
    restored: Base | None = None
    reason: str | None = None

    @property
    def allowed(self) -> bool:
        return self.reason is None


def undo_decision(checkpoints: Sequence[Checkpoint], base: Base) -> UndoDecision:
    """CTX-51: may the newest of ``checkpoints`` (one instance's, any order) be undone, and
    to what? Only a compaction, and only the newest: an undo is not undone again (ask for a
    manual compaction instead, CTX-43), which keeps "the view before" one clear thing. The
    restored starting point is the checkpoint before it — itself perhaps an earlier undo —
    or ``base`` when it was the first."""
    ordered = sorted(checkpoints, key=lambda checkpoint: checkpoint.revision)
    if not ordered:
        return UndoDecision(reason=NOTHING_TO_UNDO)
    newest = ordered[-1]
    if newest.undoes is not None:
        return UndoDecision(reason=ALREADY_UNDONE)
    if len(ordered) == 1:
        return UndoDecision(undone=newest.revision, restored=base)
    before = ordered[-2]
    return UndoDecision(undone=newest.revision, restored=Base(
        watermark=before.covered_seq, messages=before.messages, traces=before.traces,
        estimator_id=before.estimator_id))


def undo_hold_unpinned(failure: Mapping[str, Any] | None) -> bool:
    """Is ``failure`` the hold of an undone compaction that no step has measured yet? The
    worker then pins it to the figure of that step's request."""
    return failure is not None and failure.get("reason") == UNDONE and not failure.get("tokens")


def undo_holds(failure: Mapping[str, Any], figure: int, *, growth: float, fits: bool) -> bool:
    """The triggers wait after an undo (CTX-51, on CTX-44's back-off): until the request
    grew by ``growth`` past its size at the first step after the undo (while that size is
    not pinned yet, they wait), or the request no longer fits (``fits`` false: CTX-39
    comes first). Unlike a failure's back-off, time alone never lifts it: the person chose
    the longer view, and that choice does not lapse."""
    tokens = failure.get("tokens")
    held = not tokens or figure < tokens * (1 + growth)
    return held and fits
