"""Parsing ``GET /models`` answers of OpenAI-style servers, whatever they add to them.

Many servers speak the OpenAI list shape (``{"data": [{"id": ...}]}``) and add their own
limit fields. We read the ones we know (CAT-2) and ignore everything else:

=============  ==============================================  ===========================
server         window                                          max output
=============  ==============================================  ===========================
OpenRouter     ``context_length`` (or top_provider's)          ``top_provider.max_completion_tokens`` (may be null)
vLLM           ``max_model_len``                               —
llama.cpp      ``meta.n_ctx_train`` (its ``/props`` n_ctx: see  —
               ``local_servers``)
LM Studio      ``max_context_length`` (``/api/v0/models``),    —
               ``loaded_context_length`` when loaded
Mistral        ``max_context_length``                          —
Groq           ``context_window``                              ``max_completion_tokens``
Anthropic      ``max_input_tokens``                            ``max_tokens``
Gemini         ``inputTokenLimit`` (native ``{"models": []}``)  ``outputTokenLimit``
=============  ==============================================  ===========================

OpenAI and DeepSeek carry none today; if they start to, the generic names
(``context_window``, ``context_length``, ``max_output_tokens``…) are read too.
Where a server reports an *input* limit (Anthropic, Gemini) we use it as the window:
the budget then also subtracts the output reserve, which errs on the safe side.
"""
from __future__ import annotations

from typing import Any

from models_catalog.providers.base import RawModel
from models_catalog.providers.events import as_dict

_MAX_SANE = 100_000_000  # a bigger "window" is a unit mix-up, not a model
_WINDOW_KEYS = ("context_window", "context_length", "max_context_length", "max_model_len", "max_sequence_length")
_OUTPUT_KEYS = ("max_output_tokens", "max_completion_tokens")
LMSTUDIO_LOADED = "lmstudio_loaded"  # a loaded LM Studio model's context: what the server keeps


