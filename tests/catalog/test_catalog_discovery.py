"""Discovery against a fake provider on a real socket (CAT-1 … CAT-4)."""
from __future__ import annotations

import json

import pytest

from models_catalog.discovery import (
    PLATFORM_DEFAULT_CONTEXT_WINDOW,
    UNVERIFIED_NOTE,
    discover_models,
    resolve_figures,
)
from models_catalog.errors import AuthenticationError, InvalidRequestError
from models_catalog.manifest import load_manifest
from models_catalog.providers import RawModel
from sessions.run_errors import RunError
from tests.catalog.support import API_KEY, FAST, SECRET_BODY, public_resolver
from tests.fakes.fake_provider import (
    error,
    models_list,
    ollama_ps,
    ollama_show,
    ollama_tags,
    ollama_version,
    route,
)

VERSION = load_manifest().version


def by_id(result):
    return {m.id: m for m in result.models}


def discover_official(fake, provider, base_url, **kwargs):
    """Discovery at an official URL whose traffic actually lands on the fake."""
    return discover_models(provider=provider, base_url=base_url, api_key=API_KEY,
                           transport=fake.forwarding_transport(), resolver=public_resolver, limits=FAST, **kwargs)


def test_cat2_openai_official_endpoint_gets_manifest_figures_with_version(fake):
    listed = ["gpt-4o", "gpt-5", "gpt-4o-2024-99-99", "text-embedding-3-small"]
    fake.handler = route({"GET /v1/models": models_list(listed)})
    result = discover_official(fake, "openai", "https://api.openai.com/v1/")
    models = by_id(result)
    gpt4o = models["gpt-4o"]
    assert (gpt4o.context_window, gpt4o.provider_max_output_tokens) == (128_000, 16_384)
    assert gpt4o.context_window_source == gpt4o.max_output_tokens_source == "official_manifest"
    assert gpt4o.manifest_version == VERSION == result.manifest_version
    assert gpt4o.max_output_tokens == 4_096  # CAT-3: starts at 4,096
    assert gpt4o.chat_capable and gpt4o.note is None
    # The request carried the key as a bearer token, to the official host name.
    sent = fake.requests[0]
    assert sent.path == "/v1/models"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert sent.headers["host"] == "api.openai.com"


def test_cat2_manifest_is_never_matched_by_prefix(fake):
    fake.handler = route({"GET /v1/models": models_list(["gpt-4o-2024-99-99"])})
    model = by_id(discover_official(fake, "openai", "https://api.openai.com/v1"))["gpt-4o-2024-99-99"]
    assert model.context_window == PLATFORM_DEFAULT_CONTEXT_WINDOW
    assert model.source == "platform_default" and model.manifest_version is None
    assert "platform default" in model.note and UNVERIFIED_NOTE in model.note


def test_cat2_gpt5_input_limit_bounds_the_budget_window(fake):
    fake.handler = route({"GET /v1/models": models_list(["gpt-5"])})
    model = by_id(discover_official(fake, "openai", "https://api.openai.com/v1"))["gpt-5"]
    assert model.max_input_tokens == 272_000
    assert model.context_window == 272_000 + 4_096  # input limit + output reserve, never 400,000
    assert "272,000" in model.note


def test_cat2_custom_base_url_gets_no_manifest_figures(fake):
    fake.handler = route({"GET /v1/models": models_list(["gpt-4o"])})
    result = discover_models(provider="openai_compatible", base_url=fake.base_url, api_key=API_KEY,
                             allow_private=True, limits=FAST)
    model = by_id(result)["gpt-4o"]
    assert model.source == "platform_default"
    assert (model.context_window, model.max_output_tokens) == (32_768, 4_096)
    assert result.manifest_version is None and model.manifest_version is None


def test_cat2_deepseek_official_endpoint_with_and_without_v1(fake):
    fake.handler = lambda request: models_list(["deepseek-chat", "deepseek-v4-pro"])
    for base in ("https://api.deepseek.com", "https://api.deepseek.com/v1/"):
        models = by_id(discover_official(fake, "deepseek", base))
        assert models["deepseek-v4-pro"].context_window_source == "official_manifest"
        assert models["deepseek-chat"].max_output_tokens == 4_096
    assert [r.path for r in fake.requests] == ["/models", "/v1/models"]


def test_cat2_disagreement_keeps_the_provider_figure_and_says_so(fake):
    listed = {"id": "deepseek-chat", "object": "model", "owned_by": "deepseek",
              "context_window": 131_072, "max_output_tokens": 8_192}
    fake.handler = route({"GET /models": models_list([listed])})
    model = by_id(discover_official(fake, "deepseek", "https://api.deepseek.com"))["deepseek-chat"]
    assert model.context_window == 131_072 and model.context_window_source == "provider"
    assert model.provider_max_output_tokens == 8_192
    assert f"official manifest (version {VERSION})" in model.note and "provider's figure is used" in model.note


