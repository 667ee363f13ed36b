"""CTX-47 Reversible before lossy: the first tier of a compaction, with no model call.

The bodies of older *completed* tool results are replaced by a short reference note --
the tool, a digest of its arguments, the status, the size, and how to read the result back
whole (``read_record`` with the record's seq) -- while every message stays where it is:
the assistant message and its calls are untouched, each result keeps its ``tool_call_id``,
so every pair holds and the view stays valid in every dialect. The records are never
touched: the note's seq reads the whole body again.

Never masked:
- a message at or after ``keep_from`` (the retained groups, kept verbatim by the engine);
- a result whose record seq, or its call's record seq, is pinned (``request.pinned``, CTX-50);
- a result holding an image (what the agent is looking at, CTX-8);
- a result whose outcome is unknown (not completed: the runtime-state block speaks of it);
- a result with no known record (it could not be read back), or an already-masked note;
- anything at all when the agent cannot call ``read_record`` (the note would be a dead end;
  the worker offers it to every agent with tools whose policy masks, ``runloop.state``).

Results are masked oldest first until the view is at the target, or none is left, in one
batch: the cached prefix of the provider changes once per compaction, not once per result.
Masking a masked view changes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from context.estimators import Estimator
from context.records import content_text, is_image_part, shows_unknown_outcome
from context.traces import Trace, trace_of_source

from .finish import commit_decision, request_figures
from .planner import select_retained, split_groups
from .types import CompactionRequest, CompactionResult, Source
from .view import view_problems

READ_TOOL = "read_record"
MASK_NOTE_HEAD = "[tool result folded to save room]"
_ARGUMENT_CHARS = 160
_ALL = 1 << 62  # a view size no target is near: mask everything maskable
_STATUS_RE = re.compile(r"^\[tool status: (\w+)\]\n")
_TRUNCATED_RE = re.compile(r"\[\.\.\. truncated: \d+ of (\d+) characters omitted")
_NOTE_SEQ_RE = re.compile(re.escape(MASK_NOTE_HEAD) + r".*read_record \{\"seq\": (\d+)\}", re.DOTALL)


@dataclass(frozen=True)
class Masking:
    """What the first tier did to a view: ``messages`` (fresh; unchanged ones shared with
    the input), the indexes it masked, oldest first, and the seq each note points at."""

    messages: list[dict[str, Any]]
    masked: tuple[int, ...]
    seqs: tuple[int, ...]


def is_mask_note(message: Mapping[str, Any]) -> bool:
    """True for a tool message whose body is a masking note."""
    content = message.get("content")
    return message.get("role") == "tool" and isinstance(content, str) and content.startswith(MASK_NOTE_HEAD)


def note_seq(message: Mapping[str, Any]) -> int | None:
    """The record seq a masking note points at (None for anything else)."""
    if not is_mask_note(message):
        return None
    found = _NOTE_SEQ_RE.match(message["content"])
    return int(found.group(1)) if found else None


def arguments_digest(arguments: Any) -> str:
    """A call's arguments as the note shows them: compact JSON, clipped, with their full
    length when clipped (the whole call is still in the view, in the assistant message)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False, default=str)
    try:
        text = json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        pass
    flat = " ".join(text.split())
    if len(flat) <= _ARGUMENT_CHARS:
        return flat
    return f"{flat[:_ARGUMENT_CHARS]}… ({len(flat):,} characters)"


def result_facts(message: Mapping[str, Any]) -> tuple[str, int]:
    """``(status, size)`` of a view's tool result: the status the projector rendered
    (``ok`` when none), and the size in characters of the whole result -- the total a
    CTX-7 marker reports when the view shows only head and tail."""
    body = content_text(message.get("content"))
    status = "ok"
    found = _STATUS_RE.match(body)
    if found:
        status, body = found.group(1), body[found.end():]
    truncated = _TRUNCATED_RE.search(body)
    return status, int(truncated.group(1)) if truncated else len(body)


def mask_note(*, tool: str, arguments: Any, status: str, size: int, seq: int) -> str:
    """The reference note that takes a result's place in the view (CTX-47)."""
    return (f"{MASK_NOTE_HEAD} {tool}({arguments_digest(arguments)}): status {status}, {size:,} characters. "
            f"The whole result is kept as record {seq}; read it with {READ_TOOL} {{\"seq\": {seq}}} "
            "(offset and length page through it).")


