"""Requests a local server's chat template can read (issue #45): the product's own bodies.

llama-cpp-python's server answers 500 to an assistant turn that only calls tools when its
``content`` is null (OpenAI's own form), to the ``developer`` role and to a list of parts
outside a user turn. An ``openai_compatible`` connection therefore sends ``""``, ``system``
and joined text (``context.string_contents``); the same history to OpenAI keeps its null.
"""
from __future__ import annotations

import pytest

from context import build_body
from models_catalog.client import collect, get_chat_client
from models_catalog.target import model_target

HISTORY = [
    {"role": "developer", "content": "Answer briefly."},
    {"role": "user", "content": "What time is it?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "current_time", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "It is 12:00."}]},
    {"role": "user", "content": "And so?"},
]


def body_for(provider: str, model: str) -> dict:
    target = model_target(provider=provider, model=model, base_url="http://127.0.0.1:1/v1", api_key=None)
    return build_body(target.shape, HISTORY, max_output_tokens=8)


def test_an_openai_compatible_body_has_string_contents_and_classic_roles():
    messages = body_for("openai_compatible", "local")["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "user"]
    assert all(isinstance(m["content"], str) for m in messages)
    assert messages[2]["content"] == "" and messages[2]["tool_calls"][0]["id"] == "call_1"
    assert messages[3]["content"] == "It is 12:00."


def test_openai_itself_keeps_the_null_content_of_a_tool_call_turn():
    messages = body_for("openai", "gpt-4o")["messages"]
    assert messages[2]["content"] is None and messages[0]["role"] == "developer"


@pytest.mark.local_server
def test_the_real_llama_cpp_python_server_answers_the_products_body_with_a_tool_call_turn(real_llama_cpp_python):
    server = real_llama_cpp_python
    target = model_target(provider="openai_compatible", model=server.model, base_url=server.base_url, api_key=None)
    body = build_body(target.shape, HISTORY, max_output_tokens=8)
    with get_chat_client(provider="openai_compatible", base_url=server.base_url, api_key=None,
                         allow_private=True) as client:
        end = collect(client.stream_chat(body))
    assert not end.cut and end.error is None
    assert end.finish_reason in ("stop", "length")
