"""CTX-45: compaction prepared in the background, committed when the trigger fires.

A preparation runs the ordinary engine (``compact``) on a snapshot of the view, with
``headroom`` for what the view will grow by meanwhile; what it keeps is the summary and
the prefix of the snapshot that summary covers (:func:`prepared_from`). When the trigger
fires, :func:`commit_prepared` checks that the current view still starts with that
prefix, byte for byte, under the same policy and estimator, and then assembles and judges
the compacted view exactly as an inline compaction cut at the same point would (CTX-37,
CTX-38): summary, task anchor, a runtime-state block computed now, and everything
after the prefix. A summary that no longer fits is discarded whole, with the reason.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from .code_summary import PREPARED_CHECK_METRICS
from .engine import compact, drive
from .planner import split_groups
from .types import CompactionRequest, CompactionResult, PreparedSummary, SummaryCall, SummaryReply

# Why a prepared summary was not committed (``CompactionResult.reason`` with outcome ``discarded``).
DISCARD_REASONS = ("policy_changed", "estimator_changed", "view_changed", "not_at_group_boundary")


def prefix_digest(messages: Sequence[Mapping[str, Any]]) -> str:
    """A fingerprint of messages, as the view holds them (key order does not count)."""
    text = json.dumps(list(messages), sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def prepared_from(result: CompactionResult, request: CompactionRequest) -> PreparedSummary | None:
    """What a preparation keeps of a compaction of its snapshot (``request.messages``):
    the summary and the prefix it covers; None when it did not compact."""
    if result.outcome != "compacted" or result.summary is None:
        return None
    prefix = len(request.messages) - int(result.metrics["retained_messages"])
    metrics = {name: result.metrics.get(name) for name in (
        "summary_calls", "retries", "summary_cut_chars", "segments", "planned_segments", "summary_form",
        "tokens_before_estimated", "tokens_before_calibrated", "tokens_after_estimated", "tokens_after_calibrated",
        "summarized_messages", *PREPARED_CHECK_METRICS)}
    return PreparedSummary(summary=result.summary, prefix=prefix, digest=prefix_digest(request.messages[:prefix]),
                           policy=request.policy.to_dict(), estimator_id=request.estimator.id, metrics=metrics)


def prepared_misfit(request: CompactionRequest, prepared: PreparedSummary) -> str | None:
    """Why ``prepared`` cannot be committed onto ``request``'s view (None: it can)."""
    if prepared.policy != request.policy.to_dict():
        return "policy_changed"
    if prepared.estimator_id != request.estimator.id:
        return "estimator_changed"
    messages = request.messages
    if prepared.prefix > len(messages) or prefix_digest(messages[:prepared.prefix]) != prepared.digest:
        return "view_changed"
    costs = [0] * len(messages)  # group boundaries do not depend on costs
    starts = {group.start for group in split_groups(messages, request.sources, costs)}
    if prepared.prefix != len(messages) and prepared.prefix not in starts:
        return "not_at_group_boundary"
    return None


def commit_prepared(request: CompactionRequest, prepared: PreparedSummary) -> CompactionResult:
    """The compaction of ``request``'s view with ``prepared`` as its summary: the result an
    inline compaction cut at the prepared prefix would give with that summary (outcome
    ``compacted``, or ``failed``/``skipped`` by the commit rules), or outcome
    ``discarded`` with a reason from :data:`DISCARD_REASONS` when it no longer fits."""
    reason = prepared_misfit(request, prepared)
    if reason is not None:
        return CompactionResult("discarded", reason, None, None, {"prepared_discarded": reason})
    return drive(compact(replace(request, cut=prepared.prefix, prepared=prepared)), _no_call)


def _no_call(call: SummaryCall) -> SummaryReply:
    raise AssertionError("a prepared summary needs no summary call")


__all__ = ["DISCARD_REASONS", "commit_prepared", "prefix_digest", "prepared_from", "prepared_misfit"]

