"""Windows that servers publish, read by discovery on a real socket (CAT-2, CAT-7).

Each fake answers as the real server does (shapes from their docs: Ollama's /api/show,
/api/ps and /api/version; llama.cpp's /v1/models and /props; LM Studio's /api/v0/models;
vLLM's and OpenRouter's lists). The window a request may rely on is what the server
keeps, never the larger figure the model supports.
"""
from __future__ import annotations

import pytest

from models_catalog.discovery import discover_models
from tests.catalog.support import FAST
from tests.fakes.fake_provider import (
    RawResponse,
    Reset,
    models_list,
    ollama_error,
    ollama_ps,
    ollama_show,
    ollama_tags,
    ollama_version,
    route,
)
from tests.fakes.servers import (
    llamacpp_error,
    llamacpp_models,
    llamacpp_props,
    lmstudio,
    lmstudio_entry,
    openrouter_model,
    vllm_models,
)


def discover(fake, base_url=None):
    return discover_models(provider="openai_compatible", base_url=base_url or fake.base_url, allow_private=True,
                           limits=FAST)


def ollama(fake, *, shows, loaded=None, version="0.12.6", listed=None):
    """An Ollama server holding ``shows`` (name → /api/show answer, None: "not found");
    ``loaded`` is /api/ps (a dict of contexts, or any response)."""
    table = {
        "GET /v1/models": models_list(listed or list(shows)),
        "GET /api/tags": ollama_tags(list(shows)),
        "POST /api/show": lambda request: shows.get(request.json["model"])
        or ollama_error(404, f"model '{request.json['model']}' not found"),
        "GET /api/ps": loaded if not isinstance(loaded, dict | None) else ollama_ps(loaded or {}),
        "GET /api/version": ollama_version(version) if isinstance(version, str) else version,
    }
    fake.handler = route(table)


def paths(fake):
    return [r.path + ("?" + "&".join(f"{k}={v[0]}" for k, v in r.query.items()) if r.query else "")
            for r in fake.requests]


# --- Ollama --------------------------------------------------------------------------------


def test_ollama_keeps_a_loaded_model_at_its_loaded_context_even_below_num_ctx(fake):
    ollama(fake, shows={"qwen3:8b": ollama_show(architecture="qwen3", context_length=40960,
                                                parameters='num_ctx                        8192\nstop "<|im_end|>"')},
           loaded={"qwen3:8b": 4096})
    model = discover(fake).models[0]
    assert (model.context_window, model.model_context_window) == (4_096, 40_960)
    assert (model.server_context_window, model.server_context_source) == (4_096, "ollama_loaded")
    assert "keeps 4,096 of the 40,960 tokens" in model.note and "silently drops" in model.note
    assert model.max_output_tokens == 2_048  # CAT-3: half of what the server keeps


def test_ollama_num_ctx_is_what_an_unloaded_model_is_served_with(fake):
    ollama(fake, shows={"qwen3:8b": ollama_show(architecture="qwen3", context_length=40960,
                                                parameters="num_ctx 16384")}, loaded={"other:latest": 2048})
    model = discover(fake).models[0]
    assert (model.context_window, model.server_context_source) == (16_384, "ollama_num_ctx")


def test_ollama_a_loaded_context_above_the_models_maximum_is_capped_by_the_model(fake):
    ollama(fake, shows={"llama3.2:latest": ollama_show(context_length=131072)}, loaded={"llama3.2:latest": 262144})
    model = discover(fake).models[0]
    assert (model.context_window, model.server_context_window) == (131_072, 262_144)
    assert "silently drops" not in (model.note or "")


@pytest.mark.parametrize(("version", "default"), [("0.5.7", 2_048), ("0.6.6", 2_048), ("0.6.7", 4_096),
                                                  ("0.15.5", 4_096), ("v0.12.6-rc1", 4_096)])
def test_ollama_without_num_ctx_or_a_loaded_model_gets_the_default_of_its_version(fake, version, default):
    ollama(fake, shows={"llama3.2:latest": ollama_show(context_length=131072)}, version=version)
    result = discover(fake)
    model = result.models[0]
    assert (model.context_window, model.server_context_source) == (default, "ollama_default")
    assert not result.warnings


