"""The native Anthropic Messages body (CTX-5, CTX-10, CTX-11): literal inputs, exact outputs."""

from __future__ import annotations

import copy
import json

import pytest
from histories import build, histories
from hypothesis import given
from hypothesis import strategies as st

from context import continuation_message, project_records
from context.adapters import CONTINUE_NOTE, HISTORY_START_NOTE, RequestValidationError
from context.anthropic import build_anthropic_body
from context.anthropic_turns import IMAGE_UNREADABLE_NOTE
from context.anthropic_validate import anthropic_body_problems
from tests.fakes.anthropic_rules import refusal, sign_thinking

EPHEMERAL = {"type": "ephemeral"}
TOOLS = [{"type": "function", "function": {"name": "run", "description": "Run a command", "parameters": {
             "type": "object", "properties": {"cmd": {"type": "string"}}}}},
         {"type": "function", "function": {"name": "current_time", "parameters": {"type": "object"}}}]
SIGNED = [{"type": "thinking", "thinking": "The user wants the tests run.", "signature": "EqQBCkYIBBgC"},
          {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}]


def call(call_id: str, name: str = "run", arguments: str = '{"cmd": "pytest"}') -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def body(messages, **kwargs):
    kwargs.setdefault("model", "claude-opus-5")
    kwargs.setdefault("max_tokens", 1024)
    kwargs.setdefault("cache", False)
    return build_anthropic_body(messages, **kwargs)


