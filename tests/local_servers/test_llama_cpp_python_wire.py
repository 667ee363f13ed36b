"""llama-cpp-python's server as it really answers (issue #45), read at the HTTP level.

Each test states one behaviour the product must live with, and runs twice: against the
real server (SmolLM2-135M-Instruct, ``n_ctx`` 2,048, greedy sampling) and against the strict
fake (``tests/fakes/llama_cpp_python.py``) — the same request, the same observable
behaviour, so the fake cannot drift from what it copies.
"""
from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import pytest

from tests.fakes.llama_cpp_python import LlamaCppPythonFake, count_prompt
from tests.local_servers.wire import Connection, chat


@pytest.fixture(params=["real", "fake"])
def server(request):
    """The real server (skipped or failed without the build) or the fake, alike to a client."""
    if request.param == "real":
        request.applymarker(pytest.mark.local_server)
        yield request.getfixturevalue("real_llama_cpp_python")
        return
    # A long answer still being written when the second request arrives, without timing.
    with LlamaCppPythonFake(hold_after=2, answer=lambda body: "one two three " * 600) as fake:
        yield SimpleNamespace(port=fake.port, model=fake.model, fake=fake)

# SmolLM2's end-of-turn token (<|im_end|>): biased away, an answer runs until max_tokens, so
# the stream is certainly still running when a second request arrives.
SMOLLM2_IM_END = "2"
LONG_PROMPT = "Say the word apple. " * 600  # ~3,600 tokens: over the 2,048 window


def test_a_stream_is_ended_with_done_and_no_finish_reason_when_another_request_waits(server):
    endless = chat(server.model, "Count from one to one thousand, in words.", stream=True, max_tokens=1500,
                   logit_bias={SMOLLM2_IM_END: -100})
    with Connection(server.port) as first:
        first.send("POST", "/v1/chat/completions", endless)
        status, headers = first.read_head()
        assert status == 200 and headers["content-type"].startswith("text/event-stream")
        opening = first.read_chunk()  # the first event: the answer is being written now
        assert opening and b"data:" in opening
        second: dict = {}

        def ask_models():
            with Connection(server.port) as other:
                second["answer"] = other.request("GET", "/v1/models")

        waiting = threading.Thread(target=ask_models)
        waiting.start()
        rest, finished = first.read_body(headers)
        waiting.join(timeout=120)
    body = opening + rest
    data = [line[5:].strip() for line in body.decode().splitlines() if line.startswith("data:")]
    assert finished, "the stream ends properly (its last chunk), it is not reset"
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    # Cut far short of its 1,500 tokens, and nothing says so: no chunk has a finish reason.
    assert len(chunks) < 1500
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)
    # The waiting request is answered once the stream gave way.
    assert second["answer"].status == 200


def test_a_streamed_prompt_over_the_window_gets_200_with_an_empty_body_then_the_connection_closes(server):
    with Connection(server.port) as connection:
        answer = connection.request("POST", "/v1/chat/completions", chat(server.model, LONG_PROMPT, stream=True))
        assert answer.status == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        assert answer.sse_data() == [], answer.body[:300]
        assert answer.body.strip() == b"" or answer.body.lstrip().startswith(b":")
        closed = connection.closed_by_server()
    assert closed, "the keep-alive connection is closed after the refusal"


def test_a_plain_prompt_over_the_window_gets_400_naming_the_window(server):
    with Connection(server.port) as connection:
        answer = connection.request("POST", "/v1/chat/completions",
                                    chat(server.model, LONG_PROMPT, stream=False, max_tokens=64))
    assert answer.status == 400
    error = answer.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert error["type"] == "invalid_request_error"
    assert "maximum context length is 2048 tokens" in error["message"]
    assert "64 in the completion" in error["message"]


# The real server's counts of known prompts (SmolLM2's tokenizer and chat template, measured):
# the fake's count is held within a tenth of each, the real server to each exactly.
REAL_COUNTS = [
    ([{"role": "user", "content": "Hello"}], 31),
    ([{"role": "user", "content": "What is the capital of France?"}], 37),
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}], 18),
    ([{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What time is it?"},
      {"role": "assistant", "content": "It is noon."}, {"role": "user", "content": "And tomorrow?"}], 40),
    ([{"role": "user", "content": "Say the word apple. " * 100}], 531),
    ([{"role": "user", "content": "3141592653589793238462643383279502884197169399375105820974944592"}], 94),
    ([{"role": "user", "content": "请用中文介绍一下长城的历史，以及它在中国文化中的意义。" * 5}], 240),
    ([{"role": "user", "content": "def f(x):\n    return [i * 2 for i in range(x) if i % 3 == 0]\n" * 10}], 320),
]
COUNT_IDS = ["hello", "capital", "system", "four-turns", "apples", "digits", "chinese", "code"]


@pytest.mark.local_server
@pytest.mark.parametrize(("messages", "prompt_tokens"), REAL_COUNTS, ids=COUNT_IDS)
def test_the_real_servers_prompt_token_counts_of_known_prompts(real_llama_cpp_python, messages, prompt_tokens):
    server = real_llama_cpp_python
    with Connection(server.port) as connection:
        answer = connection.request("POST", "/v1/chat/completions", chat(server.model, messages, max_tokens=1))
    assert answer.status == 200
    assert answer.json()["usage"]["prompt_tokens"] == prompt_tokens


@pytest.mark.parametrize(("messages", "prompt_tokens"), REAL_COUNTS, ids=COUNT_IDS)
def test_the_fakes_count_is_within_a_tenth_of_the_real_servers(messages, prompt_tokens):
    assert abs(count_prompt(messages) - prompt_tokens) <= prompt_tokens / 10


def test_an_assistant_turn_with_null_content_is_a_500(server):
    messages = [
        {"role": "user", "content": "What time is it?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "current_time", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "12:00"},
    ]
    with Connection(server.port) as connection:
        answer = connection.request("POST", "/v1/chat/completions", chat(server.model, messages, max_tokens=8))
        with_empty = [dict(m) for m in messages]
        with_empty[1]["content"] = ""
        fixed = connection.request("POST", "/v1/chat/completions", chat(server.model, with_empty, max_tokens=8))
    assert answer.status == 500
    assert fixed.status == 200


@pytest.mark.parametrize("message", [
    {"role": "developer", "content": "Be brief."},
    {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
])
@pytest.mark.parametrize("stream", [False, True])
def test_what_else_its_request_types_reject_is_a_500_streamed_or_not(server, message, stream):
    with Connection(server.port) as connection:
        answer = connection.request("POST", "/v1/chat/completions", chat(
            server.model, [message, {"role": "user", "content": "Hi"}], max_tokens=4, stream=stream))
    assert answer.status == 500
    error = answer.json()["error"]
    assert error["type"] == "internal_server_error" and "validation errors" in error["message"]