def test_cat2_openrouter_context_length_and_top_provider_max(fake):
    fake.handler = route({"GET /api/v1/models": models_list([
        {"id": "openai/gpt-4o", "context_length": 128000,
         "architecture": {"input_modalities": ["text", "image"], "output_modalities": ["text"]},
         "top_provider": {"context_length": 128000, "max_completion_tokens": 2048, "is_moderated": True}},
        {"id": "meta/llama-x", "context_length": 65536, "top_provider": {"max_completion_tokens": None}},
        {"id": "openai/text-embedding-3-large", "context_length": 8192,
         "architecture": {"input_modalities": ["text"], "output_modalities": ["embeddings"]}, "top_provider": {}},
    ])})
    result = discover_models(provider="openai_compatible", base_url=fake.url + "/api/v1", api_key=API_KEY,
                             allow_private=True, limits=FAST)
    models = by_id(result)
    assert result.api_shape == "openrouter"
    gpt = models["openai/gpt-4o"]
    assert gpt.context_window == 128_000 and gpt.provider_max_output_tokens == 2_048
    assert gpt.max_output_tokens == 2_048  # CAT-3: never above the provider's maximum
    assert gpt.supports_images is True and gpt.source == "provider"
    llama = models["meta/llama-x"]
    assert llama.context_window_source == "provider" and llama.max_output_tokens_source == "platform_default"
    assert llama.max_output_tokens == 4_096 and llama.provider_max_output_tokens is None
    assert models["openai/text-embedding-3-large"].chat_capable is False


@pytest.mark.parametrize(
    ("item", "window", "provider_max", "shape"),
    [
        ({"id": "Qwen/Qwen3-8B", "object": "model", "owned_by": "vllm", "max_model_len": 40960}, 40960, None, "vllm"),
        ({"id": "mistral-large-latest", "max_context_length": 131072,
          "capabilities": {"completion_chat": True, "vision": False}}, 131072, None, "mistral"),
        ({"id": "llama-3.3-70b-versatile", "active": True, "context_window": 131072,
          "max_completion_tokens": 32768}, 131072, 32768, "groq"),
        ({"id": "claude-x", "type": "model", "display_name": "Claude X", "max_input_tokens": 200000,
          "max_tokens": 64000}, 200000, 64000, "anthropic"),
    ],
)
def test_cat2_vendor_list_fields_are_provider_figures(fake, item, window, provider_max, shape):
    fake.handler = route({"GET /v1/models": models_list([item])})
    result = discover_models(provider="openai_compatible", base_url=fake.base_url, allow_private=True, limits=FAST)
    model = result.models[0]
    assert result.api_shape == shape
    assert model.context_window == window and model.context_window_source == "provider"
    assert model.provider_max_output_tokens == provider_max
    assert model.max_output_tokens == 4_096


def test_cat2_gemini_native_list_shape(fake):
    fake.handler = route({"GET /v1beta/models": JSON_GEMINI})
    result = discover_models(provider="openai_compatible", base_url=fake.url + "/v1beta", allow_private=True,
                             limits=FAST)
    models = by_id(result)
    assert models["gemini-2.5-flash"].context_window == 1_048_576
    assert models["gemini-2.5-flash"].provider_max_output_tokens == 65_536
    assert models["text-embedding-004"].chat_capable is False


JSON_GEMINI = models_list([])
JSON_GEMINI.body = {"models": [
    {"name": "models/gemini-2.5-flash", "inputTokenLimit": 1048576, "outputTokenLimit": 65536,
     "supportedGenerationMethods": ["generateContent", "countTokens"]},
    {"name": "models/text-embedding-004", "inputTokenLimit": 2048, "outputTokenLimit": 1,
     "supportedGenerationMethods": ["embedContent"]},
]}


def test_cat2_ollama_figures_come_from_api_show(fake):
    shows = {
        "llama3.2:latest": ollama_show(architecture="llama", context_length=131072,
                                       capabilities=["completion", "tools"]),
        "qwen3:8b": ollama_show(architecture="qwen3", context_length=40960,
                                parameters="num_ctx 16384\nstop \"<|im_end|>\""),
        "nomic-embed-text:latest": ollama_show(architecture="nomic-bert", context_length=2048,
                                               capabilities=["embedding"]),
    }
    fake.handler = route({
        "GET /v1/models": models_list(list(shows)),
        "GET /api/tags": ollama_tags(list(shows)),
        "POST /api/show": lambda request: shows[request.json["model"]],
        "GET /api/ps": ollama_ps({}),
        "GET /api/version": ollama_version("0.12.6"),
    })
    result = discover_models(provider="openai_compatible", base_url=fake.base_url, allow_private=True, limits=FAST)
    models = by_id(result)
    assert result.api_shape == "ollama"
    llama = models["llama3.2:latest"]
    # Neither num_ctx nor loaded: Ollama keeps its default context, not the model's 131,072.
    assert (llama.context_window, llama.model_context_window) == (4_096, 131_072)
    assert llama.server_context_source == "ollama_default" and llama.source == "platform_default"  # max output unknown
    assert llama.context_window_source == "server" and "OLLAMA_CONTEXT_LENGTH" in llama.note
    assert models["qwen3:8b"].context_window == 16_384  # num_ctx is what Ollama serves
    embed = models["nomic-embed-text:latest"]
    assert embed.chat_capable is False and "embedding" in embed.note
    assert [m.id for m in result.models][-1] == "nomic-embed-text:latest"  # non-chat listed last
    assert {r.json["model"] for r in fake.requests if r.path == "/api/show"} == set(shows)