def test_ctx11_system_is_top_level_and_only_user_and_assistant_turns_are_sent() -> None:
    sent = body([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"},
                 {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye"}])
    assert sent == {
        "model": "claude-opus-5", "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are terse."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                     {"role": "assistant", "content": [{"type": "text", "text": "Hello."}]},
                     {"role": "user", "content": [{"type": "text", "text": "Bye"}]}],
        "stream": True,
    }


def test_ctx11_every_tool_result_comes_first_in_the_next_user_turn() -> None:
    sent = body([
        {"role": "user", "content": "Run the tests"},
        {"role": "assistant", "content": "Running.",
         "tool_calls": [call("call_1"), call("call_2", "current_time", "{}")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "2 failed"},
        {"role": "tool", "tool_call_id": "call_2", "content": "12:00"},
        {"role": "user",
         "content": "[Supplement: the user sent this while the previous request was running]\nAlso lint"},
    ])
    assert sent["messages"][1:] == [
        {"role": "assistant", "content": [
            {"type": "text", "text": "Running."},
            {"type": "tool_use", "id": "call_1", "name": "run", "input": {"cmd": "pytest"}},
            {"type": "tool_use", "id": "call_2", "name": "current_time", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "2 failed"},
            {"type": "tool_result", "tool_use_id": "call_2", "content": "12:00"},
            {"type": "text", "text": "[Supplement: the user sent this while the previous request was running]\n"
                                     "Also lint"}]},
    ]


def test_ctx11_tools_are_sent_as_name_description_and_input_schema_and_max_tokens_always() -> None:
    sent = body([{"role": "user", "content": "Hi"}], tools=TOOLS, max_tokens=4096)
    assert sent["max_tokens"] == 4096
    assert sent["tools"] == [
        {"name": "run", "description": "Run a command",
         "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}}},
        {"name": "current_time", "input_schema": {"type": "object"}},
    ]
    assert TOOLS[0]["function"]["name"] == "run" and "input_schema" not in TOOLS[0]  # the caller's list is untouched
    with pytest.raises(ValueError):
        body([{"role": "user", "content": "Hi"}], max_tokens=0)


def test_ctx11_images_are_base64_blocks_links_are_url_blocks_and_other_data_is_a_note() -> None:
    content = [{"type": "text", "text": "What is this?"},
               {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
               {"type": "image_url", "image_url": {"url": "data:image/jpg;base64,/9j/4AAQ"}},
               {"type": "image_url", "image_url": {"url": "https://example.org/cat.webp"}},
               {"type": "image_url", "image_url": {"url": "data:image/svg+xml;base64,PHN2Zz4="}}]
    sent = body([{"role": "user", "content": content}])
    assert sent["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.org/cat.webp"}},
        {"type": "text", "text": IMAGE_UNREADABLE_NOTE},
    ]
    text_only = body([{"role": "user", "content": content[:2]}], supports_images=False)
    assert text_only["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?\n[image omitted: this model cannot read images]"}]


def test_ctx5_ids_anthropic_refuses_are_rewritten_together_with_their_results() -> None:
    sent = body([
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": None, "tool_calls": [call("functions.run:0"), call("ok_id")]},
        {"role": "tool", "tool_call_id": "ok_id", "content": "B"},
        {"role": "tool", "tool_call_id": "functions.run:0", "content": "A"},
        {"role": "assistant", "content": None, "tool_calls": [call("ok_id")]},  # reused by another provider
        {"role": "tool", "tool_call_id": "ok_id", "content": "C"},
    ])
    uses = [(b["id"], b["input"]) for m in sent["messages"] for b in m["content"] if b["type"] == "tool_use"]
    results = [(b["tool_use_id"], b["content"]) for m in sent["messages"] for b in m["content"]
               if b["type"] == "tool_result"]
    assert [u[0] for u in uses] == ["functions_run_0", "ok_id", "ok_id_2"]
    assert results == [("ok_id", "B"), ("functions_run_0", "A"), ("ok_id_2", "C")]


def test_ctx6_arguments_that_are_not_an_object_are_sent_as_one() -> None:
    sent = body([{"role": "user", "content": "Go"},
                 {"role": "assistant", "content": None, "tool_calls": [call("c1", arguments="[1, 2]")]},
                 {"role": "tool", "tool_call_id": "c1", "content": "error: expected an object"}])
    assert sent["messages"][1]["content"] == [
        {"type": "tool_use", "id": "c1", "name": "run", "input": {"invalid_json_arguments": "[1, 2]"}}]


def history_with_thinking(reasoning) -> list[dict]:
    return [{"role": "user", "content": "Run the tests"},
            {"role": "assistant", "content": "Running.", "reasoning": reasoning, "tool_calls": [call("c1")]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"}]


def test_ctx11_thinking_blocks_go_back_byte_identical_when_the_same_model_continues() -> None:
    history = history_with_thinking(copy.deepcopy(SIGNED))
    sent = body(history, keep_thinking=True)
    assert sent["messages"][1]["content"][:3] == [*SIGNED, {"type": "text", "text": "Running."}]
    assert history[1]["reasoning"] == SIGNED  # the record's blocks are not touched


def test_ctx11_thinking_blocks_are_dropped_for_another_model_and_never_synthesized_or_repaired() -> None:
    assert body(history_with_thinking(SIGNED))["messages"][1]["content"][0] == {"type": "text", "text": "Running."}
    unsigned = [SIGNED[0], {"type": "thinking", "thinking": "cut short"}]
    for reasoning in (unsigned, "plain reasoning text", None, [{**SIGNED[0], "extra": 1}]):
        first = body(history_with_thinking(reasoning), keep_thinking=True)["messages"][1]["content"][0]
        assert first == {"type": "text", "text": "Running."}, reasoning


def test_ctx11_blank_text_is_dropped_and_the_request_never_ends_on_an_assistant_turn() -> None:
    sent = body([{"role": "user", "content": [{"type": "text", "text": "  "}, {"type": "text", "text": "Hi"}]},
                 {"role": "assistant", "content": "   ", "tool_calls": [call("c1")]},
                 {"role": "tool", "tool_call_id": "c1", "content": ""},
                 {"role": "assistant", "content": "Done."}])
    assert sent["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "run", "input": {"cmd": "pytest"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1",
                                      "content": "(the tool returned no output)"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        {"role": "user", "content": [{"type": "text", "text": CONTINUE_NOTE}]},
    ]


def test_ctx11_a_history_that_starts_with_the_assistant_gets_a_user_turn_first() -> None:
    sent = body([{"role": "assistant", "content": "Earlier answer."}, {"role": "user", "content": "Go on"}])
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    assert sent["messages"][0]["content"] == [{"type": "text", "text": HISTORY_START_NOTE}]


def marks(sent: dict) -> list[str]:
    """Where the cache_control marks are, as readable places."""
    found = [f"system.{i}" for i, b in enumerate(sent.get("system", [])) if "cache_control" in b]
    found += [f"tools.{i}" for i, b in enumerate(sent.get("tools", [])) if "cache_control" in b]
    found += [f"messages.{i}.{j}" for i, m in enumerate(sent["messages"]) for j, b in enumerate(m["content"])
              if "cache_control" in b]
    return found


def test_cache_breakpoints_sit_on_system_the_summary_the_previous_turn_and_the_end() -> None:
    summary = continuation_message("The user asked for a release.", restated_anchor=True)
    view = [{"role": "system", "content": "You are a release agent."}, summary,
            {"role": "user", "content": "Ship version 2"},
            {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
            {"role": "tool", "tool_call_id": "c1", "content": "built"},
            {"role": "assistant", "content": None, "tool_calls": [call("c2")]},
            {"role": "tool", "tool_call_id": "c2", "content": "tested"}]
    sent = build_anthropic_body(view, model="claude-opus-5", max_tokens=1024, tools=TOOLS)
    assert marks(sent) == ["system.0", "messages.0.0", "messages.2.0", "messages.4.0"]
    assert all(b["cache_control"] == EPHEMERAL for b in [sent["system"][0], sent["messages"][0]["content"][0]])
    assert sent["messages"][0]["content"][0]["text"] == summary["content"]  # the summary, not the anchor after it


def test_cache_breakpoints_fall_back_to_the_tools_and_never_exceed_four() -> None:
    sent = build_anthropic_body([{"role": "user", "content": "Hi"}], model="m", max_tokens=64, tools=TOOLS)
    assert marks(sent) == ["tools.1", "messages.0.0"]
    plain = build_anthropic_body([{"role": "user", "content": "Hi"}], model="m", max_tokens=64, cache=False)
    assert marks(plain) == []


def test_ctx10_a_history_that_breaks_the_protocol_is_refused_not_sent() -> None:
    with pytest.raises(RequestValidationError) as caught:
        body([{"role": "user", "content": "Hi"}, {"role": "tool", "tool_call_id": "nowhere", "content": "x"}])
    assert [p.rule for p in caught.value.problems] == ["tool-without-call"]
    with pytest.raises(RequestValidationError):
        body([{"role": "system", "content": "Only instructions"}])


def valid_body() -> dict:
    return {"model": "m", "max_tokens": 64, "system": [{"type": "text", "text": "s"}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                         {"role": "assistant", "content": [
                             *copy.deepcopy(SIGNED), {"type": "tool_use", "id": "c1", "name": "run", "input": {}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok"},
                                                      {"type": "text", "text": "and?"}]}]}


def broken(change) -> list[str]:
    sent = valid_body()
    change(sent)
    return sorted({p.rule for p in anthropic_body_problems(sent)})


def test_ctx10_the_native_check_accepts_a_valid_body_and_names_each_broken_rule() -> None:
    assert anthropic_body_problems(valid_body()) == []
    msgs = "messages"
    assert broken(lambda b: b.update(max_completion_tokens=5, stream_options={})) == ["unknown-field"]
    assert broken(lambda b: b.pop("max_tokens")) == ["max-tokens"]
    assert broken(lambda b: b[msgs][0].update(role="system")) == ["message-shape"]
    assert broken(lambda b: b[msgs][1].update(tool_calls=[])) == ["unknown-field"]
    assert broken(lambda b: b[msgs].insert(0, {"role": "assistant", "content": "x"})) == ["first-turn-not-user"]
    assert broken(lambda b: b[msgs].insert(1, {"role": "user", "content": "again"})) == ["consecutive-same-role"]
    assert broken(lambda b: b[msgs][2]["content"].reverse()) == ["result-not-first"]
    assert broken(lambda b: b[msgs][2]["content"][0].update(tool_use_id="c9")) == [
        "tool-without-call", "unanswered-call"]
    assert broken(lambda b: b[msgs][1]["content"][2].update(id="call.1")) == [
        "call-id-format", "tool-without-call", "unanswered-call"]
    assert broken(lambda b: b[msgs][1]["content"][2].update(input="[]")) == ["call-arguments"]
    assert broken(lambda b: b[msgs][0]["content"][0].update(text=" ")) == ["blank-text-block"]
    assert broken(lambda b: b[msgs][1]["content"][0].pop("signature")) == ["thinking-block"]
    assert broken(lambda b: b[msgs][1]["content"].reverse()) == ["thinking-block"]
    assert broken(lambda b: b[msgs].pop()) == ["ends-on-assistant", "unanswered-call"]
    for_five = [{"type": "text", "text": f"t{i}", "cache_control": dict(EPHEMERAL)} for i in range(5)]
    assert broken(lambda b: b[msgs][0].update(content=for_five)) == ["too-many-breakpoints"]


# --- every projected history (Hypothesis) ---------------------------------------------------

def _signed(records: list[dict], model: str) -> list[dict]:
    """The records with each list of reasoning blocks signed for ``model`` (as that model
    would have returned them); the generator's unsigned blocks stand for cut ones."""
    out = copy.deepcopy(records)
    for record in out:
        message = record.get("message")
        if isinstance(message, dict) and isinstance(message.get("reasoning"), list) and record["seq"] % 2:
            message["reasoning"] = [{"type": "thinking", "thinking": "t", "signature": sign_thinking(model, "t")}]
    return out


def _user_text(sent: dict) -> str:
    return "\x00".join(b.get("text", "") for m in sent["messages"] if m["role"] == "user"
                       for b in m["content"] if b["type"] == "text")


@given(events=histories(), keep=st.booleans())
def test_ctx10_every_projected_history_yields_a_body_the_strict_fake_accepts(events, keep) -> None:
    history = build(events)
    projected = project_records(_signed(history.records, "claude-opus-5"))
    if not projected:
        return
    request = [{"role": "system", "content": "You are an agent."}, *projected]
    sent = build_anthropic_body(request, model="claude-opus-5", max_tokens=256, tools=TOOLS, keep_thinking=keep)
    assert anthropic_body_problems(sent) == []
    assert refusal(sent) is None, refusal(sent)
    assert "META" not in json.dumps(sent, ensure_ascii=False)
    thinking = [b for m in sent["messages"] for b in m["content"] if b["type"] in ("thinking", "redacted_thinking")]
    assert keep or not thinking
    text, position = _user_text(sent), 0
    for seq, words in history.user_texts:
        if seq > history.last_checkpoint:
            position = text.find(words, position)
            assert position >= 0, words
