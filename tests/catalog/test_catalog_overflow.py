"""Context-overflow refusals as the real servers send them (CAT-3), with their figures."""
from __future__ import annotations

import json

import pytest

from models_catalog.client import collect, get_chat_client
from models_catalog.errors import ContextOverflowError, error_from_payload, error_from_status
from tests.catalog.support import API_KEY, FAST
from tests.fakes.fake_provider import FakeProvider, JSONResponse, RawResponse, chat_completion

BODY = {"model": "local", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 64}

REFUSALS = [
    # (server, status, body, prompt tokens, window)
    ("OpenAI", 400, {"error": {"message": "This model's maximum context length is 8192 tokens. However, your messages "
                                          "resulted in 9,000 tokens. Please reduce the length of the messages.",
                               "type": "invalid_request_error", "param": "messages",
                               "code": "context_length_exceeded"}}, 9_000, 8_192),
    ("vLLM", 400, {"object": "error", "message": "This model's maximum context length is 2048 tokens. However, you "
                                                  "requested 2100 tokens (1800 in the messages, 300 in the "
                                                  "completion). Please reduce the length of the messages or "
                                                  "completion.", "type": "BadRequestError", "param": None,
                   "code": 400}, 1_800, 2_048),
    ("llama.cpp", 400, {"error": {"code": 400, "message": "request (4476 tokens) exceeds the available context size "
                                                          "(4096 tokens)", "type": "exceed_context_size_error",
                                  "n_prompt_tokens": 4476, "n_ctx": 4096}}, 4_476, 4_096),
    ("Anthropic", 400, {"type": "error", "error": {"type": "invalid_request_error",
                                                   "message": "prompt is too long: 210000 tokens > 200000 maximum"}},
     210_000, 200_000),
    ("a server that gives no figures", 400, {"error": {"message": "context_length_exceeded"}}, None, None),
]


@pytest.mark.parametrize("server,status,body,prompt,window", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_cat3_an_overflow_refusal_carries_the_servers_figures_and_echoes_nothing(server, status, body, prompt, window):
    error = error_from_status(status, body=json.dumps(body).encode())
    assert isinstance(error, ContextOverflowError)
    assert (error.prompt_tokens, error.window) == (prompt, window)
    assert error.permanent  # compaction, not a retry, is the fix
    assert "reduce the length" not in str(error) and "exceed_context_size_error" not in str(error)


def test_cat3_an_overflow_reported_inside_a_stream_is_read_the_same_way():
    payload = {"error": {"message": "This model's maximum context length is 4096 tokens. However, your messages "
                                    "resulted in 5000 tokens.", "code": "context_length_exceeded"}}
    error = error_from_payload(payload)
    assert isinstance(error, ContextOverflowError) and (error.prompt_tokens, error.window) == (5_000, 4_096)


def test_cat3_an_empty_200_to_a_streamed_request_is_asked_again_without_streaming_to_learn_why():
    def handler(request):
        if request.json.get("stream"):
            return RawResponse(b"", status=200, headers={"Content-Type": "text/event-stream"}, content_length=False)
        return JSONResponse({"error": {"code": 400, "message": "request (3000 tokens) exceeds the available context "
                                                               "size (2048 tokens)",
                                       "type": "exceed_context_size_error", "n_prompt_tokens": 3000,
                                       "n_ctx": 2048}}, status=400)

    with FakeProvider(handler) as fake:
        with get_chat_client(provider="openai_compatible", base_url=fake.base_url, api_key=API_KEY,
                             allow_private=True, limits=FAST) as client:
            with pytest.raises(ContextOverflowError) as caught:
                collect(client.stream_chat(BODY))
    assert (caught.value.prompt_tokens, caught.value.window) == (3_000, 2_048)
    assert [r.json.get("stream") for r in fake.requests] == [True, False]
    assert "stream_options" not in fake.requests[1].json


def test_an_empty_200_whose_plain_retry_answers_gives_that_answer():
    def handler(request):
        if request.json.get("stream"):
            return RawResponse(b"", status=200, headers={"Content-Type": "text/event-stream"}, content_length=False)
        return chat_completion("Answered without streaming.", usage={"prompt_tokens": 5, "completion_tokens": 3})

    with FakeProvider(handler) as fake:
        with get_chat_client(provider="openai_compatible", base_url=fake.base_url, api_key=API_KEY,
                             allow_private=True, limits=FAST) as client:
            end = collect(client.stream_chat(BODY))
    assert end.text == "Answered without streaming." and end.usage.raw["prompt_tokens"] == 5
    assert len(fake.requests) == 2
