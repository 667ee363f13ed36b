"""llama.cpp's ``llama-server`` as it really answers (issue #45), and its fake alike.

Each test runs against the real server (SmolLM2-135M-Instruct, ``--parallel 2`` with 2,048
tokens per slot) and against ``tests/fakes/llama_server.py`` configured the same way.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.fakes.fake_provider import FakeProvider
from tests.fakes.llama_server import LlamaServer
from tests.local_servers.wire import Connection, chat

LONG_PROMPT = "Say the word apple. " * 600  # over 2,048 tokens by any count


@pytest.fixture(params=["real", "fake"])
def server(request):
    if request.param == "real":
        request.applymarker(pytest.mark.local_server)
        yield request.getfixturevalue("real_llama_server")
        return
    fake_server = LlamaServer(n_ctx=2048, slots=2)
    with FakeProvider(fake_server) as fake:
        yield SimpleNamespace(port=fake.port, model=fake_server.model, fake=fake_server)


def test_props_says_the_context_of_each_slot_and_the_number_of_slots(server):
    with Connection(server.port) as connection:
        props = connection.request("GET", "/props").json()
    assert props["default_generation_settings"]["n_ctx"] == 2048
    assert props["total_slots"] == 2


def test_slots_lists_each_slot_with_its_context(server):
    with Connection(server.port) as connection:
        slots = connection.request("GET", "/slots").json()
    assert [s["id"] for s in slots] == [0, 1]
    assert {s["n_ctx"] for s in slots} == {2048}


@pytest.mark.parametrize("stream", [False, True])
def test_a_prompt_over_the_slot_window_is_refused_with_400_and_its_figures_streamed_or_not(server, stream):
    with Connection(server.port) as connection:
        answer = connection.request("POST", "/v1/chat/completions",
                                    chat(server.model, LONG_PROMPT, stream=stream, max_tokens=32))
    assert answer.status == 400
    error = answer.json()["error"]
    assert error["type"] == "exceed_context_size_error"
    assert error["n_ctx"] == 2048 and error["n_prompt_tokens"] > 2048
    assert "exceeds the available context size (2048 tokens)" in error["message"]


def test_a_stream_ends_with_a_finish_reason_usage_and_done(server):
    with Connection(server.port) as connection:
        answer = connection.request("POST", "/v1/chat/completions",
                                    chat(server.model, "Name a colour.", stream=True, max_tokens=8))
    assert answer.status == 200 and answer.finished
    assert answer.sse_data()[-1] == "[DONE]"
    last = answer.chunks()[-1]
    assert last["choices"][0]["finish_reason"] in ("stop", "length")
    assert last["usage"]["prompt_tokens"] > 0
