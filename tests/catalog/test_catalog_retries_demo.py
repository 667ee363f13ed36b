"""Retries of transient faults only (LOOP-3) and the offline demo model (SPEC §1)."""
from __future__ import annotations

import json

import pytest

from models_catalog.client import StreamEnd, TextDelta, ToolCallDelta, call_with_retries, collect, get_chat_client
from models_catalog.demo import DEMO_MODEL_ID, find_arithmetic
from models_catalog.errors import AuthenticationError, ContextOverflowError, ProviderUnavailableError, RateLimitedError
from tests.catalog.support import API_KEY, FAST
from tests.fakes.fake_provider import chat_stream, error, sequence


class Flaky:
    """Raises the given errors in turn, then returns "ok"."""

    def __init__(self, *errors):
        self.errors = list(errors)
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_loop3_transient_errors_are_retried_with_exponential_backoff():
    sleeps = []
    fn = Flaky(ProviderUnavailableError("a"), ProviderUnavailableError("b"), ProviderUnavailableError("c"))
    assert call_with_retries(fn, max_attempts=4, base_delay=0.5, max_delay=30, sleep=sleeps.append) == "ok"
    assert sleeps == [0.5, 1.0, 2.0] and fn.calls == 4


def test_loop3_backoff_is_bounded_by_max_delay_and_attempts():
    sleeps = []
    fn = Flaky(*[ProviderUnavailableError(str(i)) for i in range(10)])
    with pytest.raises(ProviderUnavailableError):
        call_with_retries(fn, max_attempts=5, base_delay=1, max_delay=3, sleep=sleeps.append)
    assert sleeps == [1, 2, 3, 3] and fn.calls == 5


@pytest.mark.parametrize("err", [AuthenticationError("k"), ContextOverflowError("big")])
def test_loop3_permanent_errors_are_not_retried(err):
    sleeps = []
    fn = Flaky(err)
    with pytest.raises(type(err)):
        call_with_retries(fn, sleep=sleeps.append)
    assert fn.calls == 1 and sleeps == []


def test_loop3_retry_after_is_honoured_and_capped():
    sleeps = []
    fn = Flaky(RateLimitedError("slow", retry_after=7.0))
    assert call_with_retries(fn, base_delay=1, max_delay=30, sleep=sleeps.append) == "ok"
    assert sleeps == [7.0]
    too_long = Flaky(RateLimitedError("slow", retry_after=120.0))
    with pytest.raises(RateLimitedError) as caught:
        call_with_retries(too_long, max_delay=30, sleep=sleeps.append)
    assert caught.value.retry_after == 120.0 and too_long.calls == 1  # left to the caller to reschedule


def test_loop3_a_429_then_success_against_the_fake_provider(fake):
    fake.handler = sequence(error(429, "slow down", retry_after="2"), error(503, "busy"), chat_stream(["done"]))
    sleeps = []
    with get_chat_client(provider="openai_compatible", base_url=fake.base_url, api_key=API_KEY,
                         allow_private=True, limits=FAST) as client:
        end = call_with_retries(lambda: collect(client.stream_chat({"messages": []})).raise_if_cut(),
                                base_delay=0.5, sleep=sleeps.append)
    assert end.text == "done" and sleeps == [2.0, 1.0] and len(fake.requests) == 3


def test_loop3_a_dropped_stream_is_retried_via_raise_if_cut(fake):
    fake.handler = sequence(chat_stream(["par", "tial"], reset_after=2), chat_stream(["whole"]))
    with get_chat_client(provider="openai_compatible", base_url=fake.base_url, allow_private=True,
                         limits=FAST) as client:
        end = call_with_retries(lambda: collect(client.stream_chat({"messages": []})).raise_if_cut(),
                                sleep=lambda s: None)
    assert end.text == "whole"


CALCULATOR = {"type": "function", "function": {"name": "calculator", "description": "Safe arithmetic",
              "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                             "required": ["expression"]}}}
CLOCK = {"type": "function", "function": {"name": "current_time", "parameters": {"type": "object", "properties": {}}}}


def demo_events(messages, tools=()):
    with get_chat_client(provider="demo") as client:
        return list(client.stream_chat({"model": DEMO_MODEL_ID, "messages": messages, "tools": list(tools)}))


def test_demo_model_calls_the_calculator_then_answers_with_its_result():
    question = [{"role": "user", "content": "What is 17*23?"}]
    first = demo_events(question, [CALCULATOR, CLOCK])
    end = first[-1]
    assert end.finish_reason == "tool_calls" and end.tool_calls[0].name == "calculator"
    assert end.tool_calls[0].parsed_arguments() == {"expression": "17*23"}
    assert sum(isinstance(e, ToolCallDelta) for e in first) >= 2
    history = question + [end.assistant_message(),
                          {"role": "tool", "tool_call_id": end.tool_calls[0].id, "content": "391"}]
    final = demo_events(history, [CALCULATOR, CLOCK])[-1]
    assert final.finish_reason == "stop" and "391" in final.text and "Offline demo" in final.text
    assert not final.tool_calls and final.usage.total_tokens > 0


def test_demo_model_calls_current_time_when_asked_the_time():
    end = demo_events([{"role": "user", "content": "What time is it?"}], [CLOCK])[-1]
    assert [c.name for c in end.tool_calls] == ["current_time"] and json.loads(end.tool_calls[0].arguments) == {}


def test_demo_model_echoes_a_labelled_summary_in_several_deltas():
    messages = [{"role": "system", "content": "Be nice"}, {"role": "user", "content": "Tell me about owls"}]
    events = demo_events(messages)
    deltas = [e for e in events if isinstance(e, TextDelta)]
    end = events[-1]
    assert isinstance(end, StreamEnd) and len(deltas) >= 3 and "".join(d.text for d in deltas) == end.text
    assert end.text.startswith("(Offline demo model)") and "owls" in end.text and "2 messages" in end.text
    assert end.model == DEMO_MODEL_ID and end.usage.prompt_tokens > 0


def test_demo_model_is_deterministic_and_does_not_call_absent_tools():
    messages = [{"role": "user", "content": "what is 6 x 7"}]
    assert demo_events(messages) == demo_events(messages)
    assert not demo_events(messages)[-1].tool_calls
    assert find_arithmetic("what is 6 x 7") == "6*7" and find_arithmetic("hello 2026") is None
