"""A fake of llama.cpp's ``llama-server``: slots, ``/props``, refusals and in-stream errors.

A FAKE, for speed: the real server runs in the suite (``real_llama_server``,
``tests/local_servers/test_llama_server_wire.py``, where both are asked the same). Copied
from the real one and its source (``tools/server/server-context.cpp`` of the llama.cpp that
llama-cpp-python's pinned release vendors):

* ``GET /health`` ``{"status": "ok"}``; ``GET /props``: ``default_generation_settings.n_ctx``
  is the context **each slot** has (``--ctx-size`` divided by ``--parallel``),
  ``total_slots`` the number of requests it serves at once; ``GET /slots`` one entry per
  slot (``id``, ``n_ctx``, ``is_processing``).
* A prompt of ``n_ctx`` tokens or more is refused **before** anything is streamed, streamed
  or not ("in streaming mode, the first error must be treated as non-stream response"):
  ``400`` ``{"error": {"code": 400, "message": "request (P tokens) exceeds the available
  context size (N tokens), try increasing it", "type": "exceed_context_size_error",
  "n_prompt_tokens": P, "n_ctx": N}}``.
* An error after the stream began is one more event, ``data: {"error": {"code": 500,
  "message": …, "type": "server_error"}}``, and the stream ends there — **no** ``[DONE]``
  (``error_after``: that many content chunks first).
* Streams carry ``usage`` and ``timings`` in their last chunk (llama.cpp sends them
  whatever ``stream_options`` says); the answer stops at the slot's window with
  ``finish_reason: "length"``.

Tokens are counted as ``tests.fakes.windowed.provider_count`` counts them.
Use it as a ``FakeProvider`` handler: ``fake.handler = LlamaServer(n_ctx=2048, slots=2)``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.responses import JSONResponse, RecordedRequest, ResponseSpec, SSEResponse, chat_completion
from tests.fakes.servers import llamacpp_models
from tests.fakes.windowed import LONG_ANSWER, provider_count


def exceed_context_error(prompt: int, n_ctx: int) -> JSONResponse:
    return JSONResponse({"error": {
        "code": 400, "message": f"request ({prompt} tokens) exceeds the available context size ({n_ctx} tokens), "
                                "try increasing it",
        "type": "exceed_context_size_error", "n_prompt_tokens": prompt, "n_ctx": n_ctx}}, status=400)


@dataclass
class LlamaServer:
    n_ctx: int = 2048  # per slot
    slots: int = 1
    model: str = "smollm2-135m-instruct"
    answer: Callable[[dict[str, Any]], str] = lambda body: LONG_ANSWER
    error_after: int | None = None  # content chunks before an in-stream error
    error_message: str = "Failed to parse input at pos 12"
    refused: list[tuple[bool, int]] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)

    def __call__(self, request: RecordedRequest) -> ResponseSpec:
        route = f"{request.method} {request.path}"
        if route == "GET /health":
            return JSONResponse({"status": "ok"})
        if route == "GET /props":
            return JSONResponse(self.props())
        if route == "GET /slots":
            return JSONResponse([{"id": i, "n_ctx": self.n_ctx, "speculative": False, "is_processing": False}
                                 for i in range(self.slots)])
        if route == "GET /v1/models":
            return llamacpp_models(self.model, n_ctx_train=8192)
        if route == "POST /v1/chat/completions":
            return self._chat(request.json if isinstance(request.json, dict) else {})
        return JSONResponse({"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}},
                            status=404)

    def props(self) -> dict[str, Any]:
        return {"default_generation_settings": {"id": 0, "n_ctx": self.n_ctx, "speculative": False,
                                                "is_processing": False,
                                                "params": {"n_predict": -1, "temperature": 0.8}},
                "total_slots": self.slots, "model_alias": self.model, "model_path": f"/models/{self.model}.gguf",
                "modalities": {"vision": False, "audio": False}, "build_info": "b1-fake",
                "is_sleeping": False}

    def _chat(self, body: dict[str, Any]) -> ResponseSpec:
        prompt = provider_count(body)
        streamed = body.get("stream") is True
        if prompt >= self.n_ctx:
            self.refused.append((streamed, prompt))
            return exceed_context_error(prompt, self.n_ctx)
        self.accepted.append(prompt)
        room = self.n_ctx - prompt
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or body.get("n_predict")
        limit = min(room, max_tokens) if max_tokens and max_tokens > 0 else room
        text, finish = self.answer(body), "stop"
        if len(text) // 4 > limit:
            text, finish = text[:limit * 4], "length"
        usage = {"prompt_tokens": prompt, "completion_tokens": len(text) // 4, "total_tokens": prompt + len(text) // 4}
        if not streamed:
            return chat_completion(text, usage=usage, finish_reason=finish)
        common = {"id": "chatcmpl-QmW3q2fE0X1", "created": 1736071502, "model": self.model,
                  "system_fingerprint": "b1-fake", "object": "chat.completion.chunk"}

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {**common, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

        pieces = [text[i:i + 40] for i in range(0, len(text), 40)]
        events: list[Any] = [chunk({"role": "assistant", "content": None})]
        if self.error_after is not None:
            events += [chunk({"content": p}) for p in pieces[:self.error_after]]
            events.append({"error": {"code": 500, "message": self.error_message, "type": "server_error"}})
            return SSEResponse(events=events, done=False)
        events += [chunk({"content": p}) for p in pieces]
        events.append({**chunk({}, finish), "usage": usage,
                       "timings": {"prompt_n": prompt, "predicted_n": usage["completion_tokens"]}})
        return SSEResponse(events=events)
