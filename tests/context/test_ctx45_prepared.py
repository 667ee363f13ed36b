"""CTX-45 (prepared summaries) and CTX-46 (summaries in the cached form), in the pure engine.

A preparation is an ordinary compaction of a snapshot; what it keeps is the summary and
the prefix of the snapshot it covers. Committing it onto the view as it is later must
give what an inline compaction cut at that prefix gives with the same summary — for any
history and any cut — and a summary whose prefix changed is discarded whole.
"""

from __future__ import annotations

import copy
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from context import BytesEstimator, ContextPolicy
from context.compaction import (
    DISCARD_REASONS,
    RuntimeState,
    SummaryCall,
    SummaryReply,
    commit_prepared,
    compact,
    continuation_summary,
    drive,
    prefix_digest,
    prepared_from,
)
from context.compaction.planner import split_groups
from context.compaction.prompt import CACHED_SUMMARY_HEADER
from tests.context.test_ctx_compaction import LOG, SYSTEM, drive_recording, nine, request, rounds, scripted, section
from tests.context.test_ctx_compaction import valid_everywhere as valid_in_every_dialect

SCHEMA = {"type": "object", "properties": {"svc": {"type": "integer"}}}
TOOLS = [{"type": "function", "function": {"name": "read_log", "description": "Read a service's log.",
                                           "parameters": SCHEMA}}]


def prepared_of(messages: list[dict], anchor=None, **engine):
    """Prepare a summary of ``messages`` (the snapshot) the way the worker does."""
    snapshot = replace(request(messages, anchor=anchor), **engine)
    result = drive(compact(snapshot), scripted)
    return prepared_from(result, snapshot), result


def group_starts(messages: list[dict]) -> list[int]:
    return [g.start for g in split_groups(messages, [None] * len(messages), [0] * len(messages))
            if g.start > 0]


# -- CTX-45: committing what was prepared ---------------------------------------------------------------


@given(done=st.integers(min_value=6, max_value=11), later=st.integers(min_value=0, max_value=3),
       cut_at=st.one_of(st.none(), st.integers(min_value=0, max_value=40)),
       question=st.booleans())
def test_ctx45_committing_a_prepared_summary_gives_the_view_an_inline_compaction_at_that_point_gives(
        done: int, later: int, cut_at: int | None, question: bool) -> None:
    snapshot = rounds(done)
    cut = None
    if cut_at is not None:  # any group boundary of the snapshot, not only where the budget puts it
        starts = group_starts(snapshot)
        cut = starts[cut_at % len(starts)]
    prepared, made = prepared_of(snapshot, cut=cut)
    if prepared is None:
        assert made.outcome != "compacted"
        return
    # Meanwhile the run went on: more rounds, perhaps a new question (a supplement taken in).
    current = [*snapshot, *rounds(later, start=done + 1)]
    if question:
        current.append({"role": "user", "content": f"Q{done + later + 1} and now the summary please"})
    anchor = next(m for m in reversed(current) if m["role"] == "user")
    state = RuntimeState(plan="1. read the logs\n2. report", queued_supplements=("also check the cache",))
    now = request(current, anchor=anchor, state=state)

    committed = commit_prepared(now, prepared)
    inline = drive(compact(replace(now, cut=prepared.prefix)), scripted)

    assert (committed.outcome, committed.reason) == (inline.outcome, inline.reason)
    assert committed.messages == inline.messages and committed.sources == inline.sources
    assert committed.summary == inline.summary
    if committed.outcome == "compacted":
        view = committed.messages
        assert valid_in_every_dialect(view)
        assert view[-(len(current) - prepared.prefix):] == current[prepared.prefix:]  # all that came after, verbatim
        assert committed.metrics["covered"] == made.metrics["covered"]
        assert committed.metrics["summary_calls"] == made.metrics["summary_calls"] >= 1
        assert "also check the cache" in str(view)  # the runtime state is today's, not the snapshot's


def test_ctx45_a_prepared_summary_is_committed_with_what_was_recorded_after_its_prefix() -> None:
    snapshot = rounds(8)
    prepared, made = prepared_of(snapshot, anchor=snapshot[-4])
    assert prepared is not None and made.outcome == "compacted"
    assert prepared.digest == prefix_digest(snapshot[:prepared.prefix])
    current = [*snapshot, *rounds(1, start=9)]
    committed = commit_prepared(request(current, anchor=current[-4]), prepared)
    assert (committed.outcome, committed.reason) == ("compacted", "committed")
    assert committed.messages[-(len(current) - prepared.prefix):] == current[prepared.prefix:]
    assert section(continuation_summary(committed.messages[0]), 6) == [
        f"Q{n} please check the logs of service {n}" for n in range(1, 6)]


def test_ctx45_room_is_kept_for_what_the_view_grows_by_before_the_trigger() -> None:
    messages = rounds(8)
    without, _ = prepared_of(messages)
    with_headroom, _ = prepared_of(messages, headroom=2_000)
    assert without is not None and with_headroom is not None
    assert with_headroom.prefix > without.prefix  # retains less now, so more fits later


