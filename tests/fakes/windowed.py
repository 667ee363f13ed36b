"""A model server with a real context window that counts tokens its own way.

For the token-accounting tests (CTX-24, CTX-25, CAT-3): the server counts a request as
``len(JSON of its messages and tools) // 4`` — not what any of our estimators count —
and behaves like the real servers when a request does not fit:

- ``refusal="openai"`` (OpenAI, vLLM): ``400`` with ``context_length_exceeded`` and the
  figures in the message, when prompt + ``max_tokens`` exceed the window;
- ``refusal="llamacpp"`` (llama.cpp's server): a *streamed* request whose prompt does not
  fit gets ``200`` and an empty body; a non-streamed one gets ``400``
  ``exceed_context_size_error`` with ``n_prompt_tokens`` and ``n_ctx``.

``usage=False`` sends no usage (llama.cpp's streams do not). Every request that fitted is
recorded with the server's own count in ``accepted`` (purpose, prompt tokens).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from context.compaction import SECTION_TITLES
from tests.fakes.responses import JSONResponse, RawResponse, RecordedRequest, ResponseSpec, chat_completion, chat_stream
from tests.fakes.summaries import is_summary as is_summary_messages

LONG_ANSWER = ("Here is a thorough answer with every detail you asked for, written out at length so that "
               "the conversation grows the way real long answers make it grow. ") * 12


def provider_count(body: dict[str, Any]) -> int:
    """The server's own token count of a request: a quarter of its JSON's length."""
    return len(json.dumps(body.get("messages", []))) // 4 + len(json.dumps(body.get("tools", []))) // 4


def is_summary(body: dict[str, Any]) -> bool:
    return is_summary_messages(body.get("messages") or [])


def summary_text(body: dict[str, Any]) -> str:
    sections = "\n".join(f"{n}. {SECTION_TITLES[n - 1]}: the conversation so far, noted." for n in range(1, 10))
    return f"<summary>\n{sections}\n</summary>"


@dataclass
class WindowedServer:
    window: int
    refusal: str = "openai"  # or "llamacpp"
    usage: bool = True
    answer: Callable[[dict[str, Any]], str] = lambda body: LONG_ANSWER
    accepted: list[tuple[str, int]] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)

    def __call__(self, request: RecordedRequest) -> ResponseSpec:
        body = request.json
        prompt = provider_count(body)
        output = body.get("max_tokens") or body.get("max_completion_tokens") or 0
        streamed = body.get("stream", False)
        if self.refusal == "llamacpp" and prompt >= self.window:
            self.refused.append(prompt)
            if streamed:
                return RawResponse(b"", status=200, headers={"Content-Type": "text/event-stream"},
                                   content_length=False)
            return JSONResponse({"error": {
                "code": 400, "message": f"request ({prompt} tokens) exceeds the available context size "
                                        f"({self.window} tokens)",
                "type": "exceed_context_size_error", "n_prompt_tokens": prompt, "n_ctx": self.window}}, status=400)
        if self.refusal == "openai" and prompt + output > self.window:
            self.refused.append(prompt)
            return JSONResponse({"error": {
                "message": f"This model's maximum context length is {self.window} tokens. However, you requested "
                           f"{prompt + output} tokens ({prompt} in the messages, {output} in the completion). "
                           "Please reduce the length of the messages or completion.",
                "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}},
                status=400)
        purpose = "summary" if is_summary(body) else "action"
        self.accepted.append((purpose, prompt))
        text = summary_text(body) if purpose == "summary" else self.answer(body)
        usage = {"prompt_tokens": prompt, "completion_tokens": len(text) // 4,
                 "total_tokens": prompt + len(text) // 4} if self.usage else None
        if not streamed:
            return chat_completion(text, usage=usage)
        return chat_stream([text[i:i + 200] for i in range(0, len(text), 200)], usage=usage)

    def largest_before_first_summary(self) -> int:
        """The server's count of the largest action request it took before any summary."""
        largest = 0
        for purpose, prompt in self.accepted:
            if purpose == "summary":
                break
            largest = max(largest, prompt)
        return largest


# A long question and a long answer of the windowed-server tests: a few of them fill a
# 2,048-token window, so a run must learn the window and compact to go on.
LONG_QUESTION = ("Question {n}. Please explain in detail, with examples, how the quarterly figures moved "
                 "across every region, and what that means for next year. ") * 3
REGIONS_ANSWER = ("The figures moved unevenly: the north grew on new contracts, the south held steady, and the "
               "west fell back after a strong year, which sets a cautious plan for the next one. ") * 4


def long_answer(body: dict[str, Any]) -> str:
    """A summary when the request asks for one, else the regions answer."""
    return summary_text(body) if is_summary(body) else REGIONS_ANSWER