@pytest.mark.parametrize("version", [ollama_error(404, "404 page not found"), ollama_version("unknown"), Reset()])
def test_ollama_whose_version_cannot_be_read_gets_the_oldest_default_and_a_warning(fake, version):
    ollama(fake, shows={"llama3.2:latest": ollama_show(context_length=131072)}, version=version)
    result = discover(fake)
    assert result.models[0].context_window == 2_048
    assert any("version could not be read" in w for w in result.warnings)


@pytest.mark.parametrize("ps", [ollama_error(500, "internal error"), RawResponse(b"<html>proxy</html>"), Reset()])
def test_ollama_whose_api_ps_fails_still_answers_with_num_ctx_or_the_default(fake, ps):
    ollama(fake, shows={"a:latest": ollama_show(context_length=32768, parameters="num_ctx 8192"),
                        "b:latest": ollama_show(context_length=32768)}, loaded=ps)
    result = discover(fake)
    by_id = {m.id: m for m in result.models}
    assert (by_id["a:latest"].context_window, by_id["b:latest"].context_window) == (8_192, 4_096)
    assert any("/api/ps could not be read" in w for w in result.warnings)


def test_ollama_before_ps_reported_a_context_falls_back_to_the_default(fake):
    ollama(fake, shows={"llama3.2:latest": ollama_show(context_length=131072)}, loaded={"llama3.2:latest": None})
    assert discover(fake).models[0].server_context_source == "ollama_default"


def test_ollama_loaded_contexts_are_matched_to_the_ids_v1_models_lists(fake):
    ollama(fake, shows={"llama3.2:latest": ollama_show(context_length=131072)}, loaded={"llama3.2:latest": 8192},
           listed=["llama3.2"])
    model = discover(fake).models[0]
    assert (model.id, model.context_window, model.server_context_source) == ("llama3.2", 8_192, "ollama_loaded")


def test_ollama_a_model_it_cannot_describe_still_gets_what_the_server_keeps(fake):
    ollama(fake, shows={"good:latest": ollama_show(context_length=8192), "gone:latest": None},
           loaded={"gone:latest": 16384})
    result = discover(fake)
    gone = {m.id: m for m in result.models}["gone:latest"]
    assert (gone.context_window, gone.server_context_source) == (16_384, "ollama_loaded")
    assert any("could not describe gone:latest" in w for w in result.warnings)


# --- llama.cpp -----------------------------------------------------------------------------


def test_llamacpp_window_is_the_served_n_ctx_not_the_training_length(fake):
    fake.handler = route({"GET /v1/models": llamacpp_models(n_ctx_train=131072), "GET /props": llamacpp_props(2048)})
    result = discover(fake)
    model = result.models[0]
    assert result.api_shape == "llamacpp"
    assert (model.context_window, model.model_context_window) == (2_048, 131_072)
    assert (model.server_context_source, model.context_window_source) == ("llamacpp_props", "server")
    assert model.max_output_tokens == 1_024 and not result.warnings
    assert paths(fake) == ["/v1/models", "/props"]  # at the server root, one call


@pytest.mark.parametrize(("slot", "top", "expected"), [(None, 8192, 8_192), (8192, 32768, 8_192), (4096, 2048, 2_048)])
def test_llamacpp_reads_the_top_level_n_ctx_too_and_keeps_the_smaller(fake, slot, top, expected):
    fake.handler = route({"GET /v1/models": llamacpp_models(),
                          "GET /props": llamacpp_props(slot, top_level_n_ctx=top)})
    assert discover(fake).models[0].context_window == expected


@pytest.mark.parametrize("props", [llamacpp_error(404, "File Not Found", "not_found_error"),
                                   llamacpp_error(503, "Loading model", "unavailable_error"),
                                   RawResponse(b"not json"), Reset(), llamacpp_props(None)])
def test_llamacpp_whose_props_fail_keeps_the_training_length_and_says_so(fake, props):
    fake.handler = route({"GET /v1/models": llamacpp_models(n_ctx_train=32768), "GET /props": props})
    result = discover(fake)
    model = result.models[0]
    assert (model.context_window, model.server_context_window) == (32_768, None)
    assert any("training length" in w and "--ctx-size" in w for w in result.warnings)


