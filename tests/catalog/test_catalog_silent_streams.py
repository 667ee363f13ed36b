"""A 200 whose stream ends before its first data event (LOOP-3, CAT-3).

llama-cpp-python's server answers a streamed prompt over its window with ``200``, a
``: ping`` comment and a cut connection; llama.cpp's with an empty body. Such a stream is
asked once more without streaming to learn why before it counts as a provider fault, and
a stream that did carry data is never asked twice.
"""
from __future__ import annotations

import pytest

from models_catalog.client import call_with_retries, collect, get_chat_client
from models_catalog.errors import ContextOverflowError, ProviderUnavailableError
from models_catalog.providers import chat_http
from tests.catalog.support import API_KEY, FAST
from tests.fakes.anthropic import api_error, message_json
from tests.fakes.fake_provider import FakeProvider, RawResponse, Reset, SSEResponse, chat_chunks, chat_completion
from tests.fakes.servers import LLAMA_CPP_PYTHON_PING, LlamaCppPythonServer
from tests.fakes.windowed import provider_count

SHORT = {"model": "local", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 256,
         "stream_options": {"include_usage": True}}
LONG = SHORT | {"messages": [{"role": "user", "content": "A long question about the quarter. " * 260}]}
SSE = {"Content-Type": "text/event-stream; charset=utf-8"}


def openai_client(fake):
    return get_chat_client(provider="openai_compatible", base_url=fake.base_url, api_key=API_KEY,
                           allow_private=True, limits=FAST)


@pytest.mark.parametrize("ending", ["cut", "clean"])
def test_loop3_llama_cpp_pythons_ping_and_close_is_asked_plainly_and_becomes_its_overflow_refusal(ending):
    server = LlamaCppPythonServer(window=2048, ending=ending)
    prompt = provider_count(LONG)
    assert prompt >= 2048
    with FakeProvider(server) as fake, openai_client(fake) as client:
        with pytest.raises(ContextOverflowError) as caught:
            collect(client.stream_chat(LONG))
    assert (caught.value.window, caught.value.prompt_tokens, caught.value.permanent) == (2048, prompt, True)
    assert server.refused == [(True, prompt), (False, prompt)]  # streamed, then plainly: one more, no more
    assert "stream_options" not in fake.requests[1].json and fake.requests[1].json["messages"] == LONG["messages"]


def test_under_its_window_llama_cpp_python_streams_and_is_asked_once():
    server = LlamaCppPythonServer(window=2048, answer=lambda body: "Paris is the capital of France.")
    with FakeProvider(server) as fake, openai_client(fake) as client:
        end = collect(client.stream_chat(SHORT))
    assert (end.text, end.finish_reason, end.cut) == ("Paris is the capital of France.", "stop", False)
    assert server.refused == [] and len(fake.requests) == 1


SILENT = {
    "an empty body": RawResponse(b"", headers=SSE, content_length=False),
    "a ping, then a clean close": SSEResponse(events=[LLAMA_CPP_PYTHON_PING], done=False),
    "a ping, then a cut connection": SSEResponse(events=[LLAMA_CPP_PYTHON_PING, b": ping\n\n"], done=False,
                                                 close_after=1),
    "a ping, then a reset": SSEResponse(events=[LLAMA_CPP_PYTHON_PING, b": ping\n\n"], done=False, reset_after=1),
}


@pytest.mark.parametrize("silent", list(SILENT.values()), ids=list(SILENT))
def test_loop3_a_stream_without_a_data_event_whose_plain_retry_answers_gives_that_answer(silent):
    def handler(request):
        if request.json.get("stream"):
            return silent
        return chat_completion("Answered without streaming.", usage={"prompt_tokens": 5, "completion_tokens": 3})

    with FakeProvider(handler) as fake, openai_client(fake) as client:
        end = collect(client.stream_chat(SHORT))
    assert (end.text, end.cut) == ("Answered without streaming.", False)
    assert [r.json["stream"] for r in fake.requests] == [True, False]


