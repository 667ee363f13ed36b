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
* llama-cpp-python's server (``python -m llama_cpp.server``): :class:`LlamaCppPythonServer`,
  with its context window and its two ways of refusing a prompt over it.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.responses import Handler, JSONResponse, RawResponse, RecordedRequest, ResponseSpec
from tests.fakes.windowed import LONG_ANSWER, provider_count


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


def llamacpp_context_refusal(n_ctx: int, n_prompt_tokens: int) -> JSONResponse:
    """llama-server's 400 to a non-streamed prompt over a slot's context
    (``tools/server``: ``format_error_response`` of ``ERROR_TYPE_EXCEED_CONTEXT_SIZE``, which
    adds the two figures beside OpenAI's fields)."""
    return JSONResponse({"error": {
        "code": 400,
        "message": f"request ({n_prompt_tokens} tokens) exceeds the available context size ({n_ctx} tokens), "
                   "try increasing it",
        "type": "exceed_context_size_error", "n_prompt_tokens": n_prompt_tokens, "n_ctx": n_ctx}}, status=400)


def vllm_context_refusal(max_model_len: int, prompt_tokens: int, max_tokens: int = 1) -> JSONResponse:
    """vLLM's 400 to a prompt over ``max_model_len`` (its ``ErrorResponse``: the fields at the
    top, no ``error`` wrapper; the wording of ``serving_engine._validate_input``)."""
    return JSONResponse({
        "object": "error",
        "message": f"This model's maximum context length is {max_model_len} tokens. However, you requested "
                   f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} in the "
                   "completion). Please reduce the length of the messages or completion.",
        "type": "BadRequestError", "param": None, "code": 400}, status=400)