def test_llamacpp_still_loading_its_model_gets_the_window_from_props(fake):
    fake.handler = route({"GET /v1/models": llamacpp_models(n_ctx_train=None), "GET /props": llamacpp_props(4096)})
    model = discover(fake).models[0]
    assert (model.context_window, model.context_window_source, model.model_context_window) == (4_096, "server", None)


def test_llamacpp_router_is_asked_per_model_without_loading_any(fake):
    listed = models_list([
        {"id": "small", "object": "model", "owned_by": "llamacpp", "meta": {"n_ctx_train": 32768}},
        {"id": "big", "object": "model", "owned_by": "llamacpp", "meta": None},
    ])
    props = {"small": llamacpp_props(8192), "big": llamacpp_error(400, "model is not loaded", "invalid_request_error")}
    fake.handler = route({"GET /v1/models": listed, "GET /props": lambda r: props[r.query["model"][0]]})
    result = discover(fake)
    by_id = {m.id: m for m in result.models}
    assert by_id["small"].context_window == 8_192 and by_id["big"].context_window == 32_768  # big: platform default
    assert "/props?model=small&autoload=false" in paths(fake) and "/props?model=big&autoload=false" in paths(fake)
    assert any("big" in w for w in result.warnings)


# --- LM Studio -----------------------------------------------------------------------------


def test_lmstudio_loaded_context_bounds_the_window_and_types_decide_chat(fake):
    fake.handler = lmstudio([
        lmstudio_entry("qwen2.5-7b-instruct", max_context_length=32768, loaded_context_length=16384),
        lmstudio_entry("meta-llama-3.1-8b-instruct", max_context_length=131072),
        lmstudio_entry("qwen2-vl-7b-instruct", max_context_length=32768, type="vlm", arch="qwen2_vl"),
        lmstudio_entry("text-embedding-nomic-embed-text-v1.5", max_context_length=2048, type="embeddings"),
    ])
    result = discover(fake)
    by_id = {m.id: m for m in result.models}
    assert result.api_shape == "lmstudio"
    loaded = by_id["qwen2.5-7b-instruct"]
    assert (loaded.context_window, loaded.server_context_source) == (16_384, "lmstudio_loaded")
    idle = by_id["meta-llama-3.1-8b-instruct"]
    assert idle.context_window == 131_072 and "has not loaded this model" in idle.note
    assert by_id["qwen2-vl-7b-instruct"].supports_images is True
    assert by_id["text-embedding-nomic-embed-text-v1.5"].chat_capable is False
    assert "/api/v0/models" in paths(fake)


def test_lmstudio_too_old_for_api_v0_leaves_platform_defaults(fake):
    fake.handler = lmstudio([lmstudio_entry("local", max_context_length=8192)],
                            native=RawResponse(b'{"error":"Unexpected endpoint or method. (GET /api/v0/models)"}'))
    model = discover(fake).models[0]
    assert (model.context_window, model.source) == (32_768, "platform_default")


def test_lmstudio_native_base_url_is_read_directly_and_v1_suggested(fake):
    fake.handler = lmstudio([lmstudio_entry("local", max_context_length=8192, loaded_context_length=4096)])
    result = discover(fake, base_url=fake.url + "/api/v0")
    assert result.models[0].context_window == 4_096
    assert result.suggested_base_url == fake.url + "/v1"


# --- vLLM and OpenRouter -------------------------------------------------------------------


def test_vllm_max_model_len_is_the_window_and_nothing_else_is_asked(fake):
    fake.handler = route({"GET /v1/models": vllm_models({"Qwen/Qwen3-8B": 40960})})
    result = discover(fake)
    model = result.models[0]
    assert (result.api_shape, model.context_window, model.context_window_source) == ("vllm", 40_960, "provider")
    assert model.server_context_window is None and paths(fake) == ["/v1/models"]


@pytest.mark.parametrize(("context", "top", "expected"), [(128000, 64000, 128_000), (None, 64000, 64_000)])
def test_openrouter_model_context_wins_over_the_top_providers(fake, context, top, expected):
    fake.handler = route({"GET /api/v1/models": models_list([
        openrouter_model("vendor/model", context_length=context, top_context_length=top, max_completion_tokens=2048)])})
    model = discover(fake, base_url=fake.url + "/api/v1").models[0]
    assert (model.context_window, model.provider_max_output_tokens, model.max_output_tokens) == (expected, 2_048, 2_048)
