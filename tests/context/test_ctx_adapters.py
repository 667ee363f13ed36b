"""CTX-11: dialect adapters build bodies that pass CTX-10 in their own dialect."""

from __future__ import annotations

import copy

import pytest
from recordkit import image, text, tool_call_msg

from context import RequestValidationError, adapt_messages, build_request_body, validate_request
from context.adapters import CONTINUE_NOTE, HISTORY_START_NOTE, IMAGE_UNSUPPORTED_NOTE

U = {"role": "user", "content": "Question"}
TOOLS = [{"type": "function", "function": {"name": "run_tests", "parameters": {"type": "object"}}}]


def calls(*ids: str, **extra) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [tool_call_msg(i) for i in ids], **extra}


def tool(call_id: str, content="out") -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def test_ctx11_the_output_limit_goes_in_the_field_the_provider_names_and_usage_is_asked_for() -> None:
    body = build_request_body([U], dialect="openai", output_limit_field="max_completion_tokens", model="gpt-4.1",
                              max_output_tokens=4096, tools=TOOLS)
    assert body == {"model": "gpt-4.1", "messages": [U], "max_completion_tokens": 4096, "tools": TOOLS,
                    "stream": True, "stream_options": {"include_usage": True}}


def test_ctx11_max_tokens_is_the_default_output_limit_field() -> None:
    for dialect in ("deepseek", "openai"):
        body = build_request_body([U], dialect=dialect, model="m", max_output_tokens=1000, stream=False)
        assert body == {"model": "m", "messages": [U], "max_tokens": 1000, "stream": False}


def test_ctx11_openai_never_receives_reasoning_fields() -> None:
    messages = [U, calls("call_1", reasoning_content="plan", reasoning=[{"type": "thinking"}]), tool("call_1"), U]
    body = build_request_body(messages, dialect="openai", model="gpt-4o", max_output_tokens=10)
    assert body["messages"][1] == calls("call_1")


def test_ctx11_deepseek_thinking_mode_passes_reasoning_back_on_tool_call_messages_only() -> None:
    messages = [
        U,
        calls("call_1", reasoning_content="I should run the tests"),
        tool("call_1"),
        calls("call_2"),  # a call made without reasoning still carries an empty string
        tool("call_2"),
        {"role": "assistant", "content": "Done.", "reasoning_content": "all green"},
        U,
    ]
    body = build_request_body(messages, dialect="deepseek", model="deepseek-chat", max_output_tokens=10,
                              thinking=True, stream=False)
    assert body["messages"] == [
        U,
        calls("call_1", reasoning_content="I should run the tests"),
        tool("call_1"),
        calls("call_2", reasoning_content=""),
        tool("call_2"),
        {"role": "assistant", "content": "Done."},
        U,
    ]


def test_ctx11_deepseek_reasoner_models_are_always_in_thinking_mode() -> None:
    body = build_request_body([U, calls("call_1"), tool("call_1"), U], dialect="deepseek",
                              model="deepseek-reasoner", max_output_tokens=10)
    assert body["messages"][1]["reasoning_content"] == ""


def test_ctx11_deepseek_merges_consecutive_same_role_messages() -> None:
    messages = [U, {"role": "user", "content": "More detail"},
                {"role": "assistant", "content": "Part one"}, {"role": "assistant", "content": "Part two"}, U]
    assert adapt_messages(messages, dialect="deepseek") == [
        {"role": "user", "content": "Question\n\nMore detail"},
        {"role": "assistant", "content": "Part one\n\nPart two"},
        U,
    ]


def test_ctx11_anthropic_keeps_system_text_at_the_start_and_starts_with_a_user_turn() -> None:
    messages = [{"role": "system", "content": "Rules"}, {"role": "assistant", "content": "Hi"}, U,
                {"role": "system", "content": "Late note"}, {"role": "assistant", "content": "A"},
                {"role": "assistant", "content": "B"}, U]
    assert adapt_messages(messages, dialect="anthropic") == [
        {"role": "system", "content": "Rules"},
        {"role": "user", "content": HISTORY_START_NOTE},
        {"role": "assistant", "content": "Hi"},
        U,
        {"role": "user", "content": "[System note]\n\nLate note"},
        {"role": "assistant", "content": "A\n\nB"},
        U,
    ]


def test_ctx11_tool_images_move_to_a_user_message_after_the_tool_group() -> None:
    messages = [U, calls("call_1", "call_2"), tool("call_1", [text("page"), image("data:shot")]), tool("call_2"), U]
    assert adapt_messages(messages, dialect="openai") == [
        U,
        calls("call_1", "call_2"),
        tool("call_1", "page\n[1 image(s) attached in the next user message]"),
        tool("call_2"),
        {"role": "user", "content": [text("Images returned by tool call call_1:"), image("data:shot")]},
        U,
    ]


def test_ctx11_images_are_dropped_with_a_note_for_text_only_models() -> None:
    messages = [{"role": "user", "content": [text("What is this?"), image()]}, calls("call_1"),
                tool("call_1", [image()]), {"role": "user", "content": "and?"}]
    for dialect, flag in (("openai", False), ("deepseek", None)):
        adapted = adapt_messages(messages, dialect=dialect, supports_images=flag)
        assert adapted[0]["content"] == f"What is this?\n{IMAGE_UNSUPPORTED_NOTE}"
        assert adapted[2]["content"] == IMAGE_UNSUPPORTED_NOTE


def test_ctx11_no_request_ends_on_an_assistant_turn() -> None:
    adapted = adapt_messages([U, {"role": "assistant", "content": "Answer"}], dialect="openai")
    assert adapted[-1] == {"role": "user", "content": CONTINUE_NOTE}


def test_ctx11_adapters_never_change_their_input() -> None:
    messages = [U, calls("call_1", reasoning_content="r"), tool("call_1", [text("t"), image()]), U]
    before = copy.deepcopy(messages)
    for dialect in ("openai", "deepseek", "anthropic"):
        build_request_body(messages, dialect=dialect, model="m", max_output_tokens=5, thinking=True)
    assert messages == before


def test_ctx11_every_adapter_output_passes_its_own_validation_mode() -> None:
    messages = [{"role": "assistant", "content": "Welcome"}, U, U, calls("call_1", reasoning_content="r"),
                tool("call_1", [text("t"), image()]), {"role": "system", "content": "note"},
                {"role": "assistant", "content": "x"}, {"role": "assistant", "content": " "}]
    for dialect in ("openai", "deepseek", "anthropic"):
        body = build_request_body(messages, dialect=dialect, model="m", max_output_tokens=5)
        assert validate_request(body, dialect) == []


def test_ctx11_a_request_that_cannot_be_made_valid_is_refused_with_its_problems() -> None:
    with pytest.raises(RequestValidationError) as caught:
        build_request_body([U, tool("nobody")], dialect="openai", model="m", max_output_tokens=5)
    assert [p.rule for p in caught.value.problems] == ["tool-without-call"]


def test_ctx11_bad_limits_and_unknown_dialects_are_errors() -> None:
    with pytest.raises(ValueError):
        build_request_body([U], dialect="openai", model="m", max_output_tokens=0)
    with pytest.raises(ValueError):
        build_request_body([U], dialect="mistral", model="m", max_output_tokens=5)
