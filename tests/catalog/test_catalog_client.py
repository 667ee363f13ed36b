"""The chat client against a fake provider: SSE parsing, tool calls, faults (LOOP-3, CAT-5)."""
from __future__ import annotations

import json
import threading
import time

import pytest

from context import RequestShape, build_body
from models_catalog.client import (
    ReasoningDelta,
    StreamEnd,
    TextDelta,
    ToolCallDelta,
    collect,
    get_chat_client,
)
from models_catalog.errors import (
    AuthenticationError,
    ContextOverflowError,
    InvalidRequestError,
    ProviderError,
    ProviderUnavailableError,
    QuotaExceededError,
    RateLimitedError,
    ResponseTooLargeError,
)
from models_catalog.target import model_target
from sessions.run_errors import RunError
from tests.catalog.support import API_KEY, FAST, HANGING, SECRET_BODY, public_resolver
from tests.fakes.fake_provider import (
    Hang,
    RawResponse,
    Reset,
    SSEResponse,
    chat_chunks,
    chat_completion,
    chat_stream,
    error,
)

BODY = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}
CALC = {"id": "call_abc", "name": "calculator", "arguments": json.dumps({"expression": "17*23"})}


def client_for(fake, provider="openai_compatible", limits=FAST, **kwargs):
    return get_chat_client(provider=provider, base_url=fake.base_url, api_key=API_KEY,
                           allow_private=True, limits=limits, **kwargs)


def run(fake, body=BODY, **kwargs):
    with client_for(fake, **kwargs) as client:
        return list(client.stream_chat(body))


def test_it_streams_text_deltas_and_ends_with_usage(fake):
    fake.handler = lambda r: chat_stream(["Hel", "lo", "!"], usage={"prompt_tokens": 7, "completion_tokens": 3,
                                                                   "total_tokens": 10})
    events = run(fake)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo", "!"]
    end = events[-1]
    assert isinstance(end, StreamEnd) and not end.cut and end.error is None
    assert (end.text, end.finish_reason) == ("Hello!", "stop")
    assert (end.usage.prompt_tokens, end.usage.completion_tokens) == (7, 3)
    assert end.assistant_message() == {"role": "assistant", "content": "Hello!", "reasoning": None, "partial": False}


def test_it_sends_the_key_as_bearer_and_the_body_as_built_without_mutating_it(fake):
    fake.handler = lambda r: chat_stream(["ok"])
    body = build_body(RequestShape(model="fake-model", dialect="openai"), BODY["messages"], max_output_tokens=64)
    kept = json.loads(json.dumps(body))
    run(fake, body)
    sent = fake.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    # CTX-25: the body asks for usage itself, so the call log holds what was sent.
    assert sent.json == kept and sent.json["stream_options"] == {"include_usage": True}
    assert body == kept  # the caller's dict is untouched


def test_ctx25_a_provider_that_reads_no_stream_options_gets_none_and_the_client_adds_none(fake):
    fake.handler = lambda r: chat_stream(["ok"])
    target = model_target(provider="demo", model="demo", base_url=None, api_key=None)
    assert target.stream_usage is False
    run(fake, build_body(target.shape, BODY["messages"], max_output_tokens=64))
    run(fake, {**BODY})
    assert ["stream_options" in r.json for r in fake.requests] == [False, False]


def test_it_assembles_tool_calls_split_across_chunks(fake):
    second = {"id": "call_def", "name": "current_time", "arguments": "{}"}
    fake.handler = lambda r: chat_stream(["Let me check."], tool_calls=[CALC, second], split=4)
    events = run(fake)
    fragments = [e for e in events if isinstance(e, ToolCallDelta) and e.index == 0]
    assert len(fragments) == 5 and "".join(f.arguments for f in fragments) == CALC["arguments"]
    end = events[-1]
    assert end.finish_reason == "tool_calls"
    first, other = end.tool_calls
    assert (first.id, first.name, first.complete) == ("call_abc", "calculator", True)
    assert first.parsed_arguments() == {"expression": "17*23"}
    assert (other.id, other.name, other.arguments) == ("call_def", "current_time", "{}")
    assert end.assistant_message()["tool_calls"][0]["function"]["name"] == "calculator"


