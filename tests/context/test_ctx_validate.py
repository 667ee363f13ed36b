"""CTX-10: the request validator, one rule at a time, per provider mode."""

from __future__ import annotations

import dataclasses

import pytest
from recordkit import image, text, tool_call_msg

from context import Problem, validate_request

U = {"role": "user", "content": "Question"}
A = {"role": "assistant", "content": "Answer"}
S = {"role": "system", "content": "Be brief."}


def calls(*ids: str) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [tool_call_msg(i) for i in ids]}


def tool(call_id: str, content="out") -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def test_ctx10_a_valid_request_has_no_problems_in_any_mode() -> None:
    messages = [S, U, calls("call_1", "call_2"), tool("call_2"), tool("call_1"), A, U]
    for mode in ("openai", "anthropic", "deepseek"):
        assert validate_request(messages, mode) == []


def test_ctx10_a_problem_is_a_small_frozen_dataclass() -> None:
    problem = Problem(3, "empty-message", "user message is empty")
    with pytest.raises(dataclasses.FrozenInstanceError):
        problem.index = 4  # type: ignore[misc]


def test_ctx10_every_tool_message_answers_a_call_of_the_assistant_message_right_before_it() -> None:
    assert validate_request([U, calls("call_1"), tool("call_1"), U, tool("call_1")]) == [
        Problem(4, "tool-without-call",
                "tool message 'call_1' does not answer a call of the assistant message right before it")]


def test_ctx10_every_call_is_answered() -> None:
    assert validate_request([U, calls("call_1", "call_2"), tool("call_1"), U]) == [
        Problem(1, "unanswered-call", "call 'call_2' has no tool message right after its assistant message")]


def test_ctx10_a_call_answered_twice_is_reported() -> None:
    assert validate_request([U, calls("call_1"), tool("call_1"), tool("call_1"), U]) == [
        Problem(3, "duplicate-tool-result", "call 'call_1' is answered twice")]


def test_ctx10_ids_are_unique_across_the_request_and_portable() -> None:
    problems = validate_request([U, calls("call_1"), tool("call_1"), calls("call_1"), tool("call_1"), U,
                                 calls("bad.id"), tool("bad.id"), U])
    assert [(p.index, p.rule) for p in problems] == [(3, "duplicate-call-id"), (6, "call-id-format")]


def test_ctx10_no_empty_messages() -> None:
    problems = validate_request([{"role": "user", "content": "  "}, {"role": "assistant", "content": ""},
                                 {"role": "user", "content": []}])
    assert [(p.index, p.rule) for p in problems] == [
        (0, "empty-message"), (1, "empty-message"), (2, "empty-message")]


def test_ctx10_arguments_must_be_a_json_object_string() -> None:
    bad = {"role": "assistant", "content": None,
           "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}
    assert [p.rule for p in validate_request([U, bad, tool("c1"), U])] == ["call-arguments"]


def test_ctx10_tool_messages_carry_text_only() -> None:
    problems = validate_request([U, calls("c1"), tool("c1", [text("shot"), image()]), U])
    assert [(p.index, p.rule) for p in problems] == [(2, "content-part")]


def test_ctx10_a_request_never_ends_on_an_assistant_turn() -> None:
    assert validate_request([U, A]) == [
        Problem(1, "ends-on-assistant", "the request must not end on an assistant turn")]


def test_ctx10_an_empty_request_is_invalid() -> None:
    assert validate_request([]) == [Problem(None, "request-empty", "the request has no messages")]


def test_ctx10_a_request_body_can_be_validated_directly() -> None:
    assert validate_request({"model": "m", "messages": [U]}) == []


def test_ctx10_anthropic_mode_allows_system_text_only_at_the_start() -> None:
    messages = [S, U, A, S, U]
    assert validate_request(messages, "openai") == []
    assert validate_request(messages, "anthropic") == [
        Problem(3, "system-not-at-start", "system text is allowed only at the start")]


def test_ctx10_anthropic_mode_wants_the_first_turn_from_the_user() -> None:
    assert [p.rule for p in validate_request([S, A, U], "anthropic")] == ["first-turn-not-user"]


def test_ctx10_anthropic_mode_forbids_two_assistant_turns_in_a_row() -> None:
    assert [p.rule for p in validate_request([U, A, A, U], "anthropic")] == ["consecutive-assistant"]
    assert validate_request([U, A, A, U], "openai") == []


def test_ctx10_anthropic_mode_groups_tool_results_first_in_the_next_user_turn() -> None:
    """A user message between results would split the group: the later result is orphaned."""
    problems = validate_request([U, calls("c1", "c2"), tool("c1"), U, tool("c2"), U], "anthropic")
    assert [(p.index, p.rule) for p in problems] == [(1, "unanswered-call"), (4, "tool-without-call")]


def test_ctx10_anthropic_mode_rejects_whitespace_only_text() -> None:
    blank = {"role": "assistant", "content": " ", "tool_calls": [tool_call_msg("c1")]}
    assert [p.rule for p in validate_request([U, blank, tool("c1"), U], "anthropic")] == ["blank-text-block"]


def test_ctx10_deepseek_mode_forbids_consecutive_same_role_messages() -> None:
    problems = validate_request([U, U, A, A, U], "deepseek")
    assert [(p.index, p.rule) for p in problems] == [(1, "consecutive-same-role"), (3, "consecutive-same-role")]


def test_ctx10_deepseek_thinking_mode_needs_reasoning_content_on_tool_call_messages() -> None:
    with_reasoning = {**calls("c1"), "reasoning_content": ""}
    assert validate_request([U, with_reasoning, tool("c1"), U], "deepseek") == []
    assert [p.rule for p in validate_request([U, calls("c1"), tool("c1"), U], "deepseek", thinking=True)] == [
        "missing-reasoning-content"]
    assert validate_request([U, calls("c1"), tool("c1"), U], "deepseek") == []


def test_ctx10_deepseek_mode_rejects_images() -> None:
    assert [p.rule for p in validate_request([{"role": "user", "content": [text("see"), image()]}], "deepseek")] == [
        "image-unsupported"]


def test_ctx10_unknown_dialects_are_an_error_not_a_silent_default() -> None:
    with pytest.raises(ValueError, match="unknown dialect"):
        validate_request([U], "gemini")
