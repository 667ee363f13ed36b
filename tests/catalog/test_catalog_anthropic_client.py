"""The Anthropic chat client against a fake Messages API: every stream event, faults, retries."""
from __future__ import annotations

import json

import pytest

from models_catalog.client import (
    ReasoningDelta,
    StreamEnd,
    TextDelta,
    ToolCallDelta,
    call_with_retries,
    collect,
    get_chat_client,
)
from models_catalog.errors import (
    AuthenticationError,
    ContextOverflowError,
    InvalidRequestError,
    ProviderError,
    ProviderUnavailableError,
    RateLimitedError,
)
from sessions.run_errors import RunError
from tests.catalog.support import FAST, SECRET_BODY
from tests.fakes.anthropic import api_error, message_events, message_json, message_stream, sse
from tests.fakes.responses import SSEResponse

KEY = "sk-ant-test-SECRET-0042"
BODY = {"model": "claude-opus-5", "max_tokens": 256, "messages": [{"role": "user", "content": "Hi"}]}
THINKING = {"type": "thinking", "thinking": "Two plus two.", "signature": "EqQBCkYIBBgCKkA"}
RUN = {"type": "tool_use", "id": "toolu_01", "name": "run", "input": {"cmd": "pytest -q", "timeout": 60}}
USAGE = {"input_tokens": 40, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 2000}


def client_for(fake, key=KEY):
    return get_chat_client(provider="anthropic", base_url=fake.base_url, api_key=key, allow_private=True,
                           limits=FAST)


def run(fake, body=BODY):
    with client_for(fake) as client:
        return list(client.stream_chat(body))


def test_it_streams_text_and_ends_with_usage_in_openai_terms_with_the_cache_figures(fake):
    fake.handler = lambda r: message_stream([{"type": "text", "text": "Hello there"}], usage=USAGE,
                                            output_tokens=12, split=3)
    events = run(fake)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hell", "o th", "ere"]
    end = events[-1]
    assert isinstance(end, StreamEnd) and (end.text, end.finish_reason, end.cut) == ("Hello there", "stop", False)
    usage = end.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (2340, 12, 2352)
    assert (usage.cache_read_tokens, usage.cache_creation_tokens, usage.cached_tokens) == (2000, 300, 2000)
    assert usage.raw["input_tokens"] == 40 and usage.raw["prompt_tokens"] == 2340  # stored usage calibrates
    assert end.model == "claude-opus-5"


def test_it_sends_the_key_as_x_api_key_with_the_api_version_and_never_alters_the_body(fake):
    fake.handler = lambda r: message_stream([{"type": "text", "text": "ok"}])
    body = json.loads(json.dumps(BODY))
    run(fake, body)
    sent = fake.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent.headers["x-api-key"] == KEY and sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert sent.json == {**BODY, "stream": True} and body == BODY
    assert "stream_options" not in sent.json


def test_tool_use_arrives_as_tool_call_deltas_and_one_complete_call(fake):
    fake.handler = lambda r: message_stream([{"type": "text", "text": "Running."}, RUN], split=4)
    events = run(fake)
    pieces = [e for e in events if isinstance(e, ToolCallDelta)]
    assert pieces[0] == ToolCallDelta(index=0, id="toolu_01", name="run", arguments="")
    assert "".join(p.arguments for p in pieces) == json.dumps(RUN["input"])
    end = events[-1]
    assert end.finish_reason == "tool_calls" and len(end.tool_calls) == 1
    (tool,) = end.tool_calls
    assert (tool.id, tool.name, tool.complete, tool.parsed_arguments()) == ("toolu_01", "run", True, RUN["input"])
    assert end.assistant_message()["tool_calls"] == [
        {"id": "toolu_01", "type": "function", "function": {"name": "run", "arguments": json.dumps(RUN["input"])}}]


