"""CTX-30 to CTX-42: one compaction, written sans-I/O.

``compact(request)`` is a generator. It yields a ``SummaryCall`` whenever it needs the
summarizer and receives a ``SummaryReply`` through ``send()``; it returns a
``CompactionResult``. The worker drives it with its provider client, the tests with a
scripted function, through the same code (like httpx's ``auth_flow``)::

    flow = compact(request)
    call = next(flow)                     # StopIteration here: nothing to ask
    while True:
        call = flow.send(summarize(call))  # ... until StopIteration(result)

``drive(flow, summarize)`` does exactly that.

Sizes are estimator units of the request's estimator:

* ``effective`` = budget.effective_input (the hard limit for messages + tools; the output
  reserve is already taken off), ``threshold`` = effective x context_ratio (exact),
  ``target`` = effective x target_ratio.
* ``base`` = the system message and the tool schemas (they are in every request).
* summary reserve = min(output reserve, effective x summary_share), lowered so that base +
  anchor + state block + summary stays below the threshold.
* retained budget = target - base - anchor - state block - summary reserve; groups are
  kept newest-first while they fit, the newest whenever the threshold allows.
* summary cap = what the assembled view can hold: up to the target beside the retained
  groups (at least the reserve), below the threshold, at most the output reserve; the
  continuation message never costs more. The call's output limit is twice the summary's
  room plus ``OUTPUT_OVERRUN``, never more than the output reserve; a retry after a reply
  that limit stopped (too long, or with no usable summary yet) may use the whole reserve.
* segment budget = effective - (summary prompt with an empty conversation) - (the larger
  of the earlier summary and the summary cap, for the summary so far), minus 3% for
  estimators that are not additive.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Generator, Sequence
from typing import Any

from context.traces import trace_of_source, trace_union

from .check import shortened_problems
from .cleaning import MIN_SUMMARY_CHARS, fit_summary
from .code_summary import PREPARED_CHECK_METRICS, falls_back, summary_by_code
from .finish import ViewFinish, request_figures
from .masking import mask_tier, masks, tiers_noted
from .overflow import fit_tool_outputs
from .pins import EMPTY_PIN_METRICS, anchor_pin_seq, choose_pins, pin_candidates, pin_room, place_pins
from .planner import (
    CHAT,
    PINNED,
    SUMMARY,
    Group,
    Item,
    build_items,
    pack,
    select_retained,
    split_groups,
)
from .prompt import (
    DEFAULT_EXCERPT_CHARS,
    TERSE_EXCERPT_CHARS,
    TERSE_TEXT_CHARS,
    cached_summary_instruction,
    summarizer_input,
    summary_prompt,
)
from .sections import SECTION_TITLES
from .state import runtime_state_block, runtime_state_room, without_listed_unknown
from .summarize import PromptFor, Sizing, Units, summarize, transcript_form
from .types import (
    COUNT_TRIGGERS,
    TRIGGERS,
    CompactionRequest,
    CompactionResult,
    SummaryCall,
    SummaryReply,
)
from .view import continuation_message, continuation_summary

SEGMENT_SLACK = 0.97  # token counts of joined texts are not exactly additive
MIN_SEGMENT_UNITS = 128
OUTPUT_OVERRUN = 64  # units a summary reply may take beyond twice its room (tags, a heading)
EMPTY_SUMMARY = "\n".join(f"{n}. {title}: (none)" for n, title in enumerate(SECTION_TITLES, start=1))


def drive(
    flow: Generator[SummaryCall, SummaryReply, CompactionResult],
    summarize: Callable[[SummaryCall], SummaryReply],
) -> CompactionResult:
    """Run a compaction flow to its end, answering each call with ``summarize(call)``."""
    try:
        call = next(flow)
        while True:
            call = flow.send(summarize(call))
    except StopIteration as stop:
        result: CompactionResult = stop.value
        return result


def compact(request: CompactionRequest) -> Generator[SummaryCall, SummaryReply, CompactionResult]:
    """Compact a view once (CTX-30 to CTX-42, CTX-47); see the module docstring for the protocol.

    CTX-47: when the policy allows, older tool results are first masked to reference notes
    (``masking.mask_tier``); a masked view that the commit rules accept is the result, with
    no summary call and ``summary`` None. Otherwise the summary tier summarizes the masked
    view. ``metrics["tiers"]`` lists the tiers that ran.

    Outcomes and reasons:
      compacted/committed;
      skipped/no_compactable_history, count_trigger_no_reduction, not_smaller (nothing to
        gain), required_content_too_large (system, tools, anchor and state alone reach
        the threshold, and the current request is still under the hard limit);
      failed/required_content_too_large (over the hard limit too), too_many_segments,
        summarizer_budget_too_small, segment_too_large, summary_call_limit,
        summary_failed (see metrics["summary_failure"]: deterministic_error, error,
        empty, too_short, degenerate), invalid_view, not_smaller, above_threshold.
    When not compacted, ``messages`` is None and the old view stays.
    """
    result = yield from _compact(request)
    return tiers_noted(result)


def _compact(request: CompactionRequest) -> Generator[SummaryCall, SummaryReply, CompactionResult]:
    """The compaction itself (see :func:`compact`)."""
    r = request
    if r.trigger not in TRIGGERS:
        raise ValueError(f"unknown trigger {r.trigger!r}; expected one of {TRIGGERS}")
    if len(r.sources) != len(r.messages):
        raise ValueError("sources must have one entry per message")
    if r.traces is not None and len(r.traces) != len(r.messages):
        raise ValueError("traces must have one entry per message")
    # CTX-41: what each message stands for, through earlier checkpoints when the caller knows.
    traces = list(r.traces) if r.traces is not None else [trace_of_source(source) for source in r.sources]
    estimator, budget, policy = r.estimator, r.budget, r.policy
    units = Units(estimator)
    effective = budget.effective_input
    threshold = budget.trigger_threshold(policy)
    target = budget.target_tokens(policy)
    messages = r.messages
    costs = [estimator.message(m) for m in messages]
    base = estimator.request([r.system], r.tools)
    tokens_before = estimator.request([r.system, *messages], r.tools)
    metrics: dict[str, Any] = {
        "trigger": r.trigger, **request_figures("before", r, messages), **request_figures("after", r, None),
        "threshold": threshold, "target": target, "target_reached": False, "hard_limit": effective,
        "summary_calls": 0, "retries": 0, "summary_chars": 0, "summary_cap": None, "summary_output_limit": None,
        "summary_cut_chars": 0, "estimator_id": estimator.id, "segments": [], "planned_segments": 0,
        "covered": None, "covered_ranges": None, "retained_messages": 0, "summarized_messages": 0,
        "summary_failure": None, "error_code": None, "state_room": None, "state_cost": None, "summary_form": None,
        "unknown_calls_in_block": 0, "tiers": [], "masked_results": 0, "masked_seqs": [], "mask_tokens_removed": 0,
        "summary_tokens_removed": 0, "tokens_masked_calibrated": None, **EMPTY_PIN_METRICS,
    }
    metrics.update(summary_check=[], summary_source=None, summary_fallback=None)  # CTX-48

    def finish(outcome: str, reason: str) -> CompactionResult:
        return CompactionResult(outcome, reason, None, None, metrics)

    groups = split_groups(messages, r.sources, costs)
    if not any(g.kind == CHAT for g in groups):
        return finish("skipped", "no_compactable_history")

    anchor = copy.deepcopy(r.task_anchor) if r.task_anchor is not None else None
    anchor_cost = estimator.message(anchor) if anchor is not None else 0
    state_message = runtime_state_block(r)
    state_cost = estimator.message(state_message) if state_message is not None else 0
    metrics["state_room"], metrics["state_cost"] = runtime_state_room(r), state_cost
    min_summary_cost = estimator.message(continuation_message(EMPTY_SUMMARY, restated_anchor=True))
    fixed = base + anchor_cost + state_cost
    if fixed + min_summary_cost >= threshold:
        return finish("skipped" if tokens_before <= effective else "failed", "required_content_too_large")
    # CTX-50: room for the pinned messages is held while the retained groups are chosen.
    pins = pin_candidates(messages, r.sources, traces, r.pinned, cost_of=estimator.message, anchor=anchor)
    fixed += sum(p.cost for p in choose_pins(pins, pin_room(effective, math.ceil(threshold) - 1 - fixed
                                                                       - min_summary_cost))[0])

    # The share of the window reserved for the summary while the retained groups are
    # chosen: never more than one reply, and small enough that the required content plus
    # the summary stays below the threshold. The summary then gets whatever room the
    # assembled view has left under the target (below).
    below = math.ceil(threshold) - 1 - fixed
    reserved = max(min_summary_cost, min(budget.max_output_tokens, int(effective * r.summary_share), below))

    def fit_newest(group: Group, room: int) -> tuple[list[dict[str, Any]], int] | None:
        block = messages[group.start:group.stop]
        if not any(m.get("role") == "tool" for m in block):
            return None
        fitted = fit_tool_outputs(block, budget_tokens=room + estimator.request([], None), estimator=estimator,
                                  sources=r.sources[group.start:group.stop])
        cost = sum(estimator.message(m) for m in fitted)
        return (fitted, cost) if cost <= room else None

    if r.cut is not None:  # where a prepared summary stopped (CTX-45): a group boundary
        starts = [g.start for g in groups]
        if r.cut != len(messages) and r.cut not in starts:
            raise ValueError(f"cut {r.cut} is not at a group boundary")
        first, fitted = (starts.index(r.cut) if r.cut in starts else len(groups)), None
    else:
        # ``headroom``: what the view grows by before a prepared summary is committed.
        first, fitted = select_retained(groups, messages, budget=target - fixed - reserved - max(0, r.headroom),
                                        anchor=anchor, anchor_cost=anchor_cost,
                                        newest_room=below - min_summary_cost, fit_newest=fit_newest)
    start = groups[first].start if first < len(groups) else len(messages)
    retained = list(messages[start:])
    if fitted is not None:
        retained[len(retained) - len(fitted):] = fitted
    retained_sources = list(r.sources[start:])
    retained_traces = traces[start:]
    earlier = [continuation_summary(messages[g.start]) for g in groups[:first] if g.kind == SUMMARY]
    # The records earlier summaries stood for: the new summary carries them forward (CTX-32).
    earlier_trace = trace_union(traces[i] for g in groups[:first] if g.kind == SUMMARY for i in range(g.start, g.stop))
    metrics["retained_messages"] = len(retained)  # of the view: a prepared summary's prefix ends there
    if state_message is not None:  # CTX-3, CTX-36: an unknown-outcome call is shown once, in the block
        retained, positions, metrics["unknown_calls_in_block"] = without_listed_unknown(retained, r.runtime_state)
        retained_sources = [retained_sources[i] for i in positions]
        retained_traces = [retained_traces[i] for i in positions]
    anchor_placed = anchor is not None and not any(m == anchor for m in retained)
    rest = base + (anchor_cost if anchor_placed else 0) + state_cost + sum(estimator.message(m) for m in retained)
    placed = place_pins(pins, start=start, room=pin_room(effective, math.ceil(threshold) - 1 - rest - min_summary_cost),
                        anchor_seq=anchor_pin_seq(messages, r.sources, traces, r.pinned, anchor) if anchor_placed
                        else None)
    metrics.update(placed.metrics())
    rest += placed.cost
    kept_pins = {p.index for p in placed.placed}
    # A placed pin no longer pinned or out of room is summarized as the quote it is (CTX-50).
    prefix = [g for g in groups[:first] if g.kind == CHAT or (g.kind == PINNED and g.start not in kept_pins)]
    metrics["summarized_messages"] = sum(g.stop - g.start for g in prefix)
    if masks(r) and fitted is None:  # CTX-47: reversible before lossy (an overflow's cut newest group: not here)
        # Never the newest group either, retained or not: the model is about to continue from it.
        committed, masked = mask_tier(r, traces, keep_from=min(start, groups[-1].start), tokens_before=tokens_before,
                                      threshold=threshold, target=target, metrics=metrics)
        if committed is not None:
            committed.metrics.update(EMPTY_PIN_METRICS)  # CTX-50: nothing summarized, so no pin placed or lost
            return committed
        messages = masked if masked is not None else messages  # the summary tier reads the notes
    if not prefix:
        return finish("skipped", "no_compactable_history")

    if rest + min_summary_cost >= tokens_before:
        return finish("skipped", "count_trigger_no_reduction" if r.trigger in COUNT_TRIGGERS else "not_smaller")

    # CTX-34: the summary may fill what the assembled view can hold -- up to the target,
    # never past the threshold, never more than one reply -- and is asked for in those
    # terms: a character bound in the prompt, an output limit on the call.
    cap = max(min_summary_cost, min(budget.max_output_tokens, math.ceil(threshold) - 1 - rest,
                                    max(reserved, target - rest)))
    preamble_cost = estimator.message(continuation_message("", restated_anchor=True))
    body_units = max(cap - preamble_cost, 1)
    max_chars = max(200, int(body_units * units.chars_per_unit(EMPTY_SUMMARY * 4)))
    # Room for the <summary> tags and some overrun: a reply a little too long arrives
    # whole and is retried tighter or shortened between sentences, not cut mid-word.
    output_limit = min(budget.max_output_tokens, 2 * body_units + OUTPUT_OVERRUN)
    metrics["summary_cap"], metrics["summary_output_limit"] = cap, output_limit

    finished = ViewFinish(r, anchor, state_message, retained, retained_sources, retained_traces, tokens_before,
                          threshold, target, placed)
    whole = trace_union([earlier_trace, *(traces[i] for g in prefix for i in range(g.start, g.stop))])

    def by_code(reason: str) -> CompactionResult:
        """CTX-48: what the summarizer could not give, written by code from the records."""
        if not falls_back(reason, metrics):
            return finish("failed", reason)
        # Never larger than what it replaces: the commit rule wants the view strictly smaller,
        # and quoting every message whole could make it grow.
        room = min(body_units, tokens_before - rest - preamble_cost - 1)
        return summary_by_code(r, reason, metrics, finished, summarized=messages[:start], retained=retained,
                               consumed=whole, max_units=max(room, 1), cost_of=units.text)

    if r.prepared is not None:  # CTX-45: made in the background, judged like one made now
        made = r.prepared.metrics
        for name in ("summary_calls", "retries", "summary_cut_chars", "segments", "planned_segments", "summary_form",
                     *PREPARED_CHECK_METRICS):
            metrics[name] = copy.deepcopy(made.get(name, metrics.get(name)))
        text = r.prepared.summary
        if units.text(text) > body_units:  # the view grew since: shortened as a reply over its room is
            shorter = fit_summary(text, max_units=body_units, cost_of=units.text)
            problems = shortened_problems(shorter, min_chars=min(MIN_SUMMARY_CHARS, max_chars // 4))
            if problems:
                metrics["summary_failure"] = problems[0]
                return by_code("summary_failed")
            metrics["summary_cut_chars"] = (metrics["summary_cut_chars"] or 0) + len(text) - len(shorter)
            text = shorter
        return finished.result(text, metrics)
    if r.max_summary_calls < 1:  # the run's model-call budget is spent: no call may be made
        return by_code("summary_call_limit")
    sizing = Sizing(units=units, body_units=body_units, max_chars=max_chars, output_limit=output_limit,
                     whole_limit=budget.max_output_tokens, effective=effective,
                     min_chars=min(MIN_SUMMARY_CHARS, max_chars // 4))

    # CTX-46: the action request itself, then the instruction -- its prefix is read from
    # the provider's cache -- whenever that request fits the window; else the part of it
    # being summarized (an earlier request ended close to where it ends: still cached).
    if r.ride_cache:
        for form_name, upto, kept in (("cached", len(messages), len(retained)), ("cached_prefix", start, 0)):
            form = _cached_form(r.system, messages[:upto], kept)
            if estimator.request(form(max_chars, 10 * max_chars), r.tools) > effective:
                continue
            metrics["summary_form"], metrics["planned_segments"] = form_name, 1
            reason, written = yield from summarize(r, sizing, form, consumed=whole,
                                                    messages_count=metrics["summarized_messages"], index=0,
                                                    parts=1, metrics=metrics, tools=list(r.tools))
            if reason is not None:
                return by_code(reason)
            return finished.result(written, metrics)
    metrics["summary_form"] = "transcript"

    # Segments: each call carries the prompt, the summary so far and its part of the input.
    prior = "\n\n".join(earlier) if earlier else None
    prompt_cost = estimator.request(summary_prompt([], previous_summary="", max_chars=max_chars, part=99, parts=99,
                                                   too_long=10 * max_chars))
    prior_room = max(units.text(prior) if prior else 0, body_units)
    limit = int((effective - prompt_cost - prior_room) * SEGMENT_SLACK)
    if limit < MIN_SEGMENT_UNITS:
        return by_code("summarizer_budget_too_small")

    def plan(excerpt: int, text_limit: int | None) -> list[list[Item]]:
        texts = ["\n".join(summarizer_input(messages[g.start:g.stop], excerpt_chars=excerpt, text_limit=text_limit,
                                             recognise_blocks=False))
                 for g in prefix]
        return pack(build_items(prefix, texts, traces, limit=limit, cost_of=units.text), limit)

    segments = plan(DEFAULT_EXCERPT_CHARS, None)
    if len(segments) > r.max_summary_calls:
        segments = plan(TERSE_EXCERPT_CHARS, TERSE_TEXT_CHARS)  # terser notes before giving up
    metrics["planned_segments"] = len(segments)
    if not segments:
        return finish("skipped", "no_compactable_history")
    if len(segments) > r.max_summary_calls:
        return by_code("too_many_segments")

    summary = prior
    index = 0
    while index < len(segments):
        segment = segments[index]
        prompt = summary_prompt([item.text for item in segment], previous_summary=summary, max_chars=max_chars,
                                part=index + 1, parts=len(segments))
        if estimator.request(prompt) > effective:
            if len(segment) == 1:
                return by_code("segment_too_large")
            # The estimate of the joined text came out above the sum of its parts: move
            # the last item on to the next segment and try again.
            if index + 1 == len(segments):
                segments.append([])
            segments[index + 1].insert(0, segment.pop())
            metrics["planned_segments"] = len(segments)
            continue
        reason, summary = yield from summarize(
            r, sizing, transcript_form([item.text for item in segment], summary, index + 1, len(segments)),
            # The first segment is given the earlier summaries: it consumes what they stood for.
            consumed=trace_union([*(item.trace for item in segment), earlier_trace if index == 0 else ()]),
            messages_count=sum(item.messages for item in _first_per_group(segment)), index=index,
            parts=len(segments), metrics=metrics)
        if reason is not None:
            return by_code(reason)
        index += 1

    assert summary is not None
    return finished.result(summary, metrics)


def _cached_form(system: dict[str, Any], messages: Sequence[dict[str, Any]], kept: int) -> PromptFor:
    """A summary request of the cached form (CTX-46): the system message and ``messages``
    as the action request carries them, then the instruction (``kept``: how many of the
    newest messages stay verbatim after the summary)."""
    def form(max_chars: int, too_long: int | None = None) -> list[dict[str, Any]]:
        return [system, *messages, cached_summary_instruction(kept=kept, max_chars=max_chars, too_long=too_long)]
    return form


def _first_per_group(segment: Sequence[Item]) -> list[Item]:
    """One item per group (fragments of a group share its message count)."""
    seen: set[int] = set()
    out = []
    for item in segment:
        if item.group not in seen:
            seen.add(item.group)
            out.append(item)
    return out
