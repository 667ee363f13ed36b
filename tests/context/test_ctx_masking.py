"""CTX-47 Reversible before lossy: the masking tier, pure (context/compaction/masking.py)
and inside the engine.

For any history: masking never breaks a tool_call/result pair, never touches a retained
group, a pinned message or an image result, is idempotent, keeps the view valid in every
dialect, and every note points at the record whose text is the body it replaced (what
``read_record`` returns: ``content_text`` of the record's content).
"""

from __future__ import annotations

import json
import random

from hypothesis import event, given, settings
from hypothesis import strategies as st
from test_ctx_compaction import DIALECTS, EST, SYSTEM, drive_recording, scripted
from test_ctx_compaction_properties import build_view, group_specs

from context import Budget, ContextPolicy
from context.compaction import CompactionRequest, RuntimeState, compact, view_problems
from context.compaction.masking import (
    MASK_NOTE_HEAD,
    is_mask_note,
    mask_results,
    masking_would_do,
    note_seq,
    record_seq,
)
from context.records import content_text, is_image_part
from context.traces import trace_of_source

READ_RECORD = {"type": "function", "function": {"name": "read_record", "description": "Read a record.",
                                                "parameters": {"type": "object", "properties": {}}}}
READ_LOG = {"type": "function", "function": {"name": "read_log", "description": "Read a log.",
                                             "parameters": {"type": "object", "properties": {}}}}
TOOLS = [READ_LOG, READ_RECORD]


@st.composite
def histories(draw):
    """A generated view with its records (seq -> the message stored there), pins among the
    records' seqs, a retained start, and a target."""
    messages, sources = build_view(draw(group_specs), draw(st.booleans()), draw(st.booleans()))
    records = {source[0]: message for message, source in zip(messages, sources) if source is not None}
    pinned = frozenset(draw(st.sets(st.sampled_from(sorted(records)), max_size=4))) if records else frozenset()
    keep_from = draw(st.integers(0, len(messages)))
    # Some messages came through an earlier checkpoint: no source, only their trace.
    through = draw(st.sets(st.integers(0, max(0, len(messages) - 1)), max_size=6))
    traces = [trace_of_source(s) for s in sources]
    sources = [None if i in through else s for i, s in enumerate(sources)]
    tokens = EST.request([SYSTEM, *messages], TOOLS)
    target = draw(st.integers(0, tokens))
    return messages, sources, traces, records, pinned, keep_from, tokens, target


def masked_by(history):
    messages, sources, traces, _, pinned, keep_from, tokens, target = history
    return mask_results(messages, sources, traces, keep_from=keep_from, pinned=pinned, estimator=EST, tokens=tokens,
                        target=target, tools=TOOLS)


@settings(max_examples=150, deadline=None)
@given(history=histories())
def test_ctx47_masking_keeps_every_pair_and_retained_group_and_pin_and_image(history) -> None:
    messages, sources, traces, _, pinned, keep_from, _, _ = history
    before = json.dumps(messages)
    masking = masked_by(history)
    assert json.dumps(messages) == before  # pure: the input is never changed
    out = masking.messages
    assert len(out) == len(messages)
    for index, (new, old) in enumerate(zip(out, messages)):
        if index not in masking.masked:
            assert new == old
            continue
        # Only a tool result's content changes: same role, same call id, nothing else.
        assert old["role"] == new["role"] == "tool" and set(new) == set(old)
        assert new["tool_call_id"] == old["tool_call_id"] and is_mask_note(new)
        assert index < keep_from  # never a retained group
        seq = record_seq(sources[index], traces[index])
        assert seq is not None and seq not in pinned  # never a result with no record, never a pinned one
        content = old["content"]
        assert not (isinstance(content, list) and any(is_image_part(p) for p in content))  # never an image
        assert not is_mask_note(old)
    assert list(masking.masked) == sorted(masking.masked)  # oldest first
    for dialect in DIALECTS:
        if not view_problems(SYSTEM, messages, dialect):
            assert view_problems(SYSTEM, out, dialect) == []


