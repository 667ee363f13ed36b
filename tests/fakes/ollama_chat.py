"""Ollama's OpenAI-compatible chat endpoint, with its silent truncation (a fake: Ollama
cannot run on these machines; shapes from Ollama's ``openai/openai.go`` and its runner).

* ``POST /v1/chat/completions``: a prompt longer than the context the model is served with
  (``num_ctx``: the OpenAI endpoint cannot set it) is **not refused**: Ollama logs
  "truncating input prompt", keeps the start of the system prompt and the end of the
  conversation to ``num_ctx`` tokens, answers, and reports the truncated count as
  ``usage.prompt_tokens`` — exactly ``num_ctx`` here, as its runner's truncation leaves it
  (newer releases may drop whole old messages instead, leaving the count under
  ``num_ctx``: the platform's 10% rule catches that shape, CAT-10).
* Streams are OpenAI chunks with ``system_fingerprint: "fp_ollama"``, a last content
  chunk carrying ``finish_reason``, then — when the request asked for
  ``stream_options.include_usage`` — a chunk with ``choices: []`` and ``usage``, then
  ``[DONE]``. A plain answer carries ``usage``.
* Tokens are counted as :func:`tests.fakes.windowed.provider_count` (a quarter of the
  messages' JSON): not what any of our estimators count.

``truncated`` lists (server count before truncation, kept) of every cut prompt;
``accepted`` the counts of prompts that fitted.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.responses import JSONResponse, RawResponse, RecordedRequest, ResponseSpec
from tests.fakes.windowed import LONG_ANSWER, provider_count


@dataclass
class OllamaChatServer:
    num_ctx: int = 2048  # Ollama's default before 0.6.7
    model: str = "llama3.2:1b"
    answer: Callable[[dict[str, Any]], str] = lambda body: LONG_ANSWER
    truncated: list[tuple[int, int]] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)

    def __call__(self, request: RecordedRequest) -> ResponseSpec:
        if request.method == "GET" and request.path == "/v1/models":
            return JSONResponse({"object": "list", "data": [
                {"id": self.model, "object": "model", "created": 1736071502, "owned_by": "library"}]})
        if request.method == "POST" and request.path == "/v1/chat/completions":
            return self._chat(request.json if isinstance(request.json, dict) else {})
        return RawResponse(b"404 page not found", status=404, headers={"Content-Type": "text/plain"})

    def _chat(self, body: dict[str, Any]) -> ResponseSpec:
        prompt = provider_count(body)
        if prompt > self.num_ctx:  # no error: the start of the conversation is dropped
            self.truncated.append((prompt, self.num_ctx))
            prompt = self.num_ctx
        else:
            self.accepted.append(prompt)
        text = self.answer(body)
        completion = max(1, len(text) // 4)
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        common = {"id": "chatcmpl-412", "created": 1736071502, "model": self.model,
                  "system_fingerprint": "fp_ollama"}
        if body.get("stream") is not True:
            return JSONResponse({**common, "object": "chat.completion", "choices": [{
                "index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": usage})

        def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
            payload = {**common, "object": "chat.completion.chunk", "choices": choices, **extra}
            return f"data: {json.dumps(payload)}\n\n".encode()

        pieces = [chunk([{"index": 0, "delta": {"role": "assistant", "content": text[i:i + 80]},
                          "finish_reason": None}]) for i in range(0, len(text), 80)]
        pieces.append(chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": "stop"}]))
        if (body.get("stream_options") or {}).get("include_usage"):
            pieces.append(chunk([], usage=usage))
        pieces.append(b"data: [DONE]\n\n")
        return RawResponse(b"".join(pieces), headers={"Content-Type": "text/event-stream"})