def ollama_truncated_completion(num_ctx: int, model: str = "llama3.2:latest") -> JSONResponse:
    """Ollama's OpenAI-compatible answer to a prompt over ``num_ctx``: no refusal — the
    prompt is cut to the context (its newest tokens) and answered, ``usage.prompt_tokens``
    saying how much was kept (``openai/openai.go``'s ``toChatCompletion``)."""
    return JSONResponse({
        "id": "chatcmpl-417", "object": "chat.completion", "created": 1736071502, "model": model,
        "system_fingerprint": "fp_ollama",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "a"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": num_ctx, "completion_tokens": 1, "total_tokens": num_ctx + 1}})


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


# What sse-starlette writes for its keep-alive, with llama-cpp-python's separator ("\n").
LLAMA_CPP_PYTHON_PING = b": ping - 2026-01-05 10:15:02.417301+00:00\n\n"


def _chunked(*pieces: bytes, finished: bool) -> bytes:
    """A chunked HTTP body; unfinished, it lacks the zero-size chunk that ends it."""
    body = b"".join(f"{len(piece):x}\r\n".encode() + piece + b"\r\n" for piece in pieces)
    return body + (b"0\r\n\r\n" if finished else b"")


@dataclass
class LlamaCppPythonServer:
    """llama-cpp-python's OpenAI-compatible server, as strict as the real one (its
    ``llama_cpp/server/app.py``, ``errors.py`` and ``Llama._create_completion``).

    * ``GET /v1/models`` lists the one alias, ``owned_by: "me"``, with no window (it
      publishes none); any other path is FastAPI's 404 ``{"detail": "Not Found"}``.
    * A prompt of ``window`` tokens or more (``n_ctx``; counted here as a quarter of the
      messages' JSON, not as our estimators count) is refused. **Streamed**, the refusal
      happens inside the SSE response that already began, as the releases that start the
      event stream before the first chunk do (the behaviour measured against a running
      server): ``200``, ``text/event-stream``, the keep-alive comment ``: ping - <time>``
      and then the connection closes with the chunked body unfinished (uvicorn, when the app
      raises after the response started); ``ending="clean"`` closes it properly instead.
      The ping comes at once here; the real one waits out sse-starlette's ping interval, so
      a real refusal may also close with no comment at all — the empty-body case, tested on
      its own. Releases that pull the first chunk before the response starts answer the
      plain ``400`` below to a streamed request too, which the client reads as any refusal.
      **Non-streamed**, it is the real ``400``: "This model's maximum context length is N
      tokens. However, you requested M tokens (P in the messages, C in the completion)…",
      ``type: invalid_request_error``,
      ``param: messages``, ``code: context_length_exceeded`` (C is the request's
      ``max_tokens``, printed ``None`` when absent).
    * Under the window it answers; ``max_tokens`` is cut to what the window leaves
      (``finish_reason: length``). Streams are a role chunk, content chunks with
      ``logprobs: null``, a final chunk with an empty delta and the finish reason, and
      ``[DONE]`` — no usage; a plain answer carries ``usage``.

    ``refused`` lists (streamed, prompt tokens) of every refusal, ``accepted`` the prompt
    tokens of every answer.
    """

    window: int = 2048  # llama-cpp-python's default n_ctx
    model: str = "local-llama-3.1-8b-q4"
    ending: str = "cut"  # or "clean"
    answer: Callable[[dict[str, Any]], str] = lambda body: LONG_ANSWER
    refused: list[tuple[bool, int]] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)

    def __call__(self, request: RecordedRequest) -> ResponseSpec:
        if request.method == "GET" and request.path == "/v1/models":
            return JSONResponse({"object": "list", "data": [
                {"id": self.model, "object": "model", "owned_by": "me", "permissions": []}]})
        if request.method == "POST" and request.path == "/v1/chat/completions":
            return self._chat(request.json if isinstance(request.json, dict) else {})
        return JSONResponse({"detail": "Not Found"}, status=404)

    def _chat(self, body: dict[str, Any]) -> ResponseSpec:
        prompt = provider_count(body)
        max_tokens = body.get("max_tokens")  # max_completion_tokens is not a field it reads
        streamed = body.get("stream") is True
        if prompt >= self.window:
            self.refused.append((streamed, prompt))
            if streamed:
                return RawResponse(_chunked(LLAMA_CPP_PYTHON_PING, finished=self.ending == "clean"), headers={
                    "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-store",
                    "X-Accel-Buffering": "no", "Transfer-Encoding": "chunked"}, content_length=False)
            return JSONResponse({"error": {
                "message": f"This model's maximum context length is {self.window} tokens. However, you requested "
                           f"{(max_tokens or 0) + prompt} tokens ({prompt} in the messages, {max_tokens} in the "
                           "completion). Please reduce the length of the messages or completion.",
                "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}},
                status=400)
        self.accepted.append(prompt)
        room = self.window - prompt
        limit = room if max_tokens is None or max_tokens <= 0 or max_tokens + prompt >= self.window else max_tokens
        text = self.answer(body)
        finish = "stop"
        if len(text) // 4 > limit:
            text, finish = text[:limit * 4], "length"
        common = {"id": "chatcmpl-5f1d6c8e-2b7a-4c1e-9d3f-0a6b8e4c2d71", "created": 1736071502, "model": self.model}
        if not streamed:
            return JSONResponse({**common, "object": "chat.completion", "choices": [{
                "index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                "finish_reason": finish}], "usage": {"prompt_tokens": prompt, "completion_tokens": len(text) // 4,
                                                     "total_tokens": prompt + len(text) // 4}})

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
            payload = {**common, "object": "chat.completion.chunk", "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}
            return f"data: {json.dumps(payload)}\n\n".encode()

        pieces = [chunk({"role": "assistant"})]
        pieces += [chunk({"content": text[i:i + 120]}) for i in range(0, len(text), 120)]
        pieces += [chunk({}, finish), b"data: [DONE]\n\n"]
        return RawResponse(_chunked(*pieces, finished=True), headers={
            "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-store",
            "X-Accel-Buffering": "no", "Transfer-Encoding": "chunked"}, content_length=False)