@settings(max_examples=150, deadline=None)
@given(history=histories())
def test_ctx47_masking_is_idempotent(history) -> None:
    messages, sources, traces, _, pinned, keep_from, tokens, target = history
    once = masked_by(history)
    again = mask_results(once.messages, sources, traces, keep_from=keep_from, pinned=pinned, estimator=EST,
                         tokens=EST.request([SYSTEM, *once.messages], TOOLS), target=target, tools=TOOLS)
    assert again.messages == once.messages and again.masked == ()


@settings(max_examples=150, deadline=None)
@given(history=histories())
def test_ctx47_every_masked_body_is_readable_whole_again_through_its_record(history) -> None:
    messages, _, _, records, _, _, _, _ = history
    masking = masked_by(history)
    for index, seq in zip(masking.masked, masking.seqs):
        note = masking.messages[index]
        assert note_seq(note) == seq
        assert f'read_record {{"seq": {seq}}}' in note["content"]
        # read_record returns content_text of the record's content: the body the view showed.
        assert content_text(records[seq]["content"]) == content_text(messages[index]["content"])
        assert f"{len(content_text(messages[index]['content'])):,} characters" in note["content"]


@settings(max_examples=100, deadline=None)
@given(history=histories())
def test_ctx47_masking_stops_at_the_target_and_masks_everything_else_it_may(history) -> None:
    messages, _, _, _, _, _, tokens, target = history
    masking = masked_by(history)
    if masking.masked:  # it masked because the view was above the target when it started
        assert tokens > target
    after = EST.request([SYSTEM, *masking.messages], TOOLS)
    assert after <= tokens


def test_ctx47_nothing_is_masked_when_the_agent_cannot_read_a_record_back() -> None:
    messages, sources = build_view([("tools", 7), ("tools", 8), ("user", 1)], False, False)
    traces = [trace_of_source(s) for s in sources]
    masking = mask_results(messages, sources, traces, keep_from=len(messages), pinned=frozenset(), estimator=EST,
                           tokens=10**9, target=0, tools=[READ_LOG])
    assert masking.masked == () and masking.messages == messages


# -- the engine: tier 1 before the summary tier ----------------------------------------------------


BUDGET = Budget(context_window=16_000, max_output_tokens=2_000, safety_margin_tokens=400)
BODY = "2024-05-01 12:00:00 INFO worker processed batch with checksum ok\n" * 40  # ~2,600 characters


def tool_history(groups: int) -> tuple[list[dict], list]:
    """A question, then ``groups`` tool groups each with one long log result, then an answer."""
    messages: list[dict] = [{"role": "user", "content": "Go through the worker logs and report."}]
    for n in range(groups):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{n}", "type": "function", "function": {"name": "read_log", "arguments": json.dumps(
                {"day": n})}}]})
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": f"day {n}\n{BODY}"})
    messages.append({"role": "assistant", "content": "All logs read."})
    return messages, [(seq, seq) for seq in range(1, len(messages) + 1)]


DEFAULT_POLICY = ContextPolicy()


def engine_request(messages, sources, *, policy=DEFAULT_POLICY, tools=TOOLS, pinned=frozenset()):
    return CompactionRequest(system=SYSTEM, messages=messages, sources=sources, task_anchor=messages[0],
                             runtime_state=RuntimeState(), budget=BUDGET, policy=policy, estimator=EST, tools=tools,
                             trigger="budget", max_summary_calls=4, pinned=pinned)