def test_thinking_streams_as_reasoning_and_the_signed_blocks_are_kept_verbatim(fake):
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}
    fake.handler = lambda r: message_stream([THINKING, redacted, {"type": "text", "text": "4"}], split=2)
    events = run(fake)
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "Two plus two."
    end = events[-1]
    assert end.thinking_blocks == (THINKING, redacted) and end.reasoning == "Two plus two."
    assert end.assistant_message() == {"role": "assistant", "content": "4", "reasoning": [THINKING, redacted],
                                       "partial": False}


def test_pings_unknown_events_and_stray_deltas_are_ignored(fake):
    events = message_events([{"type": "text", "text": "fine"}])
    extra = [sse("ping", {}), sse("future_event", {"anything": 1}),
             sse("content_block_delta", {"index": 9, "delta": {"type": "text_delta", "text": "stray"}})]
    fake.handler = lambda r: SSEResponse(events=[events[0], *extra, *events[1:]], done=False)
    end = run(fake)[-1]
    assert (end.text, end.cut) == ("fine", False)


def test_the_stream_split_at_any_byte_with_crlf_reads_the_same(fake):
    raw = b"".join(message_events([{"type": "text", "text": "split me"}])).replace(b"\n", b"\r\n")
    fake.handler = lambda r: SSEResponse(events=[raw[i:i + 5] for i in range(0, len(raw), 5)], done=False)
    assert run(fake)[-1].text == "split me"


def test_stream_false_reads_one_json_message_as_the_same_events(fake):
    fake.handler = lambda r: message_json([THINKING, {"type": "text", "text": "Hi"}, RUN], usage=USAGE)
    events = run(fake, {**BODY, "stream": False})
    assert fake.requests[0].json["stream"] is False
    assert [type(e).__name__ for e in events] == ["ReasoningDelta", "TextDelta", "ToolCallDelta", "StreamEnd"]
    end = events[-1]
    assert (end.text, end.finish_reason, end.thinking_blocks) == ("Hi", "tool_calls", (THINKING,))
    assert end.tool_calls[0].parsed_arguments() == RUN["input"] and end.usage.prompt_tokens == 2340


def test_a_server_that_ignores_stream_is_read_as_json(fake):
    fake.handler = lambda r: message_json([{"type": "text", "text": "plain"}])
    assert collect(iter(run(fake))).text == "plain"


def test_loop3_a_stream_cut_after_content_ends_cut_its_call_incomplete_and_its_thinking_dropped(fake):
    events = message_events([THINKING, {"type": "text", "text": "Running."}, RUN])
    fake.handler = lambda r: SSEResponse(events=events[:-3], done=False, reset_after=len(events) - 4)
    end = run(fake)[-1]
    assert end.cut and end.text == "Running." and isinstance(end.error, ProviderUnavailableError)
    assert end.tool_calls[0].complete is False and end.thinking_blocks == ()
    assert end.assistant_message()["partial"] is True and end.error.transient


def test_loop3_a_stream_that_ends_before_any_content_raises_a_transient_error(fake):
    fake.handler = lambda r: SSEResponse(events=message_events([{"type": "text", "text": "x"}])[:2], done=False)
    with pytest.raises(ProviderUnavailableError) as caught:
        run(fake)
    assert caught.value.transient


def test_ctx6_a_call_cut_by_max_tokens_is_not_complete(fake):
    events = message_events([RUN], stop_reason="max_tokens", split=4)
    truncated = [e for e in events if b"input_json_delta" not in e or b'"partial_json": "{' in e]
    fake.handler = lambda r: SSEResponse(events=truncated, done=False)
    end = run(fake)[-1]
    assert not end.cut and end.finish_reason == "length" and end.tool_calls[0].complete is False


