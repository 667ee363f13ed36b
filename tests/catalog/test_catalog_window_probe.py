"""The window asked of a local server that publishes none: one probe (CAT-8).

On a real socket against strict fakes (tests/fakes/servers.py): llama-cpp-python's
server (its 400 wording from ``llama_cpp/server/errors.py``), llama-server's
``exceed_context_size_error``, vLLM's refusal, Ollama's silent truncation. The figure is
kept with source ``server`` and what said it (the llama-cpp-python body was checked against
the real server, 0.3.36 with SmolLM2-135M at n_ctx 2048: the same bytes); nothing is probed for a hosted provider, at a
public address, or when a list or native API already said the window.
"""
from __future__ import annotations

import pytest

from models_catalog.discovery import discover_models
from models_catalog.http import HttpLimits
from models_catalog.providers.window_probe import PROBE_UNITS, is_private_endpoint
from tests.catalog.support import FAST
from tests.fakes.fake_provider import Hang, JSONResponse, chat_completion, models_list, route
from tests.fakes.servers import (
    LlamaCppPythonServer,
    llamacpp_context_refusal,
    llamacpp_models,
    llamacpp_props,
    ollama_truncated_completion,
    vllm_context_refusal,
)

NOT_FOUND = JSONResponse({"detail": "Not Found"}, status=404)


def discover(fake, **kwargs):
    return discover_models(provider=kwargs.pop("provider", "openai_compatible"), base_url=fake.base_url,
                           allow_private=True, limits=FAST, **kwargs)


def probes(fake):
    return [r for r in fake.requests if r.method == "POST" and r.path == "/v1/chat/completions"]


def test_llama_cpp_python_server_says_its_window_when_refusing_the_probe(fake):
    server = LlamaCppPythonServer(window=2048, model="smollm2-135m-instruct")
    fake.handler = server
    model = discover(fake).models[0]
    assert (model.context_window, model.context_window_source) == (2048, "server")
    assert (model.server_context_window, model.server_context_source) == (2048, "probe_refusal")
    assert model.max_output_tokens == 1024  # half of a small window (CAT-3), not 4,096
    assert "The server said its window is 2,048 tokens" in model.note
    [probe] = probes(fake)
    body = probe.json
    # One bounded, non-streamed request (a one-at-a-time server ends a running stream when
    # another waits), on a connection of its own that is closed after it.
    assert (body["stream"], body["max_tokens"]) == (False, 1)
    assert len(probe.body) < 1_000_000 and len(body["messages"][0]["content"]) == 2 * PROBE_UNITS
    assert probe.headers["connection"] == "close"
    assert server.refused == [(False, server.refused[0][1])] and not server.accepted


def test_llama_server_without_props_is_read_from_its_exceed_context_size_error(fake):
    fake.handler = route({
        "GET /v1/models": llamacpp_models(n_ctx_train=None),  # still loading: no meta
        "GET /props": NOT_FOUND,  # behind a proxy that passes /v1 only
        "POST /v1/chat/completions": llamacpp_context_refusal(n_ctx=4096, n_prompt_tokens=300_012),
    })
    model = discover(fake).models[0]
    assert (model.context_window, model.context_window_source, model.server_context_source) == (
        4096, "server", "probe_refusal")


def test_vllm_whose_list_lacks_max_model_len_is_read_from_its_refusal(fake):
    fake.handler = route({
        "GET /v1/models": models_list(["Qwen/Qwen2.5-7B-Instruct"]),
        "POST /v1/chat/completions": vllm_context_refusal(max_model_len=8192, prompt_tokens=300_004),
    })
    model = discover(fake).models[0]
    assert (model.context_window, model.context_window_source) == (8192, "server")


def test_ollama_behind_a_v1_only_proxy_is_read_from_its_silent_truncation(fake):
    fake.handler = route({
        "GET /v1/models": models_list(["llama3.2:latest"]),
        "POST /v1/chat/completions": ollama_truncated_completion(num_ctx=4096),
    })
    model = discover(fake).models[0]
    assert (model.context_window, model.context_window_source, model.server_context_source) == (
        4096, "server", "probe_truncation")
    assert "it cut a prompt longer than its window" in model.note


def test_a_server_that_answers_the_whole_probe_teaches_nothing_and_says_so(fake):
    fake.handler = route({
        "GET /v1/models": models_list(["big-window"]),
        "POST /v1/chat/completions": chat_completion(
            "a", usage={"prompt_tokens": PROBE_UNITS + 12, "completion_tokens": 1}),
    })
    model = discover(fake).models[0]
    assert (model.context_window, model.context_window_source) == (32_768, "platform_default")
    assert "without saying its window" in model.note


def test_a_server_that_does_not_answer_the_probe_is_waited_for_a_bounded_time(fake):
    fake.handler = route({"GET /v1/models": models_list(["slow-model"]), "POST /v1/chat/completions": Hang()})
    short = HttpLimits(connect_timeout=5.0, read_timeout=0.5, write_timeout=5.0, total_timeout=5.0)
    model = discover(fake, probe_limits=short).models[0]
    assert model.context_window_source == "platform_default"
    assert "did not answer" in model.note


def test_one_probe_per_discovery_for_the_model_being_saved(fake):
    fake.handler = route({
        "GET /v1/models": models_list(["first", "second"]),
        "POST /v1/chat/completions": lambda request: vllm_context_refusal(
            max_model_len=2048 if request.json["model"] == "second" else 1024, prompt_tokens=300_000),
    })
    models = {m.id: m for m in discover(fake, probe_model="second").models}
    assert [p.json["model"] for p in probes(fake)] == ["second"]
    assert models["second"].context_window == 2048
    assert models["first"].context_window_source == "platform_default"
    assert "only one model is probed" in models["first"].note


def test_a_window_the_server_publishes_is_never_probed(fake):
    fake.handler = route({
        "GET /v1/models": llamacpp_models(n_ctx_train=131072),
        "GET /props": llamacpp_props(n_ctx=4096),
    })
    model = discover(fake).models[0]
    assert (model.context_window, model.server_context_source) == (4096, "llamacpp_props")
    assert probes(fake) == []


def test_hosted_providers_are_never_probed(fake):
    fake.handler = route({"GET /v1/models": models_list(["gpt-4o-mini"]),
                          "POST /v1/chat/completions": vllm_context_refusal(2048, 300_000)})
    model = discover(fake, provider="openai", api_key="sk-alice").models[0]
    assert model.context_window_source == "platform_default" and probes(fake) == []


@pytest.mark.parametrize(("address", "private"), [
    ("127.0.0.1", True), ("10.1.2.3", True), ("192.168.1.20", True), ("::1", True),
    ("93.184.216.34", False), ("8.8.8.8", False),
])
def test_only_loopback_and_private_addresses_are_probed(address, private):
    assert is_private_endpoint("http://llm.example:8000/v1", resolver=lambda host, port: [address]) is private


def test_a_name_with_one_public_address_among_private_ones_is_not_probed():
    assert not is_private_endpoint("http://llm.example/v1", resolver=lambda host, port: ["10.0.0.2", "8.8.8.8"])
