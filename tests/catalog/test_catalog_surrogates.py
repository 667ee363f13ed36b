"""What a provider sends holds no lone surrogate once read (issue #44 item 4).

JSON's ``\\ud800`` escape decodes in Python to a lone surrogate, which nothing can encode to
UTF-8: every delta's text, reasoning, tool name, id and arguments is read with them
replaced, on both wires, streamed or not; and a request body that still held one is sent
as valid UTF-8 rather than failing every later question of the session.
"""
from __future__ import annotations

import json

from models_catalog.demo import DemoChatClient
from models_catalog.discovery import discover_models
from models_catalog.providers.anthropic import _event as anthropic_event
from models_catalog.providers.anthropic_stream import AnthropicAssembler
from models_catalog.providers.chat_http import body_bytes, parse_json
from models_catalog.providers.events import ReasoningDelta, StreamEnd, TextDelta, ToolCallDelta
from models_catalog.providers.streaming import StreamAssembler, events_from_completion, parse_chunk
from tests.catalog.support import API_KEY, FAST, public_resolver
from tests.fakes.fake_provider import models_list, route

LONE = "\ud800"


def encodes(value) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def wire(payload) -> str:
    """A payload as a server writes it: ASCII JSON, every surrogate an escape."""
    return json.dumps(payload)


def openai_chunk(delta) -> str:
    return wire({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})


def event_texts(events) -> list:
    return [(type(e).__name__, getattr(e, "text", None) or getattr(e, "arguments", None) or getattr(e, "name", None))
            for e in events]


def test_openai_stream_deltas_are_read_with_lone_surrogates_replaced():
    arguments = json.dumps({"q": f"x{LONE}y"})  # the escape itself, cut in the middle below
    cut = arguments.index("\\ud800") + 3
    chunks = [openai_chunk({"content": f"Hi {LONE}"}), openai_chunk({"reasoning_content": f"hm{LONE}"}),
              openai_chunk({"tool_calls": [{"index": 0, "id": f"call{LONE}", "type": "function",
                                            "function": {"name": f"look{LONE}", "arguments": arguments[:cut]}}]}),
              openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments[cut:]}}]})]
    assembler = StreamAssembler()
    events = [event for chunk in chunks for event in assembler.feed(parse_chunk(chunk))]
    end = assembler.finish(cut=False)
    assert events[0] == TextDelta("Hi \ufffd") and events[1] == ReasoningDelta("hm\ufffd")
    assert isinstance(events[2], ToolCallDelta) and (events[2].id, events[2].name) == ("call\ufffd", "look\ufffd")
    assert (end.text, end.reasoning) == ("Hi \ufffd", "hm\ufffd")
    call = end.tool_calls[0]
    assert (call.id, call.name) == ("call\ufffd", "look\ufffd")
    assert json.loads(call.arguments) == {"q": "x\ufffdy"}
    assert encodes(end.assistant_message())


def test_a_non_streamed_answer_is_read_with_lone_surrogates_replaced():
    body = wire({"choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": f"All {LONE} done"}}]}).encode()
    events = events_from_completion(parse_json(body, provider_label="Test"))
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.text == "All \ufffd done" and encodes(end.assistant_message())


def test_anthropic_stream_events_are_read_with_lone_surrogates_replaced():
    partial = json.dumps({"q": f"x{LONE}"})
    cut = partial.index("\\ud800") + 2
    payloads = [
        {"type": "message_start", "message": {"model": "claude-fake", "usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": f"so {LONE}"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": f"Yes {LONE}"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2,
         "content_block": {"type": "tool_use", "id": f"toolu{LONE}", "name": f"look{LONE}", "input": {}}},
        *({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": piece}}
          for piece in (partial[:cut], partial[cut:])),
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    assembler = AnthropicAssembler()
    events = [event for payload in payloads for event in assembler.feed(anthropic_event(wire(payload)))]
    end = assembler.finish(cut=False)
    assert ReasoningDelta("so \ufffd") in events and TextDelta("Yes \ufffd") in events
    assert (end.text, end.reasoning) == ("Yes \ufffd", "so \ufffd")
    call = end.tool_calls[0]
    assert (call.id, call.name, json.loads(call.arguments)) == ("toolu\ufffd", "look\ufffd", {"q": "x\ufffd"})
    assert end.thinking_blocks[0]["thinking"] == "so \ufffd"
    assert encodes(end.assistant_message())


def test_a_request_body_that_still_holds_one_is_sent_as_valid_utf8_and_a_clean_one_as_before():
    clean = {"model": "m", "messages": [{"role": "user", "content": "Grüße 😀"}]}
    assert body_bytes(clean) == json.dumps(clean, ensure_ascii=False, separators=(",", ":")).encode()
    sent = body_bytes({"model": "m", "messages": [{"role": "user", "content": f"a{LONE}b \ud83d\ude00"}]})
    assert json.loads(sent.decode("utf-8"))["messages"][0]["content"] == "a\ufffdb 😀"


def test_the_demo_model_answers_a_history_holding_a_lone_surrogate_with_valid_text():
    body = {"messages": [{"role": "user", "content": f"Tell me about {LONE} please"}], "tools": []}
    events = list(DemoChatClient().stream_chat(body))
    end = events[-1]
    assert isinstance(end, StreamEnd) and "\ufffd" in end.text and encodes(end.assistant_message())
    assert all(encodes(text) for _, text in event_texts(events[:-1]))


def test_discovered_model_names_are_read_with_lone_surrogates_replaced(fake):
    fake.handler = route({"GET /v1/models": models_list([f"model-{LONE}", "plain"])})
    result = discover_models(provider="openai_compatible", base_url="https://models.example.com/v1", api_key=API_KEY,
                             transport=fake.forwarding_transport(), resolver=public_resolver, limits=FAST)
    assert sorted(model.id for model in result.models) == ["model-\ufffd", "plain"]
