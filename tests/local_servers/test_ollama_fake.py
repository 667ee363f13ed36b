"""The Ollama fake's silent truncation (Ollama cannot run here: docs/local-servers.md)."""
from __future__ import annotations

from tests.fakes.fake_provider import FakeProvider
from tests.fakes.ollama import OllamaServer
from tests.fakes.windowed import provider_count
from tests.local_servers.wire import Connection, chat


def test_a_prompt_over_num_ctx_is_answered_200_with_prompt_tokens_equal_to_num_ctx():
    ollama = OllamaServer(num_ctx=2048)
    long = chat(ollama.model, "Tell me about the sea. " * 800, max_tokens=16)
    with FakeProvider(ollama) as fake, Connection(fake.port) as connection:
        answer = connection.request("POST", "/v1/chat/completions", long)
    assert answer.status == 200
    body = answer.json()
    assert body["choices"][0]["finish_reason"] == "stop"  # nothing says it was cut
    assert body["usage"]["prompt_tokens"] == 2048
    assert ollama.truncated == [(provider_count(long), 2048)]


def test_a_prompt_under_num_ctx_is_counted_whole_and_ps_says_the_context_kept():
    ollama = OllamaServer(num_ctx=4096)
    short = chat(ollama.model, "Hello", stream=True, stream_options={"include_usage": True})
    with FakeProvider(ollama) as fake:
        with Connection(fake.port) as connection:
            answer = connection.request("POST", "/v1/chat/completions", short)
        with Connection(fake.port) as connection:
            ps = connection.request("GET", "/api/ps").json()
    assert answer.chunks()[-1]["usage"]["prompt_tokens"] == provider_count(short) < 4096
    assert ps["models"][0]["context_length"] == 4096
    assert ollama.truncated == []
