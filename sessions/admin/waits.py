"""What each compaction cost the person in waiting (CTX-45), for the console.

Plain Python, like ``display``: a snapshot's metrics in, figures and their words out. The
worker records whether the committed summary was prepared in the background
(``prepared``), how long the person waited for the compaction (``stall_ms``), how old the
prepared summary was when it was committed (``prepared_age_ms``) and, when a ready one
could not be used, why (``prepared_discarded``). Compactions saved before CTX-45 have
none of these keys: each figure is then None and shown as missing ("–"), never as zero.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sessions.admin.display import metric_number

MISSING = "–"  # as the compactions table shows every figure a snapshot did not record

# Why a ready prepared summary was not committed (context.compaction.DISCARD_REASONS), for
# people; a reason not listed here is shown as it was recorded.
DISCARD_WORDS = {
    "view_changed": "the conversation changed under it",
    "policy_changed": "the context policy changed",
    "estimator_changed": "the token counter changed",
    "not_at_group_boundary": "it ended inside a tool call and its result",
}


def seconds_text(ms: int | None) -> str:
    """Milliseconds as seconds with one decimal ("2.5 s"); "–" when not recorded."""
    return MISSING if ms is None else f"{ms / 1_000:.1f} s"


def age_text(ms: int | None) -> str:
    """An age for people: seconds under a minute, minutes under two hours, then hours."""
    if ms is None:
        return MISSING
    if ms < 60_000:
        return seconds_text(ms)
    if ms < 7_200_000:
        return f"{ms / 60_000:.0f} min"
    return f"{ms / 3_600_000:.1f} h"


@dataclass(frozen=True)
class WaitFigures:
    prepared: bool | None
    stall_ms: int | None
    prepared_age_ms: int | None
    discarded: str  # the recorded reason a ready prepared summary was not used; "" when none was

    @property
    def how(self) -> str:
        if self.prepared is None:
            return MISSING
        return "prepared in the background" if self.prepared else "made while the person waited"

    @property
    def stall_text(self) -> str:
        return seconds_text(self.stall_ms)

    @property
    def age_text(self) -> str:
        return age_text(self.prepared_age_ms)

    @property
    def discarded_text(self) -> str:
        if not self.discarded:
            return ""
        return f"a prepared summary was not used: {DISCARD_WORDS.get(self.discarded, self.discarded)}"


def wait_figures(metrics: Any) -> WaitFigures:
    """The CTX-45 figures of a snapshot's metrics (or a ``compaction_summary`` record's),
    tolerant of missing and odd values."""
    m = metrics if isinstance(metrics, dict) else {}
    prepared = m.get("prepared")
    stall = metric_number(m.get("stall_ms"))
    age = metric_number(m.get("prepared_age_ms"))
    discarded = m.get("prepared_discarded")
    return WaitFigures(prepared=prepared if isinstance(prepared, bool) else None,
                       stall_ms=None if stall is None else max(0, stall),
                       prepared_age_ms=None if age is None else max(0, age),
                       discarded=discarded if isinstance(discarded, str) else "")