def positive_int(value: Any) -> int | None:
    """``value`` as a sane positive integer, or None (null, strings, bools, absurd sizes)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit() and len(value.strip()) <= 18:
        value = int(value.strip())  # ASCII only ("²".isdigit() is True) and short enough for int()
    if isinstance(value, int) and 0 < value <= _MAX_SANE:
        return value
    return None


def parse_model_list(payload: Any) -> tuple[list[RawModel], str]:
    """Models and the recognised shape (``openai``, ``openrouter``, ``vllm``, …)."""
    items: list[Any]
    if isinstance(payload, dict) and isinstance(payload.get("data"), list):
        items = payload["data"]
    elif isinstance(payload, dict) and isinstance(payload.get("models"), list):
        items = payload["models"]
    elif isinstance(payload, list):
        items = payload
    else:
        return [], "unknown"
    models: list[RawModel] = []
    shapes: list[str] = []
    seen: set[str] = set()
    for item in items:
        if isinstance(item, str):
            item = {"id": item}
        if not isinstance(item, dict):
            continue
        model, shape = parse_model_item(item)
        if model is None or model.id in seen:
            continue
        seen.add(model.id)
        models.append(model)
        shapes.append(shape)
    shape = next((s for s in shapes if s != "openai"), "openai")
    return models, shape


def parse_model_item(item: dict[str, Any]) -> tuple[RawModel | None, str]:
    """One list entry → :class:`RawModel` and the shape its fields reveal."""
    raw_id = item.get("id") or item.get("name") or item.get("model")
    if not isinstance(raw_id, str) or not raw_id.strip():
        return None, "openai"
    model_id = raw_id.strip()
    if "inputTokenLimit" in item or "supportedGenerationMethods" in item:
        return _gemini(item, model_id), "gemini"
    if item.get("owned_by") == "llamacpp" or "n_ctx_train" in as_dict(item.get("meta")):
        return _llamacpp(item, model_id), "llamacpp"  # before OpenRouter: newer servers add "architecture"
    if "state" in item and ("compatibility_type" in item or "arch" in item):
        return _lmstudio(item, model_id), "lmstudio"  # before Mistral: both say max_context_length
    if "top_provider" in item or "architecture" in item or "context_length" in item:
        return _openrouter(item, model_id), "openrouter"
    if "max_model_len" in item:
        return RawModel(id=model_id, context_window=positive_int(item.get("max_model_len"))), "vllm"
    caps = item.get("capabilities")
    if "max_context_length" in item or (isinstance(caps, dict) and "completion_chat" in caps):
        return _mistral(item, model_id), "mistral"
    if "max_input_tokens" in item and item.get("type") == "model":
        return _anthropic(item, model_id), "anthropic"
    if "context_window" in item and ("active" in item or "public_apps" in item):
        model = RawModel(
            id=model_id,
            context_window=positive_int(item.get("context_window")),
            max_output_tokens=positive_int(item.get("max_completion_tokens")),
        )
        return model, "groq"
    generic = _generic(item, model_id)
    if item.get("owned_by") == "me" and "permissions" in item:
        # llama-cpp-python's server (llama_cpp/server/app.py lists every alias so): it answers
        # one request at a time, and ends the running stream when a second one comes (CAT-11).
        generic.concurrency, generic.concurrency_source = 1, "server_kind"
    return generic, "openai"


def _generic(item: dict[str, Any], model_id: str) -> RawModel:
    window = next((positive_int(item.get(k)) for k in _WINDOW_KEYS if positive_int(item.get(k))), None)
    output = next((positive_int(item.get(k)) for k in _OUTPUT_KEYS if positive_int(item.get(k))), None)
    return RawModel(id=model_id, context_window=window, max_output_tokens=output,
                    max_input_tokens=positive_int(item.get("max_input_tokens")))


def _openrouter(item: dict[str, Any], model_id: str) -> RawModel:
    top = as_dict(item.get("top_provider"))
    arch = as_dict(item.get("architecture"))
    window = positive_int(item.get("context_length")) or positive_int(top.get("context_length"))
    model = RawModel(id=model_id, context_window=window,
                     max_output_tokens=positive_int(top.get("max_completion_tokens")))
    outputs = arch.get("output_modalities")
    inputs = arch.get("input_modalities")
    modality = arch.get("modality")
    if isinstance(outputs, list) and outputs:
        model.chat_capable = "text" in outputs and "embeddings" not in outputs
        if not model.chat_capable:
            model.chat_reason = "its outputs are " + ", ".join(map(str, outputs)) + ", not text"
    elif isinstance(modality, str) and "->" in modality:
        out = modality.split("->", 1)[1]
        model.chat_capable = "text" in out
        if not model.chat_capable:
            model.chat_reason = f"its modality is {modality}"
    if isinstance(inputs, list):
        model.supports_images = "image" in inputs
    elif isinstance(modality, str) and "->" in modality:
        model.supports_images = "image" in modality.split("->", 1)[0]
    return model


def _llamacpp(item: dict[str, Any], model_id: str) -> RawModel:
    # n_ctx_train is the model's training length; the server may run a smaller n_ctx (/props).
    model = RawModel(id=model_id, context_window=positive_int(as_dict(item.get("meta")).get("n_ctx_train")))
    arch = as_dict(item.get("architecture"))
    inputs, outputs = arch.get("input_modalities"), arch.get("output_modalities")
    if isinstance(inputs, list):
        model.supports_images = "image" in inputs
    if isinstance(outputs, list) and outputs and "text" not in outputs:
        model.chat_capable = False
        model.chat_reason = "llama.cpp lists its outputs as " + ", ".join(map(str, outputs))
    return model


def _lmstudio(item: dict[str, Any], model_id: str) -> RawModel:
    model = RawModel(id=model_id, context_window=positive_int(item.get("max_context_length")))
    kind = item.get("type")
    if kind in ("llm", "vlm"):
        model.chat_capable, model.supports_images = True, kind == "vlm"
    elif isinstance(kind, str) and kind:
        model.chat_capable, model.chat_reason = False, f"LM Studio lists it as an {kind} model"
    loaded = positive_int(item.get("loaded_context_length"))
    if item.get("state") == "loaded" and loaded:
        model.server_context_window, model.server_context_source = loaded, LMSTUDIO_LOADED
    elif model.chat_capable is not False:
        model.notes.append(
            "LM Studio has not loaded this model: it will load it with the context length of its load "
            "settings, which may be smaller than the model's maximum. Load it and discover again to read it."
        )
    return model


def _mistral(item: dict[str, Any], model_id: str) -> RawModel:
    model = RawModel(id=model_id, context_window=positive_int(item.get("max_context_length")))
    caps = item.get("capabilities")
    if isinstance(caps, dict):
        if "completion_chat" in caps:
            model.chat_capable = bool(caps["completion_chat"])
            if not model.chat_capable:
                model.chat_reason = "the provider says it does not support chat completions"
        if "vision" in caps:
            model.supports_images = bool(caps["vision"])
    return model


def _anthropic(item: dict[str, Any], model_id: str) -> RawModel:
    window = positive_int(item.get("max_input_tokens"))
    model = RawModel(id=model_id, context_window=window, max_input_tokens=window,
                     max_output_tokens=positive_int(item.get("max_tokens")), chat_capable=True)
    caps = item.get("capabilities")
    if isinstance(caps, dict) and isinstance(caps.get("image_input"), dict):
        model.supports_images = bool(caps["image_input"].get("supported"))
    return model


def _gemini(item: dict[str, Any], model_id: str) -> RawModel:
    model_id = model_id.removeprefix("models/")
    window = positive_int(item.get("inputTokenLimit"))
    model = RawModel(id=model_id, context_window=window, max_input_tokens=window,
                     max_output_tokens=positive_int(item.get("outputTokenLimit")))
    methods = item.get("supportedGenerationMethods")
    if isinstance(methods, list) and methods:
        model.chat_capable = "generateContent" in methods
        if not model.chat_capable:
            model.chat_reason = "it supports only " + ", ".join(map(str, methods))
    return model


def has_figures(models: list[RawModel]) -> bool:
    return any(m.context_window or m.max_output_tokens for m in models)