def record_seq(source: Source, trace: Trace) -> int | None:
    """The one record a view message was read from: its source ``(s, s)``, or a trace of
    that one record (a message that came through an earlier checkpoint)."""
    for candidate in (trace_of_source(source), trace):
        if len(candidate) == 1 and candidate[0][0] == candidate[0][1]:
            return candidate[0][0]
    return None


def can_read_back(tools: Sequence[Mapping[str, Any]]) -> bool:
    """True when the agent's tools include ``read_record``: a note is a way back only then."""
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else (
            tool.get("name") if isinstance(tool, Mapping) else None)
        if name == READ_TOOL:
            return True
    return False


def maskable(messages: Sequence[Mapping[str, Any]], sources: Sequence[Source], traces: Sequence[Trace], *,
             keep_from: int, pinned: frozenset[int]) -> list[tuple[int, int, str]]:
    """The results the first tier may mask, oldest first: ``(index, seq, note)`` each."""
    calls: dict[str, tuple[str, Any, int | None]] = {}  # call id -> (tool, arguments, the call's record seq)
    out: list[tuple[int, int, str]] = []
    for index, message in enumerate(messages[:keep_from]):
        role = message.get("role")
        if role == "assistant":
            seq = record_seq(sources[index], traces[index])
            for call in message.get("tool_calls") or ():
                function = call.get("function") if isinstance(call, Mapping) else None
                if isinstance(function, Mapping) and isinstance(call.get("id"), str):
                    calls[call["id"]] = (str(function.get("name") or "?"), function.get("arguments"), seq)
            continue
        if role != "tool" or is_mask_note(message) or shows_unknown_outcome(message):
            continue
        content = message.get("content")
        if isinstance(content, list) and any(is_image_part(part) for part in content):
            continue
        seq = record_seq(sources[index], traces[index])
        call_id = message.get("tool_call_id")
        tool, arguments, call_seq = calls.get(call_id if isinstance(call_id, str) else "", ("?", "", None))
        if seq is None or seq in pinned or (call_seq is not None and call_seq in pinned):
            continue
        status, size = result_facts(message)
        out.append((index, seq, mask_note(tool=tool, arguments=arguments, status=status, size=size, seq=seq)))
    return out


def mask_results(messages: Sequence[dict[str, Any]], sources: Sequence[Source], traces: Sequence[Trace], *,
                 keep_from: int, pinned: frozenset[int], estimator: Estimator, tokens: int, target: int,
                 tools: Sequence[Mapping[str, Any]]) -> Masking:
    """CTX-47's one batch: mask results outside ``messages[keep_from:]`` oldest first while
    the view (of size ``tokens``) is above ``target``; every note is chosen before any is
    applied, so the view changes once. A note is never larger than what it replaces."""
    out = list(messages)
    if not can_read_back(tools):
        return Masking(out, (), ())
    masked: list[int] = []
    seqs: list[int] = []
    for index, seq, note in maskable(messages, sources, traces, keep_from=keep_from, pinned=pinned):
        if tokens <= target:
            break
        candidate = {**messages[index], "content": note}
        saved = estimator.message(messages[index]) - estimator.message(candidate)
        if saved <= 0:
            continue  # a short result: its note would cost as much
        out[index] = candidate
        masked.append(index)
        seqs.append(seq)
        tokens -= saved
    return Masking(out, tuple(masked), tuple(seqs))


def mask_request(request: CompactionRequest, traces: Sequence[Trace], *, keep_from: int, tokens: int,
                 target: int) -> Masking:
    """:func:`mask_results` for a compaction request (its estimator, pins and tools)."""
    return mask_results(request.messages, request.sources, traces, keep_from=keep_from, pinned=request.pinned,
                        estimator=request.estimator, tokens=tokens, target=target, tools=request.tools)


def masks(request: CompactionRequest) -> bool:
    """True when the first tier is tried: the policy allows it, and this is neither the
    commit of a prepared summary nor a background preparation (both are the summary tier's)."""
    r = request
    return r.policy.mask_tool_results and r.prepared is None and r.cut is None and not r.summary_only