def test_ctx47_a_tool_heavy_trigger_is_resolved_by_masking_alone_with_no_summary_call() -> None:
    messages, sources = tool_history(6)
    request = engine_request(messages, sources)
    assert EST.request([SYSTEM, *messages], TOOLS) >= BUDGET.trigger_threshold(request.policy)
    result, calls = drive_recording(compact(request), scripted)
    assert calls == [] and result.outcome == "compacted" and result.summary is None
    m = result.metrics
    assert m["tiers"] == ["mask"] and m["masked_results"] >= 1 and m["summary_calls"] == 0
    assert m["mask_tokens_removed"] == m["tokens_before_calibrated"] - m["tokens_after_calibrated"] > 0
    assert m["tokens_after_calibrated"] < m["threshold"] and m["summary_tokens_removed"] == 0
    view = result.messages
    assert [x["role"] for x in view] == [x["role"] for x in messages]  # same messages, some folded
    assert result.sources == sources and len(result.traces) == len(view)
    folded = [x for x in view if is_mask_note(x)]
    assert len(folded) == m["masked_results"] and view[-2] == messages[-2]  # the newest result stays whole
    assert folded[0]["content"].startswith(f'{MASK_NOTE_HEAD} read_log({{"day":0}}): status ok, ')
    assert m["masked_seqs"] == [note_seq(x) for x in folded] == [3 + 2 * n for n in range(len(folded))]
    for dialect in DIALECTS:
        assert view_problems(SYSTEM, view, dialect) == []
    # Compacting the masked view again folds nothing more than it must.
    again, _ = drive_recording(compact(engine_request(view, sources)), scripted)
    assert again.metrics["masked_results"] == 0


def test_ctx47_a_pinned_result_is_never_masked() -> None:
    messages, sources = tool_history(6)
    result, _ = drive_recording(compact(engine_request(messages, sources, pinned=frozenset({3}))), scripted)
    assert result.messages[2] == messages[2] and 3 not in result.metrics["masked_seqs"]


def test_ctx47_off_in_the_policy_goes_straight_to_the_summary_tier() -> None:
    messages, sources = tool_history(6)
    result, calls = drive_recording(compact(engine_request(
        messages, sources, policy=ContextPolicy(mask_tool_results=False))), scripted)
    assert result.outcome == "compacted" and len(calls) >= 1
    assert result.metrics["tiers"] == ["summary"] and result.metrics["masked_results"] == 0
    assert not any(MASK_NOTE_HEAD in json.dumps(c.messages) for c in calls)


def test_ctx47_when_masking_is_not_enough_the_summary_tier_summarizes_the_masked_view() -> None:
    # A long conversation of answers beside the logs: folding the logs cannot reach the threshold.
    messages, sources = tool_history(3)
    rng = random.Random(5)
    for n in range(12):
        messages.append({"role": "user", "content": f"Question {n}: " + " ".join(
            rng.choice(["growth", "region", "sales", "steady", "margin"]) for _ in range(180))})
        messages.append({"role": "assistant", "content": "Answer: " + "noted and checked. " * 60})
    sources = [(seq, seq) for seq in range(1, len(messages) + 1)]
    request = engine_request(messages, sources)
    result, calls = drive_recording(compact(request), scripted)
    m = result.metrics
    assert result.outcome == "compacted" and m["tiers"] == ["mask", "summary"] and len(calls) >= 1
    assert m["masked_results"] >= 1 and m["mask_tokens_removed"] > 0 and m["summary_tokens_removed"] > 0
    assert m["tokens_masked_calibrated"] - m["tokens_after_calibrated"] == m["summary_tokens_removed"]
    # The summarizer read the notes (with the records that read each back), not the bodies.
    shown = "\n".join(json.dumps(c.messages) for c in calls)
    assert MASK_NOTE_HEAD in shown and "read_record" in shown and "checksum ok" not in shown


def test_ctx45_a_summary_is_prepared_only_when_masking_alone_would_not_do() -> None:
    logs, sources = tool_history(6)
    assert masking_would_do(engine_request(logs, sources))
    assert not masking_would_do(engine_request(logs, sources, policy=ContextPolicy(mask_tool_results=False)))
    assert not masking_would_do(engine_request(logs, sources, tools=[READ_LOG]))
    chat = [{"role": "user" if n % 2 == 0 else "assistant", "content": "words " * 300} for n in range(12)]
    assert not masking_would_do(engine_request(chat, [(s, s) for s in range(1, 13)]))


# -- the engine, for any history -------------------------------------------------------------------


