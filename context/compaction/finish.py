"""CTX-37, CTX-38, CTX-41: the last step of a compaction, inline or prepared — assemble the
view from a summary and the retained messages, measure it, and judge whether it may be
committed. Pure: the engine (``engine.compact``) hands in what it planned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from context.calibration import CalibratedEstimator
from context.traces import Trace, trace_from_json, trace_json, trace_union
from context.validate import Problem

from .pins import PlacedPins
from .planner import merge_sources
from .types import COUNT_TRIGGERS, CommitDecision, CompactionRequest, CompactionResult, Source
from .view import assemble_view, continuation_message, view_problems


def commit_decision(
    *,
    problems: Sequence[Problem],
    tokens_before: int,
    tokens_after: int,
    threshold: float,
    target: int,
    trigger: str = "budget",
) -> CommitDecision:
    """CTX-38: commit only a valid view that is strictly smaller and below the threshold.

    ``target_reached`` records whether it is also at or under the target. A count
    trigger (``user_turns``/``model_steps``) whose view would not shrink is a skip
    (``count_trigger_no_reduction``), not a failure: nothing was wrong, there was nothing
    to gain.
    """
    reached = tokens_after <= target
    if problems:
        return CommitDecision(False, "failed", "invalid_view", reached)
    if tokens_after >= tokens_before:
        if trigger in COUNT_TRIGGERS:
            return CommitDecision(False, "skipped", "count_trigger_no_reduction", reached)
        return CommitDecision(False, "failed", "not_smaller", reached)
    if tokens_after >= threshold:
        return CommitDecision(False, "failed", "above_threshold", reached)
    return CommitDecision(True, "compacted", "committed", reached)


@dataclass(frozen=True)
class ViewFinish:
    """The last step of a compaction, inline or prepared (CTX-37, CTX-38): assemble the
    view from a summary and the retained messages, and judge it."""

    r: CompactionRequest
    anchor: dict[str, Any] | None
    state_message: dict[str, Any] | None
    retained: list[dict[str, Any]]
    retained_sources: list[Source]
    retained_traces: list[Trace]
    tokens_before: int
    threshold: float
    target: int
    pins: PlacedPins = PlacedPins()  # CTX-50: the pinned messages placed after the anchor

    def result(self, summary: str, metrics: dict[str, Any]) -> CompactionResult:
        r, retained = self.r, self.retained
        covered = merge_sources([tuple(s["consumed"]) if s["consumed"] else None for s in metrics["segments"]])
        metrics["covered"] = list(covered) if covered else None
        # CTX-41: exactly the records the summary replaced, through every earlier checkpoint.
        summary_trace = trace_union(segment_ranges(s) for s in metrics["segments"])
        metrics["covered_ranges"] = trace_json(summary_trace)
        metrics["summary_chars"] = len(summary)
        metrics["summary_source"] = metrics.get("summary_source") or "model"  # CTX-48: else "code"
        view = assemble_view(summary_message=continuation_message(summary), task_anchor=self.anchor,
                             runtime_state_message=self.state_message, retained=retained,
                             pins=[pin.placed for pin in self.pins.placed])
        metrics.update(request_figures("after", r, view))
        tokens_after = metrics["tokens_after_calibrated"]
        decision = commit_decision(problems=view_problems(r.system, view, r.dialect),
                                   tokens_before=self.tokens_before, tokens_after=tokens_after,
                                   threshold=self.threshold, target=self.target, trigger=r.trigger)
        metrics["target_reached"] = decision.commit and decision.target_reached
        if not decision.commit:
            return CompactionResult(decision.outcome, decision.reason, None, summary, metrics)
        lead = len(view) - len(retained)
        summary_sources: list[Source] = [None] * lead  # the summary, the anchor, the pins, the state block
        sources = summary_sources + self.retained_sources
        # The summary stands for what it replaced; a placed pin for its record (CTX-50), and
        # so does an anchor that is a pinned message (a later run's compaction finds it by
        # it); the anchor otherwise and the state block for no record.
        anchor_placed = self.anchor is not None and not any(m == self.anchor for m in retained)
        anchor_trace: list[Trace] = []
        if anchor_placed:
            seq = self.pins.anchor_seq
            anchor_trace = [((seq, seq),) if seq is not None else ()]
        lead_traces: list[Trace] = [summary_trace, *anchor_trace, *[((pin.seq, pin.seq),) for pin in self.pins.placed]]
        lead_traces += [()] * (lead - len(lead_traces))
        return CompactionResult("compacted", "committed", view, summary, metrics, sources,
                                lead_traces + list(self.retained_traces))


def request_figures(when: str, r: CompactionRequest, view: Sequence[dict[str, Any]] | None) -> dict[str, int | None]:
    """CTX-41: a request's size under one name per meaning -- ``tokens_<when>_calibrated``,
    the figure every decision here reads (the request's estimator: the worker hands in a
    calibrated one), and ``tokens_<when>_estimated``, the same before calibration (equal
    for an estimator that is not calibrated). None when there is no such view."""
    if view is None:
        return {f"tokens_{when}_estimated": None, f"tokens_{when}_calibrated": None}
    request = [r.system, *view]
    calibrated = r.estimator.request(request, r.tools)
    raw = r.estimator.base.request(request, r.tools) if isinstance(r.estimator, CalibratedEstimator) else calibrated
    return {f"tokens_{when}_estimated": raw, f"tokens_{when}_calibrated": calibrated}


def segment_ranges(segment: Mapping[str, Any]) -> Trace:
    """The records one segment consumed, as its metrics say (CTX-41); a segment a preparation
    recorded before exact ranges were kept gives its one ``consumed`` range."""
    if "ranges" in segment:
        return trace_from_json(segment["ranges"])
    consumed = segment.get("consumed")
    return trace_from_json([consumed]) if consumed else ()