def test_loop3_a_stream_cut_after_its_first_data_event_is_a_fault_and_not_asked_plainly():
    role_only = chat_chunks(["never sent"])[:1]  # {"role": "assistant", "content": ""}: data, no content
    with FakeProvider(lambda r: SSEResponse(events=[*role_only, b": ping\n\n"], done=False,
                                            close_after=1)) as fake, openai_client(fake) as client:
        with pytest.raises(ProviderUnavailableError) as caught:
            collect(client.stream_chat(SHORT))
    assert caught.value.transient and "was cut" in str(caught.value)
    assert len(fake.requests) == 1


def test_loop3_a_connection_dropped_before_any_answer_is_a_fault_and_not_asked_plainly():
    with FakeProvider(lambda r: Reset()) as fake, openai_client(fake) as client:
        with pytest.raises(ProviderUnavailableError):
            collect(client.stream_chat(SHORT))
    assert len(fake.requests) == 1


def test_loop3_when_the_plain_retry_is_silent_too_it_is_a_transient_fault_that_call_with_retries_retries():
    silent = SILENT["a ping, then a cut connection"]
    answers = iter([silent, Reset(), silent, chat_completion("Third time.")])
    with FakeProvider(lambda r: next(answers)) as fake, openai_client(fake) as client:
        with pytest.raises(ProviderUnavailableError) as caught:
            collect(client.stream_chat(SHORT))
        assert caught.value.transient and len(fake.requests) == 2  # one stream, one plain ask: then a fault
        end = call_with_retries(lambda: collect(client.stream_chat(SHORT)), sleep=lambda s: None)
    assert end.text == "Third time." and [r.json["stream"] for r in fake.requests] == [True, False, True, False]


def test_anthropic_a_stream_without_a_data_event_is_asked_plainly_and_learns_the_overflow():
    """A gateway or local server speaking the Messages API can be as silent; Anthropic's own
    refusal is then read from the plain answer (CAT-3)."""
    def handler(request):
        if request.json.get("stream"):
            return SSEResponse(events=[b": keep-alive\n\n", b": keep-alive\n\n"], done=False, close_after=1)
        return api_error(400, "invalid_request_error", "prompt is too long: 9120 tokens > 8192 maximum")

    body = {"model": "claude-opus-5", "max_tokens": 256, "messages": [{"role": "user", "content": "Hi"}]}
    with FakeProvider(handler) as fake:
        with get_chat_client(provider="anthropic", base_url=fake.base_url, api_key="sk-ant-test-0042",
                             allow_private=True, limits=FAST) as client:
            with pytest.raises(ContextOverflowError) as caught:
                collect(client.stream_chat(body))
    assert (caught.value.prompt_tokens, caught.value.window) == (9120, 8192)
    assert [r.json["stream"] for r in fake.requests] == [True, False]
    assert fake.requests[1].path == "/v1/messages" and fake.requests[1].headers["x-api-key"] == "sk-ant-test-0042"


def test_anthropic_a_silent_stream_whose_plain_retry_answers_gives_that_answer():
    def handler(request):
        if request.json.get("stream"):
            return RawResponse(b"", headers=SSE, content_length=False)
        return message_json([{"type": "text", "text": "Plainly."}])

    with FakeProvider(handler) as fake:
        with get_chat_client(provider="anthropic", base_url=fake.base_url, api_key="sk-ant-test-0042",
                             allow_private=True, limits=FAST) as client:
            end = collect(client.stream_chat({"model": "claude-opus-5", "max_tokens": 64,
                                              "messages": [{"role": "user", "content": "Hi"}]}))
    assert (end.text, end.cut) == ("Plainly.", False) and len(fake.requests) == 2


def test_loop3_a_stream_silent_for_long_before_its_connection_dropped_is_retried_as_a_stream(monkeypatch):
    # A model at work whose connection dropped: asking it plainly would hold the whole answer
    # until it is written. ``SILENT_REFUSAL_SECONDS`` is how soon a refusal closes; set to zero
    # here, every drop is "long" without the test waiting ten seconds.
    monkeypatch.setattr(chat_http, "SILENT_REFUSAL_SECONDS", 0.0)
    with FakeProvider(lambda r: SILENT["a ping, then a cut connection"]) as fake, openai_client(fake) as client:
        with pytest.raises(ProviderUnavailableError):
            collect(client.stream_chat(SHORT))
    assert [r.json.get("stream") for r in fake.requests] == [True]