@st.composite
def engine_scenarios(draw):
    messages, sources = build_view(draw(group_specs), draw(st.booleans()), draw(st.booleans()))
    seqs = sorted(s[0] for s in sources if s is not None)
    pinned = frozenset(draw(st.sets(st.sampled_from(seqs), max_size=3))) if seqs else frozenset()
    effective = draw(st.integers(2_500, 40_000))
    output = draw(st.integers(256, 4_096))
    budget = Budget(context_window=effective + output + 256, max_output_tokens=output, safety_margin_tokens=256)
    context_ratio = draw(st.sampled_from([0.5, 0.7, 0.8, 0.9, 1.0]))
    target_ratio = draw(st.sampled_from([r for r in (0.2, 0.3, 0.45, 0.6, 0.75) if r < context_ratio]))
    users = [m for m in messages if m["role"] == "user"]
    return CompactionRequest(
        system=SYSTEM, messages=messages, sources=sources, task_anchor=users[-1] if users else None,
        runtime_state=RuntimeState(), budget=budget,
        policy=ContextPolicy(context_ratio=context_ratio, target_ratio=target_ratio), estimator=EST, tools=TOOLS,
        trigger=draw(st.sampled_from(["budget", "user_turns", "manual"])), max_summary_calls=draw(st.integers(1, 6)),
        dialect=draw(st.sampled_from(DIALECTS)), pinned=pinned)


def notes_of(messages) -> list[str]:
    return [m["content"] for m in messages if is_mask_note(m)]


@settings(max_examples=100, deadline=None)
@given(request=engine_scenarios())
def test_ctx47_for_any_history_the_engine_folds_only_older_unpinned_results_and_summarizes_the_rest(request) -> None:
    before = json.dumps(request.messages)
    result, calls = drive_recording(compact(request), scripted)
    assert json.dumps(request.messages) == before  # pure
    m = result.metrics
    event(f"{result.outcome}: {'+'.join(m['tiers']) or 'none'}")
    if result.outcome != "compacted":
        assert result.messages is None
        return
    view = result.messages
    for dialect in DIALECTS:
        assert view_problems(SYSTEM, view, dialect) == []
    after = m["tokens_after_calibrated"]
    assert after < m["threshold"] and after < m["tokens_before_calibrated"]
    if m["tiers"] == ["mask"]:
        # Folded, no summary: the same messages, only some results' bodies replaced by notes.
        assert calls == [] and result.summary is None and m["masked_results"] >= 1
        assert len(view) == len(request.messages) and result.sources == request.sources
        changed = [i for i, (new, old) in enumerate(zip(view, request.messages)) if new != old]
        assert len(changed) == m["masked_results"]
        for i in changed:
            old, new = request.messages[i], view[i]
            assert old["role"] == "tool" and new["tool_call_id"] == old["tool_call_id"] and is_mask_note(new)
            assert note_seq(new) not in request.pinned and note_seq(new) == request.sources[i][0]
        # The newest group is what the model continues from: never folded.
        last_call = max(i for i, x in enumerate(request.messages) if x["role"] != "tool")
        assert all(view[i] == request.messages[i] for i in range(last_call, len(view)))
        # Idempotent: compacting the folded view folds nothing more.
        again, _ = drive_recording(compact(CompactionRequest(**{
            **request.__dict__, "messages": view, "sources": result.sources, "traces": result.traces})), scripted)
        assert again.metrics["masked_results"] == 0
    else:
        # A summary call was made, or none could be and code wrote the summary (CTX-48).
        assert "summary" in m["tiers"] and (calls or m["summary_source"] == "code")
        # The summary tier keeps the retained groups as they were: no note appears in them,
        # and a folded result's note reached the summarizer, never its body.
        assert notes_of(view) == [n for n in notes_of(request.messages) if n in notes_of(view)]
        if "mask" in m["tiers"] and calls:
            shown = "\n".join(json.dumps(c.messages) for c in calls)
            assert all(f'read_record {{\\"seq\\": {seq}}}' in shown for seq in m["masked_seqs"])
