"""The inspector's diff of two requests (SPEC §10): the first changed position is where a
provider's prompt cache stops matching, across a step, a compaction, a truncation and an
id rewrite, on OpenAI messages and on Anthropic turns alike."""
from __future__ import annotations

import copy

from hypothesis import given
from hypothesis import strategies as st

from context.request_diff import ADDED, KEPT, REMOVED, REWRITTEN, DiffRow, message_key, request_diff

SYSTEM = {"role": "system", "content": "Be brief."}


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def calls(*ids: str) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "6*7"}'}}
        for i in ids]}


def result(call_id: str, text: str = "6*7 = 42") -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def answer(text: str) -> dict:
    return {"role": "assistant", "content": text}


def statuses(diff) -> list[tuple[str, int | None, int | None]]:
    return [(row.status, row.before, row.after) for row in diff.rows]


def test_a_step_that_appends_changes_nothing_before_its_new_messages():
    before = [SYSTEM, user("What is 6*7?"), calls("call_1"), result("call_1")]
    after = [*copy.deepcopy(before), answer("42."), user("And 7*8?")]
    diff = request_diff(before, after)
    assert diff.first_changed == 4
    assert statuses(diff) == [(KEPT, 0, 0), (KEPT, 1, 1), (KEPT, 2, 2), (KEPT, 3, 3), (ADDED, None, 4),
                              (ADDED, None, 5)]
    assert diff.counts == {KEPT: 4, REWRITTEN: 0, ADDED: 2, REMOVED: 0}
    assert [span.as_dict() for span in diff.spans] == [
        {"status": KEPT, "before": [0, 4], "after": [0, 4]}, {"status": ADDED, "before": [4, 4], "after": [4, 6]}]


def test_the_same_messages_have_no_first_change_whatever_their_key_order():
    before = [SYSTEM, {"content": "Hi", "role": "user"}]
    assert request_diff(before, [SYSTEM, user("Hi")]).first_changed is None
    assert request_diff([], []).first_changed is None and request_diff([], []).rows == ()


def test_a_compaction_shrinks_the_prefix_and_changes_it_right_after_the_system_message():
    before = [SYSTEM, user("Question 1"), calls("call_1"), result("call_1"), answer("Answer 1"),
              user("Question 2"), answer("Answer 2"), user("Question 3")]
    summary = user("This session is being continued from an earlier conversation. <summary>…</summary>")
    after = [SYSTEM, summary, user("Question 3"), answer("Answer 3"), user("Question 4")]
    diff = request_diff(before, after)
    assert diff.first_changed == 1
    # The summary stands where the first summarized question stood; the other turns are gone.
    assert statuses(diff) == [(KEPT, 0, 0), (REWRITTEN, 1, 1), (REMOVED, 2, None), (REMOVED, 3, None),
                              (REMOVED, 4, None), (REMOVED, 5, None), (REMOVED, 6, None), (KEPT, 7, 2),
                              (ADDED, None, 3), (ADDED, None, 4)]
    assert diff.counts == {KEPT: 2, REWRITTEN: 1, ADDED: 2, REMOVED: 5}


def test_a_truncated_tool_result_is_one_message_rewritten_in_place():
    long = "line\n" * 10_000
    before = [SYSTEM, user("Read the log"), calls("call_1"), result("call_1", long), answer("It is long.")]
    cut = result("call_1", long[:2_000] + "\n[… 48,000 characters not shown: read_record(seq=3) …]")
    after = [SYSTEM, user("Read the log"), calls("call_1"), cut, answer("It is long."), user("Summarize it")]
    diff = request_diff(before, after)
    assert diff.first_changed == 3
    assert statuses(diff)[2:] == [(KEPT, 2, 2), (REWRITTEN, 3, 3), (KEPT, 4, 4), (ADDED, None, 5)]


def test_renumbered_call_ids_rewrite_every_message_that_carries_one():
    before = [SYSTEM, user("Sum these"), calls("call_a", "call_b"), result("call_a"), result("call_b"),
              answer("Both are 42."), user("Again"), calls("call_a"), result("call_a")]
    # A later projection renumbers every id to keep them unique across the session (CTX-5).
    after = [SYSTEM, user("Sum these"), calls("c1", "c2"), result("c1"), result("c2"), answer("Both are 42."),
             user("Again"), calls("c3"), result("c3"), answer("42 again.")]
    diff = request_diff(before, after)
    assert diff.first_changed == 2
    assert statuses(diff) == [(KEPT, 0, 0), (KEPT, 1, 1), (REWRITTEN, 2, 2), (REWRITTEN, 3, 3), (REWRITTEN, 4, 4),
                              (KEPT, 5, 5), (KEPT, 6, 6), (REWRITTEN, 7, 7), (REWRITTEN, 8, 8), (ADDED, None, 9)]


def test_anthropic_turns_compare_by_content_blocks_and_ignore_the_moving_cache_breakpoint():
    mark = {"type": "ephemeral"}
    turn1 = {"role": "user", "content": [{"type": "text", "text": "What is 6*7?", "cache_control": mark}]}
    before = [{"role": "system", "content": "Be brief."}, turn1,
              {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "calculator",
                                                 "input": {"expression": "6*7"}}]},
              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "42",
                                            "cache_control": mark}]}]
    after = copy.deepcopy(before)
    del after[1]["content"][0]["cache_control"], after[3]["content"][0]["cache_control"]
    after.append({"role": "assistant", "content": [{"type": "text", "text": "42.", "cache_control": mark}]})
    diff = request_diff(before, after)
    assert diff.first_changed == 4
    assert diff.counts == {KEPT: 4, REWRITTEN: 0, ADDED: 1, REMOVED: 0}
    # A truncated tool_result block is a rewrite of its user turn.
    cut = copy.deepcopy(after)
    cut[3]["content"][0]["content"] = "4…"
    assert statuses(request_diff(after, cut))[3] == (REWRITTEN, 3, 3)


def test_messages_dropped_at_the_end_change_the_request_where_it_now_ends():
    before = [SYSTEM, user("One"), answer("Two"), user("Three")]
    diff = request_diff(before, before[:2])
    assert diff.first_changed == 2
    assert statuses(diff) == [(KEPT, 0, 0), (KEPT, 1, 1), (REMOVED, 2, None), (REMOVED, 3, None)]


def test_a_first_request_is_all_added():
    diff = request_diff([], [SYSTEM, user("Hi")])
    assert diff.first_changed == 0 and diff.rows == (DiffRow(ADDED, None, 0), DiffRow(ADDED, None, 1))


messages = st.lists(st.sampled_from([SYSTEM, user("a"), user("b"), answer("x"), calls("k"), result("k"), "text",
                                     7, {"role": "user", "content": [{"type": "text", "text": "a"}]}]), max_size=12)


@given(messages, messages)
def test_the_rows_walk_both_requests_once_in_order_and_the_first_change_is_the_common_prefix(before, after):
    diff = request_diff(before, after)
    rows = diff.rows
    assert [r.after for r in rows if r.after is not None] == list(range(len(after)))
    assert [r.before for r in rows if r.before is not None] == list(range(len(before)))
    for row in rows:
        if row.status == KEPT:
            assert message_key(before[row.before]) == message_key(after[row.after])
        if row.status == REWRITTEN:
            assert message_key(before[row.before]) != message_key(after[row.after])
    prefix = 0
    while prefix < min(len(before), len(after)) and message_key(before[prefix]) == message_key(after[prefix]):
        prefix += 1
    same = len(before) == len(after) == prefix
    assert diff.first_changed == (None if same else prefix)
    assert sum(diff.counts.values()) == len(rows)