def test_ctx45_a_prepared_summary_under_another_policy_or_estimator_is_discarded() -> None:
    messages = rounds(8)
    prepared, _ = prepared_of(messages)
    assert prepared is not None

    changed = commit_prepared(request(messages, policy=ContextPolicy(context_ratio=0.9)), prepared)
    assert (changed.outcome, changed.reason, changed.messages) == ("discarded", "policy_changed", None)

    class Other(BytesEstimator):
        id = "other-v1"

    other = commit_prepared(replace(request(messages), estimator=Other()), prepared)
    assert (other.outcome, other.reason) == ("discarded", "estimator_changed")
    assert {changed.reason, other.reason} <= set(DISCARD_REASONS)


def test_ctx45_a_change_inside_the_prefix_discards_it_whole() -> None:
    messages = rounds(8)
    prepared, _ = prepared_of(messages)
    assert prepared is not None
    # A message inserted inside the covered range (a supplement placed there), one edited,
    # and a view that no longer reaches the prefix: none fits.
    inserted = [*messages[:2], {"role": "user", "content": "a supplement"}, *messages[2:]]
    edited = copy.deepcopy(messages)
    edited[1]["content"] = "Looking at something else."
    for view in (inserted, edited, messages[:prepared.prefix - 1]):
        result = commit_prepared(request(view), prepared)
        assert (result.outcome, result.reason, result.messages) == ("discarded", "view_changed", None)


def test_ctx45_a_prefix_that_would_split_a_tool_group_is_never_committed() -> None:
    messages = rounds(8)
    prepared, _ = prepared_of(messages)
    assert prepared is not None
    inside = next(i for i in range(prepared.prefix, len(messages)) if messages[i]["role"] == "tool")
    split = replace(prepared, prefix=inside, digest=prefix_digest(messages[:inside]))
    result = commit_prepared(request(messages), split)
    assert (result.outcome, result.reason) == ("discarded", "not_at_group_boundary")


def test_ctx45_a_prepared_summary_that_no_longer_brings_the_view_under_the_trigger_is_refused() -> None:
    messages = rounds(8)
    prepared, _ = prepared_of(messages)
    assert prepared is not None
    grown = [*messages, *rounds(4, start=9)]  # grew far past what the summary left room for
    result = commit_prepared(request(grown), prepared)
    # Shortened to the little room left, it is no summary any more (CTX-48), and neither is
    # what code could write there; or it still is one and the view stays above the trigger.
    assert result.outcome == "failed" and result.reason in ("above_threshold", "summary_failed")
    assert result.messages is None


# -- CTX-46: the cached form ----------------------------------------------------------------------------


def cached_summarizer(call: SummaryCall) -> SummaryReply:
    """Reads the conversation the cached form carries (every message before the instruction)."""
    users = [m["content"][:60] for m in call.messages[1:-1] if m["role"] == "user"]
    return SummaryReply(f"<summary>\n{nine(users)}\n</summary>")


def test_ctx46_the_summary_request_is_the_action_request_followed_by_the_instruction() -> None:
    messages = rounds(7)  # over the trigger, and room for the instruction under the hard limit
    cached = replace(request(messages, anchor=messages[-4], tools=TOOLS), ride_cache=True)
    result, calls = drive_recording(compact(cached), cached_summarizer)
    assert (result.outcome, result.metrics["summary_form"]) == ("compacted", "cached")
    assert len(calls) == 1
    call = calls[0]
    # Byte for byte the action request's system, tools and messages, then one instruction.
    assert call.messages[:-1] == [SYSTEM, *messages] and call.tools == TOOLS
    instruction = call.messages[-1]
    assert instruction["role"] == "user" and instruction["content"].startswith(CACHED_SUMMARY_HEADER)
    kept = result.metrics["retained_messages"]
    assert f"except the {kept:,} most recent messages" in instruction["content"]
    assert "do not call any tool" in instruction["content"]
    assert call.estimated_tokens == BytesEstimator().request(call.messages, TOOLS)
    assert result.metrics["covered"] == [1, len(messages) - kept]
    assert valid_in_every_dialect(result.messages)


def test_ctx46_a_view_too_large_for_the_cached_form_sends_the_part_it_summarizes_as_the_action_request_did() -> None:
    # Close to the hard limit: the whole action request plus the instruction would not fit;
    # the part being summarized, as it was sent, plus the instruction does.
    messages = rounds(8)
    result, calls = drive_recording(compact(replace(request(messages, tools=TOOLS), ride_cache=True)),
                                    cached_summarizer)
    assert (result.outcome, result.metrics["summary_form"]) == ("compacted", "cached_prefix")
    [call] = calls
    summarized = len(messages) - result.metrics["retained_messages"]
    assert call.messages[:-1] == [SYSTEM, *messages[:summarized]] and call.tools == TOOLS
    assert "Write a handoff summary of everything above for" in call.messages[-1]["content"]
    assert section(result.summary, 6) == [m["content"][:60] for m in messages[:summarized] if m["role"] == "user"]


def test_ctx46_a_part_too_large_for_either_cached_form_is_summarized_from_its_transcript() -> None:
    messages = [*rounds(1, log=LOG * 11), *rounds(2, start=2)]  # one old result of 12,000 characters
    result, calls = drive_recording(compact(replace(request(messages, tools=TOOLS), ride_cache=True)), scripted)
    assert (result.outcome, result.metrics["summary_form"]) == ("compacted", "transcript")
    assert calls and all(c.tools is None for c in calls)