def test_cat2_ollama_root_base_url_is_detected_and_v1_suggested(fake):
    fake.handler = route({
        "GET /api/tags": ollama_tags(["llama3.2:latest"]),
        "POST /api/show": ollama_show(context_length=8192),
        "GET /api/ps": ollama_ps({"llama3.2:latest": 8192}),
        "GET /api/version": ollama_version(),
    })
    result = discover_models(provider="openai_compatible", base_url=fake.url, allow_private=True, limits=FAST)
    assert result.models[0].context_window == 8_192
    assert result.suggested_base_url == fake.url + "/v1"
    assert result.warnings


def test_cat2_plain_compatible_server_without_figures_uses_platform_defaults(fake):
    fake.handler = route({"GET /v1/models": models_list(["local-model"])})  # /api/tags → 404
    result = discover_models(provider="openai_compatible", base_url=fake.base_url, allow_private=True, limits=FAST)
    model = result.models[0]
    assert (model.context_window, model.max_output_tokens, model.source) == (32_768, 4_096, "platform_default")
    assert "check" in model.note.lower()


def test_cat3_output_never_exceeds_provider_max_and_leaves_room_in_small_windows():
    small = resolve_figures(RawModel(id="tiny", context_window=4096, max_output_tokens=100_000),
                            entry=None, manifest_version=None)
    assert small.max_output_tokens == 2_048 and "reduced" in small.note
    capped = resolve_figures(RawModel(id="m", context_window=100_000, max_output_tokens=1_000),
                             entry=None, manifest_version=None)
    assert capped.max_output_tokens == 1_000


@pytest.mark.parametrize("model_id", [
    "text-embedding-3-small", "whisper-1", "tts-1-hd", "gpt-4o-mini-tts", "gpt-4o-transcribe", "dall-e-3",
    "gpt-image-1", "omni-moderation-latest", "gpt-realtime", "rerank-english-v3.0", "bge-m3",
    "gpt-3.5-turbo-instruct", "davinci-002", "o1-pro", "gpt-5-codex", "mistral-ocr-latest", "sora-2",
])
def test_cat4_known_non_chat_models_are_not_offered_for_chat(model_id):
    model = resolve_figures(RawModel(id=model_id), entry=None, manifest_version=None)
    assert model.chat_capable is False and model.note.count("Not offered for chat") == 1


def test_cat4_unknown_models_are_offered_with_an_unverified_note():
    model = resolve_figures(RawModel(id="my-finetune-7b"), entry=None, manifest_version=None)
    assert model.chat_capable is True and UNVERIFIED_NOTE in model.note


def test_cat1_demo_provider_needs_no_network_or_key():
    result = discover_models(provider="demo")
    (model,) = result.models
    assert model.id == "agentloom-demo" and model.chat_capable
    assert (model.context_window, model.max_output_tokens) == (32_768, 4_096)
    assert model.source == "official_manifest" and model.manifest_version == VERSION


def test_cat5_auth_failure_names_neither_key_nor_body(fake):
    fake.handler = lambda request: error(401, f"Incorrect API key provided: {API_KEY} {SECRET_BODY}")
    with pytest.raises(AuthenticationError) as caught:
        discover_models(provider="openai_compatible", base_url=fake.base_url, api_key=API_KEY,
                        allow_private=True, limits=FAST)
    text = str(caught.value) + repr(caught.value) + json.dumps(RunError.from_provider(caught.value).to_dict())
    assert API_KEY not in text and SECRET_BODY not in text
    assert caught.value.permanent and caught.value.status == 401


def test_cat1_result_never_contains_the_key(fake):
    fake.handler = route({"GET /v1/models": models_list(["m"])})
    result = discover_models(provider="openai_compatible", base_url=fake.base_url, api_key=API_KEY,
                             allow_private=True, limits=FAST)
    assert API_KEY not in json.dumps(result.to_dict()) and API_KEY not in repr(result)


def test_cat1_official_providers_require_a_key_and_unknown_providers_are_refused():
    with pytest.raises(AuthenticationError):
        discover_models(provider="openai", api_key="")
    with pytest.raises(InvalidRequestError):
        discover_models(provider="nope", base_url="https://example.com")