def test_loop3_an_overloaded_error_event_mid_stream_cuts_with_a_transient_error(fake):
    events = message_events([{"type": "text", "text": "partial answer"}])
    overloaded = sse("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}})
    fake.handler = lambda r: SSEResponse(events=[*events[:4], overloaded], done=False)
    end = run(fake)[-1]
    assert end.cut and end.text and end.error.transient and end.error.status == 529


def test_an_error_event_before_content_raises_by_its_type(fake):
    for kind, expected, permanent in (("overloaded_error", ProviderUnavailableError, False),
                                      ("invalid_request_error", InvalidRequestError, True),
                                      ("rate_limit_error", RateLimitedError, False)):
        fake.handler = lambda r, k=kind: SSEResponse(events=[sse("error", {"error": {"type": k, "message": "m"}})],
                                                     done=False)
        with pytest.raises(expected) as caught:
            run(fake)
        assert caught.value.permanent is permanent, kind


@pytest.mark.parametrize(("status", "kind"), [(401, "authentication_error"), (403, "permission_error")])
def test_cat5_a_refused_key_is_permanent_clear_and_echoes_nothing(fake, status, kind):
    fake.handler = lambda r: api_error(status, kind, f"{SECRET_BODY} {KEY}")
    with pytest.raises(AuthenticationError) as caught:
        run(fake)
    text = f"{caught.value} {caught.value!r} {RunError.from_provider(caught.value).to_dict()}"
    assert caught.value.permanent and "API key" in str(caught.value)
    assert SECRET_BODY not in text and KEY not in text
    with client_for(fake) as client:
        assert KEY not in repr(client)


def test_loop3_429_honours_retry_after_and_529_overloaded_is_transient(fake):
    fake.handler = lambda r: api_error(429, "rate_limit_error", "Number of request tokens has exceeded your limit",
                                       retry_after="7")
    with pytest.raises(RateLimitedError) as caught:
        run(fake)
    assert caught.value.retry_after == 7.0 and caught.value.transient
    fake.handler = lambda r: api_error(529, "overloaded_error", "Overloaded")
    with pytest.raises(ProviderUnavailableError) as caught:
        run(fake)
    assert caught.value.status == 529 and caught.value.transient


def test_prompt_too_long_is_a_context_overflow_with_both_counts(fake):
    fake.handler = lambda r: api_error(400, "invalid_request_error",
                                       "prompt is too long: 208310 tokens > 200000 maximum")
    with pytest.raises(ContextOverflowError) as caught:
        run(fake)
    err = caught.value
    assert (err.prompt_tokens, err.window, err.permanent) == (208310, 200000, True)
    assert "208,310" in str(err) and "200,000" in str(err) and "prompt is too long" not in str(err)


def test_loop3_call_with_retries_retries_overloaded_and_rate_limits_and_stops_on_a_bad_key(fake):
    answers = iter([api_error(529, "overloaded_error", "Overloaded"),
                    api_error(429, "rate_limit_error", "slow down", retry_after="2"),
                    message_stream([{"type": "text", "text": "third time"}])])
    fake.handler = lambda r: next(answers)
    waits: list[float] = []
    with client_for(fake) as client:
        end = call_with_retries(lambda: collect(client.stream_chat(BODY)).raise_if_cut(), sleep=waits.append)
    assert end.text == "third time" and waits == [1.0, 2.0] and len(fake.requests) == 3
    fake.handler = lambda r: api_error(401, "authentication_error", "invalid x-api-key")
    with client_for(fake) as client, pytest.raises(AuthenticationError):
        call_with_retries(lambda: collect(client.stream_chat(BODY)), sleep=waits.append)
    assert len(fake.requests) == 4 and waits == [1.0, 2.0]


def test_a_chat_completions_body_is_refused_before_anything_is_sent(fake):
    with client_for(fake) as client, pytest.raises(InvalidRequestError) as caught:
        list(client.stream_chat({**BODY, "max_completion_tokens": 5, "stream_options": {"include_usage": True}}))
    assert "nothing was sent" in str(caught.value) and fake.requests == []


def test_a_key_is_required_before_anything_is_sent(fake):
    with pytest.raises(AuthenticationError):
        client_for(fake, key="")
    with pytest.raises(ProviderError):
        get_chat_client(provider="anthropic", api_key=None)