def test_it_yields_reasoning_deltas_separately(fake):
    fake.handler = lambda r: chat_stream(["42"], reasoning=["think ", "hard"])
    events = run(fake, provider="deepseek")
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "think hard"
    assert events[-1].reasoning == "think hard" and events[-1].text == "42"


def test_it_parses_sse_split_at_any_byte_with_comments_and_crlf(fake):
    raw = "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chat_chunks(["a", "b"])).encode() + b"data: [DONE]\r\n\r\n"
    pieces = [b": OPENROUTER PROCESSING\n\n"] + [raw[i:i + 7] for i in range(0, len(raw), 7)]
    fake.handler = lambda r: SSEResponse(events=pieces, done=False)
    end = run(fake)[-1]
    assert (end.text, end.cut) == ("ab", False)


def test_non_stream_fallback_yields_the_same_events(fake):
    fake.handler = lambda r: chat_completion("Hi there", tool_calls=[CALC], reasoning="hmm",
                                             usage={"prompt_tokens": 3, "completion_tokens": 2})
    events = run(fake, {**BODY, "stream": False})
    assert fake.requests[0].json["stream"] is False and "stream_options" not in fake.requests[0].json
    end = events[-1]
    assert (end.text, end.reasoning, end.finish_reason, end.cut) == ("Hi there", "hmm", "tool_calls", False)
    assert end.tool_calls[0].parsed_arguments() == {"expression": "17*23"}
    assert end.usage.total_tokens is None and end.usage.prompt_tokens == 3


def test_a_server_that_ignores_stream_is_read_as_json(fake):
    fake.handler = lambda r: chat_completion("plain")
    assert collect(iter(run(fake))).text == "plain"


def test_loop3_a_connection_reset_mid_stream_ends_cut_with_a_transient_error(fake):
    fake.handler = lambda r: chat_stream(["part", "ial", "never"], tool_calls=[CALC], reset_after=3)
    events = run(fake)
    end = events[-1]
    assert end.cut and end.text == "partial"
    assert isinstance(end.error, ProviderUnavailableError) and end.error.transient
    assert end.assistant_message()["partial"] is True
    with pytest.raises(ProviderUnavailableError):
        end.raise_if_cut()


def test_a_held_stream_sends_nothing_past_its_hold_until_released(fake):
    """The fake's ``hold``, which tests use to read a page while an answer is certainly
    still streaming: never released, the client reads the words before it and then times
    out; released, the rest follows."""
    held = threading.Event()
    fake.handler = lambda r: chat_stream(["one ", "two ", "three ", "four"], hold=held, hold_after=3)
    with client_for(fake, limits=HANGING) as client:
        cut = list(client.stream_chat(BODY))
    assert [e.text for e in cut if isinstance(e, TextDelta)] == ["one ", "two "]
    assert cut[-1].cut and isinstance(cut[-1].error, ProviderUnavailableError)
    held.set()
    events = run(fake)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["one ", "two ", "three ", "four"]


def test_loop3_a_stream_closed_before_finish_is_cut_and_its_tool_call_incomplete(fake):
    fake.handler = lambda r: chat_stream([], tool_calls=[CALC], split=4, close_after=3)
    end = run(fake)[-1]
    assert end.cut and end.tool_calls[0].complete is False


def test_ctx6_a_tool_call_truncated_by_the_output_limit_is_not_complete(fake):
    truncated = {**CALC, "arguments": '{"expression": "17*'}
    fake.handler = lambda r: chat_stream([], tool_calls=[truncated], finish_reason="length")
    end = run(fake)[-1]
    assert not end.cut and end.finish_reason == "length" and end.tool_calls[0].complete is False


def test_loop3_a_stream_without_done_but_with_finish_reason_is_complete(fake):
    fake.handler = lambda r: chat_stream(["fine"], done=False)
    end = run(fake)[-1]
    assert not end.cut and end.text == "fine"


def test_malformed_chunk_before_content_raises_transient(fake):
    fake.handler = lambda r: SSEResponse(events=[b"data: {not json\n\n"])
    with pytest.raises(ProviderUnavailableError) as caught:
        run(fake)
    assert caught.value.transient and "not json" not in str(caught.value)


def test_malformed_chunk_after_content_cuts_the_stream(fake):
    fake.handler = lambda r: SSEResponse(events=[*chat_chunks(["ok"])[:2], b"data: {oops\n\n"])
    end = run(fake)[-1]
    assert end.cut and end.text == "ok" and isinstance(end.error, ProviderUnavailableError)


