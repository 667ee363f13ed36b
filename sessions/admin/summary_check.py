"""CTX-48 on the console's compaction page: what the check said of each summary reply, and
whether the summary the agent reads was written by the platform from the records.

Read from the snapshot's metrics only (``summary_check``, ``summary_source``,
``summary_fallback``, ``summary_failure``, ``error_code``): plain columns, nothing decrypted.
A compaction made before summaries were checked shows nothing.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PROBLEM_WORDS = {
    "empty": "empty", "too_short": "too short", "degenerate": "repetitive", "cut": "cut off by the server",
    "missing_sections": "not the nine sections", "only_user_messages": "nothing beyond the user's messages",
    "copy_of_message": "a copy of one message", "too_long": "too long for its room", "error": "provider error",
}
FALLBACK_WORDS = {
    "summary_failed": "no reply passed the check",
    "summary_call_limit": "the call limit left no (further) summary call",
    "too_many_segments": "the history needed more summary calls than allowed",
    "summarizer_budget_too_small": "the summarizer's window was too small",
    "segment_too_large": "a part of the history was too large for one summary call",
}


@dataclass(frozen=True)
class CheckVerdict:
    """``source``: ``model``, ``code`` or None (not recorded); ``text``: the verdict in a
    few words; ``attempts``: one line per checked reply ("segment 1, attempt 2: cut off by
    the server")."""

    source: str | None
    text: str
    attempts: tuple[str, ...]


def problems_text(problems: Any) -> str:
    if not problems:
        return "passed"
    return ", ".join(PROBLEM_WORDS.get(str(p), str(p)) for p in problems)


def check_verdict(metrics: Mapping[str, Any]) -> CheckVerdict:
    """The verdict of a compaction's summary check, for people."""
    verdicts = metrics.get("summary_check")
    source = metrics.get("summary_source")
    attempts = tuple(
        f"segment {int(v['segment']) + 1}, attempt {v['attempt']}: {problems_text(v.get('problems'))}"
        if isinstance(v.get("segment"), int) else f"{v.get('attempt')}: {problems_text(v.get('problems'))}"
        for v in verdicts if isinstance(v, Mapping)) if isinstance(verdicts, list) else ()
    if source == "code":
        reason = FALLBACK_WORDS.get(str(metrics.get("summary_fallback")), str(metrics.get("summary_fallback") or ""))
        if metrics.get("summary_failure") == "deterministic_error":
            reason = f"the summary request was refused ({metrics.get('error_code') or 'error'})"
        return CheckVerdict("code", f"Written by code from the records: {reason}.", attempts)
    if source == "model":
        return CheckVerdict("model", "The model's summary passed the check.", attempts)
    return CheckVerdict(None, "", attempts)