def mask_tier(request: CompactionRequest, traces: Sequence[Trace], *, keep_from: int, tokens_before: int,
              threshold: float, target: int, metrics: dict[str, Any]) -> tuple[CompactionResult | None,
                                                                                list[dict[str, Any]] | None]:
    """CTX-47 in a compaction: mask the results before ``keep_from`` (the retained groups)
    oldest first down to the target, in one batch. Returns the committed result when the
    masked view is valid, strictly smaller and below the threshold (CTX-38) -- no summary
    call, ``summary`` None -- else None and the masked messages the summary tier works on
    (None when nothing was masked). ``metrics`` gets the tier's figures."""
    r = request
    masking = mask_request(r, traces, keep_from=keep_from, tokens=tokens_before, target=target)
    if not masking.masked:
        return None, None
    view = masking.messages
    figures = request_figures("after", r, view)
    after = figures["tokens_after_calibrated"]
    assert after is not None  # (a view was given)
    metrics["tiers"] = ["mask"]
    metrics["masked_results"] = len(masking.masked)
    metrics["masked_seqs"] = list(masking.seqs)
    metrics["mask_tokens_removed"] = tokens_before - after
    metrics["tokens_masked_calibrated"] = after
    decision = commit_decision(problems=view_problems(r.system, view, r.dialect), tokens_before=tokens_before,
                               tokens_after=after, threshold=threshold, target=target, trigger=r.trigger)
    if not decision.commit:
        return None, view  # the summary tier summarizes the masked view
    metrics.update(figures)
    metrics["target_reached"] = decision.target_reached
    metrics["retained_messages"] = len(view)  # nothing was summarized: every message stays, some folded
    metrics["summarized_messages"] = 0
    return CompactionResult("compacted", "committed", list(view), None, metrics, list(r.sources), list(traces)), None


def tiers_noted(result: CompactionResult) -> CompactionResult:
    """CTX-47's metrics once the compaction is over: the summary tier is listed when it ran
    (a summary call was made, or a prepared summary was used), with the tokens it removed
    beyond the masking (``summary_tokens_removed``, when it committed)."""
    metrics = result.metrics
    if result.summary is not None or metrics.get("summary_calls"):
        metrics["tiers"] = [*metrics.get("tiers", []), "summary"]
        after = metrics.get("tokens_after_calibrated")
        if result.outcome == "compacted" and after is not None:
            before = metrics.get("tokens_masked_calibrated") or metrics.get("tokens_before_calibrated") or 0
            metrics["summary_tokens_removed"] = before - after
    return result


def masking_would_do(request: CompactionRequest, traces: Sequence[Trace] | None = None) -> bool:
    """CTX-45 with CTX-47: True when masking alone would take the view back to the target
    at the trigger, so no summary needs preparing in the background.

    The view at the trigger is taken as the threshold's size; what masking can remove is
    what it removes from the view now, everything maskable (results recorded meanwhile only
    add to it), outside the newest groups that fit the target beside the system message,
    the tools and a summary's reserve (the engine's retained groups, near enough for a
    decision to prepare)."""
    r = request
    if not masks(r):
        return False
    estimator, budget = r.estimator, r.budget
    known = list(traces) if traces is not None else [trace_of_source(s) for s in r.sources]
    costs = [estimator.message(m) for m in r.messages]
    groups = split_groups(r.messages, r.sources, costs)
    base = estimator.request([r.system], r.tools)
    reserve = min(budget.max_output_tokens, int(budget.effective_input * r.summary_share))
    first, _ = select_retained(groups, r.messages, budget=budget.target_tokens(r.policy) - base - reserve,
                               anchor=None, anchor_cost=0, newest_room=0, fit_newest=lambda group, room: None)
    keep_from = groups[first].start if first < len(groups) else len(r.messages)
    everything = mask_results(r.messages, r.sources, known, keep_from=keep_from, pinned=r.pinned,
                              estimator=estimator, tokens=_ALL, target=0, tools=r.tools)
    if not everything.masked:
        return False
    saved = estimator.request([r.system, *r.messages], r.tools) - estimator.request(
        [r.system, *everything.messages], r.tools)
    return budget.trigger_threshold(r.policy) - saved <= budget.target_tokens(r.policy)