def test_an_error_object_inside_the_stream_is_classified(fake):
    fake.handler = lambda r: SSEResponse(events=[{"error": {"message": "Rate limit", "code": 429}}])
    with pytest.raises(RateLimitedError):
        run(fake)


@pytest.mark.parametrize(
    ("spec", "expected", "permanent"),
    [
        (error(401, "bad key"), AuthenticationError, True),
        (error(403, "forbidden"), AuthenticationError, True),
        (error(400, "This model's maximum context length is 8192 tokens", code="context_length_exceeded"),
         ContextOverflowError, True),
        (error(400, "messages: invalid role"), InvalidRequestError, True),
        (error(404, "The model does not exist"), InvalidRequestError, True),
        (error(408, "timeout"), ProviderUnavailableError, False),
        (error(409, "conflict"), ProviderUnavailableError, False),
        (error(429, "slow down", retry_after="7"), RateLimitedError, False),
        (error(429, "You exceeded your current quota", code="insufficient_quota"), QuotaExceededError, True),
        (error(500, "boom"), ProviderUnavailableError, False),
        (error(503, "overloaded"), ProviderUnavailableError, False),
    ],
)
def test_loop3_http_status_maps_to_the_error_hierarchy(fake, spec, expected, permanent):
    fake.handler = lambda r: spec
    with pytest.raises(expected) as caught:
        run(fake)
    assert caught.value.permanent is permanent
    if expected is RateLimitedError:
        assert caught.value.retry_after == 7.0


def test_cat5_errors_never_echo_the_body_or_the_key(fake):
    fake.handler = lambda r: error(400, f"{SECRET_BODY} key={API_KEY}")
    with pytest.raises(ProviderError) as caught:
        run(fake)
    text = str(caught.value) + repr(caught.value) + json.dumps(RunError.from_provider(caught.value).to_dict())
    assert SECRET_BODY not in text and API_KEY not in text


def test_cat6_the_client_repr_does_not_contain_the_key(fake):
    with client_for(fake) as client:
        assert API_KEY not in repr(client) and API_KEY not in str(vars(client).get("_client"))


def test_loop3_a_provider_that_never_answers_times_out_quickly(fake):
    fake.handler = lambda r: Hang(seconds=30)
    started = time.monotonic()
    with pytest.raises(ProviderUnavailableError) as caught, client_for(fake, limits=HANGING) as client:
        list(client.stream_chat(BODY))
    # The bound is the hang, not a margin: the client gave up long before the server would answer.
    assert time.monotonic() - started < 25 and caught.value.transient


def test_loop3_a_refused_connection_is_transient():
    with get_chat_client(provider="openai_compatible", base_url="http://127.0.0.1:9/v1", allow_private=True,
                         limits=FAST) as client, pytest.raises(ProviderUnavailableError):
        list(client.stream_chat(BODY))


def test_a_connection_dropped_before_any_response_is_transient(fake):
    fake.handler = lambda r: Reset()
    with pytest.raises(ProviderUnavailableError):
        run(fake)


def test_cat5_an_oversized_stream_is_refused(fake):
    big = ["x" * 10_000] * 40  # 400 kB of text against a 256 kB bound
    fake.handler = lambda r: chat_stream(big)
    end = run(fake)[-1]
    assert end.cut and isinstance(end.error, ResponseTooLargeError) and end.error.permanent


def test_cat5_a_redirect_is_not_followed(fake):
    fake.handler = lambda r: RawResponse(b"", status=307, headers={"Location": "http://169.254.169.254/"})
    with pytest.raises(InvalidRequestError) as caught:
        run(fake)
    assert caught.value.code == "redirect_refused" and len(fake.requests) == 1


def test_openai_official_requires_a_key_and_reaches_the_official_path(fake):
    with pytest.raises(AuthenticationError):
        get_chat_client(provider="openai", api_key=None)
    fake.handler = lambda r: chat_stream(["hi"])
    with get_chat_client(provider="openai", api_key=API_KEY, transport=fake.forwarding_transport(),
                         resolver=public_resolver, limits=FAST) as client:
        assert collect(client.stream_chat(BODY)).text == "hi"
    assert fake.requests[0].path == "/v1/chat/completions" and fake.requests[0].headers["host"] == "api.openai.com"
