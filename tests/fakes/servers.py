"""What self-hosted servers and OpenRouter answer, shaped as the real ones (their docs).

* vLLM ``GET /v1/models``: OpenAI's list plus ``root``, ``parent``, ``max_model_len`` and
  a ``permission`` list.
* llama.cpp ``GET /v1/models`` (one model; ``owned_by: "llamacpp"``, ``meta`` with
  ``n_ctx_train``, ``architecture`` in newer builds), ``GET /props`` (``n_ctx`` in
  ``default_generation_settings``, ``total_slots``, ``model_path``…) and its OpenAI-style
  error body with a numeric ``code``.
* LM Studio ``GET /v1/models`` (no figures), ``GET /api/v0/models`` (``type``, ``state``,
  ``max_context_length``, ``loaded_context_length`` when loaded) and its habit of answering
  any path it does not serve with **200** and ``{"error": "Unexpected endpoint or method. …"}``.
* OpenRouter ``GET /api/v1/models`` entries.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tests.fakes.responses import Handler, JSONResponse, RecordedRequest, ResponseSpec


def vllm_models(models: Mapping[str, int]) -> JSONResponse:
    """``{model id: max_model_len}`` as vLLM lists them."""
    data = [{
        "id": model_id, "object": "model", "created": 1700000000, "owned_by": "vllm", "root": model_id,
        "parent": None, "max_model_len": window,
        "permission": [{"id": "modelperm-0", "object": "model_permission", "created": 1700000000,
                        "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
                        "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False,
                        "organization": "*", "group": None, "is_blocking": False}],
    } for model_id, window in models.items()]
    return JSONResponse({"object": "list", "data": data})


def llamacpp_models(model_id: str = "../models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", *,
                    n_ctx_train: int | None = 131072, architecture: bool = True) -> JSONResponse:
    """llama.cpp's one-model ``/v1/models`` (``meta`` is null while the model loads)."""
    entry: dict[str, Any] = {"id": model_id, "object": "model", "created": 1735142223, "owned_by": "llamacpp"}
    entry["meta"] = None if n_ctx_train is None else {
        "vocab_type": 2, "n_vocab": 128256, "n_ctx_train": n_ctx_train, "n_embd": 4096,
        "n_params": 8030261312, "size": 4912898304}
    if architecture:
        entry["architecture"] = {"input_modalities": ["text"], "output_modalities": ["text"]}
    return JSONResponse({"object": "list", "data": [entry]})


def llamacpp_props(n_ctx: int | None = 2048, *, top_level_n_ctx: int | None = None,
                   total_slots: int = 1) -> JSONResponse:
    """``GET /props`` (sampling parameters trimmed)."""
    settings: dict[str, Any] = {"id": 0, "id_task": -1, "speculative": False, "is_processing": False,
                                "params": {"n_predict": -1, "temperature": 0.8, "top_k": 40, "top_p": 0.95},
                                "prompt": "", "next_token": {"has_next_token": True, "n_remain": -1}}
    if n_ctx is not None:
        settings["n_ctx"] = n_ctx
    body: dict[str, Any] = {"default_generation_settings": settings, "total_slots": total_slots,
                            "model_path": "../models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
                            "chat_template": "...", "modalities": {"vision": False},
                            "build_info": "b6000-abcdef0", "is_sleeping": False}
    if top_level_n_ctx is not None:
        body["n_ctx"] = top_level_n_ctx
    return JSONResponse(body)


def llamacpp_error(status: int, message: str, type: str = "server_error") -> JSONResponse:  # noqa: A002
    """llama.cpp's error body: OpenAI's shape with a numeric ``code``."""
    return JSONResponse({"error": {"code": status, "message": message, "type": type}}, status=status)


def lmstudio_entry(model_id: str, *, max_context_length: int, loaded_context_length: int | None = None,
                   type: str = "llm", arch: str = "llama") -> dict[str, Any]:  # noqa: A002
    """One ``/api/v0/models`` entry; a loaded context makes it ``state: "loaded"``."""
    entry: dict[str, Any] = {
        "id": model_id, "object": "model", "type": type, "publisher": "lmstudio-community", "arch": arch,
        "compatibility_type": "gguf", "quantization": "Q4_K_M",
        "state": "loaded" if loaded_context_length else "not-loaded", "max_context_length": max_context_length,
    }
    if loaded_context_length:
        entry["loaded_context_length"] = loaded_context_length
    return entry


def lmstudio(entries: Sequence[Mapping[str, Any]], *, native: ResponseSpec | None = None) -> Handler:
    """An LM Studio server: ``/v1/models`` without figures, ``/api/v0/models`` with them
    (or ``native`` instead), and 200 + an error body for every other path."""

    def handler(request: RecordedRequest) -> ResponseSpec:
        if request.method == "GET" and request.path == "/v1/models":
            return JSONResponse({"object": "list", "data": [
                {"id": e["id"], "object": "model", "owned_by": "organization_owner"} for e in entries]})
        if request.method == "GET" and request.path == "/api/v0/models":
            return native or JSONResponse({"object": "list", "data": [dict(e) for e in entries]})
        return JSONResponse({"error": f"Unexpected endpoint or method. ({request.method} {request.path})"})

    return handler


def openrouter_model(model_id: str, *, context_length: int | None, top_context_length: int | None = None,
                     max_completion_tokens: int | None = None) -> dict[str, Any]:
    """One OpenRouter ``/api/v1/models`` entry."""
    return {
        "id": model_id, "canonical_slug": model_id, "name": model_id, "created": 1692901234,
        "description": "", "context_length": context_length,
        "architecture": {"modality": "text->text", "input_modalities": ["text"], "output_modalities": ["text"],
                         "tokenizer": "Other", "instruct_type": None},
        "pricing": {"prompt": "0.00003", "completion": "0.00006"},
        "top_provider": {"context_length": top_context_length, "max_completion_tokens": max_completion_tokens,
                         "is_moderated": False},
        "per_request_limits": None, "supported_parameters": ["max_tokens", "temperature", "tools"],
    }
