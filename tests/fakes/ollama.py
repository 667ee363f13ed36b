"""A fake Ollama server that truncates silently, as the real one does (issue #45).

A FAKE: Ollama cannot run here (a Go binary, no registry package), so its behaviour is
copied from its source (``runner``: "truncating input prompt" limit/prompt/keep/new) and
its documented API. A prompt longer than the model's ``num_ctx`` is neither refused nor
reported: the runner keeps the first ``num_keep`` tokens and the newest ones, so exactly
``num_ctx`` tokens are evaluated; the answer is ``200`` with ``finish_reason: "stop"`` and
``usage.prompt_tokens == num_ctx`` — the only trace of what was dropped is that count, far
under what was sent. ``GET /api/ps`` says the context the loaded model is kept with
(``context_length``), ``POST /api/show`` its training length.

Tokens are counted as ``tests.fakes.windowed.provider_count`` counts them (a quarter of the
messages' JSON): not any estimator's count, so a test cannot pass by matching its own
arithmetic. ``truncated`` records (tokens sent, tokens kept) of every truncated request.

Use it as a ``FakeProvider`` handler: ``fake.handler = OllamaServer(num_ctx=2048)``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.responses import (
    JSONResponse,
    RecordedRequest,
    ResponseSpec,
    chat_completion,
    chat_stream,
    models_list,
    ollama_ps,
    ollama_show,
    ollama_tags,
    ollama_version,
)
from tests.fakes.windowed import LONG_ANSWER, provider_count


@dataclass
class OllamaServer:
    num_ctx: int = 2048  # what the model runs with (Ollama's default was 2048, now 4096)
    context_length: int = 131072  # the model's training length (/api/show)
    model: str = "llama3.2:3b"
    answer: Callable[[dict[str, Any]], str] = lambda body: LONG_ANSWER
    truncated: list[tuple[int, int]] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)

    def __call__(self, request: RecordedRequest) -> ResponseSpec:
        route = f"{request.method} {request.path}"
        if route == "GET /api/tags":
            return ollama_tags([self.model])
        if route == "POST /api/show":
            return ollama_show(context_length=self.context_length)
        if route == "GET /api/ps":
            return ollama_ps({self.model: self.num_ctx})
        if route == "GET /api/version":
            return ollama_version()
        if route == "GET /v1/models":
            return models_list([self.model], owned_by="library")
        if route == "POST /v1/chat/completions":
            return self._chat(request.json if isinstance(request.json, dict) else {})
        return JSONResponse({"error": "404 page not found"}, status=404)

    def _chat(self, body: dict[str, Any]) -> ResponseSpec:
        sent = provider_count(body)
        prompt = sent
        if sent > self.num_ctx:
            # The runner's truncation: silent, the first num_keep and the newest tokens kept.
            prompt = self.num_ctx
            self.truncated.append((sent, prompt))
        self.accepted.append(prompt)
        text = self.answer(body)
        usage = {"prompt_tokens": prompt, "completion_tokens": len(text) // 4,
                 "total_tokens": prompt + len(text) // 4}
        if body.get("stream") is not True:
            return chat_completion(text, usage=usage)
        with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return chat_stream([text[i:i + 200] for i in range(0, len(text), 200)], usage=usage if with_usage else None)
