"""CAT-9: a context refusal is recognised however the server sends it, and the run learns
the window, compacts and goes on. Each shape is one a real local server sends when a
streamed prompt does not fit (llama-cpp-python's server; llama.cpp's ``llama-server``
old and new builds); the answers under the window are the strict fake's
(``tests.fakes.servers.LlamaCppPythonServer``). The figures of every non-streamed ask are
llama-cpp-python's real 400."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from models_catalog.discovery import PLATFORM_DEFAULT_CONTEXT_WINDOW
from models_catalog.models import PLATFORM_DEFAULT_MAX_OUTPUT_TOKENS, ModelConnection
from runloop.loop import run_execute
from sessions.models import Run, RunEvent
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import JSONResponse, RawResponse
from tests.fakes.servers import LLAMA_CPP_PYTHON_PING, LlamaCppPythonServer, _chunked
from tests.fakes.windowed import is_summary, provider_count, summary_text

pytestmark = pytest.mark.django_db(transaction=True)

SSE = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-store", "Transfer-Encoding": "chunked"}


def _llamacpp_error(prompt: int, window: int) -> dict[str, Any]:
    return {"code": 400, "message": f"request ({prompt} tokens) exceeds the available context size ({window} "
                                    "tokens), try increasing it", "type": "exceed_context_size_error",
            "n_prompt_tokens": prompt, "n_ctx": window}


def _shape(name: str, prompt: int, window: int):
    if name == "plain 400":  # llama-server builds that check before they answer
        return JSONResponse({"error": _llamacpp_error(prompt, window)}, status=400)
    if name == "empty 200, clean close":  # llama-cpp-python: nothing, then the body ends
        return RawResponse(_chunked(finished=True), headers=SSE, content_length=False)
    if name == "empty 200, cut close":
        return RawResponse(_chunked(finished=False), headers=SSE, content_length=False)
    if name == "comments only, cut close":
        return RawResponse(_chunked(LLAMA_CPP_PYTHON_PING, finished=False), headers=SSE, content_length=False)
    if name == "comments only, clean close":
        return RawResponse(_chunked(LLAMA_CPP_PYTHON_PING, finished=True), headers=SSE, content_length=False)
    if name == "error: line":  # llama-server builds that refuse after the 200
        line = b"error: " + json.dumps(_llamacpp_error(prompt, window)).encode() + b"\n\ndata: [DONE]\n\n"
        return RawResponse(_chunked(line, finished=True), headers=SSE, content_length=False)
    if name == "error object in the stream":
        data = b"data: " + json.dumps({"error": _llamacpp_error(prompt, window)}).encode() + b"\n\n"
        return RawResponse(_chunked(data, finished=True), headers=SSE, content_length=False)
    raise AssertionError(name)


SHAPES = ["plain 400", "empty 200, clean close", "empty 200, cut close", "comments only, cut close",
          "comments only, clean close", "error: line", "error object in the stream"]


@dataclass
class ShapedServer(LlamaCppPythonServer):
    shape: str = "plain 400"

    def _chat(self, body: dict[str, Any]):
        prompt = provider_count(body)
        if prompt >= self.window and body.get("stream") is True:
            self.refused.append((True, prompt))
            return _shape(self.shape, prompt, self.window)
        return super()._chat(body)


QUESTION = ("Question {n}. Please explain in detail, with examples, how the quarterly figures moved "
            "across every region, and what that means for next year. ") * 3
ANSWER = ("The figures moved unevenly: the north grew on new contracts, the south held steady, and the "
          "west fell back after a strong year, which sets a cautious plan for the next one. ") * 4


@pytest.mark.parametrize("dialect", ["openai"])
@pytest.mark.parametrize("shape", SHAPES)
def test_cat9_a_refusal_in_any_shape_is_learned_and_the_chat_goes_on(fake_session, fake, dialect, shape):
    server = ShapedServer(window=2_048, shape=shape,
                          answer=lambda body: summary_text(body) if is_summary(body) else ANSWER)
    fake.handler = server
    session = fake_session(tools=(), provider="openai_compatible", model=server.model,
                           window=PLATFORM_DEFAULT_CONTEXT_WINDOW)
    connection = session.version.model_connection
    ModelConnection.objects.filter(pk=connection.pk).update(max_output_tokens=PLATFORM_DEFAULT_MAX_OUTPUT_TOKENS)
    type(session.version).objects.filter(pk=session.version.pk).update(
        max_output_tokens=PLATFORM_DEFAULT_MAX_OUTPUT_TOKENS)
    session.version.refresh_from_db()

    runs = []
    for n in range(1, 9):
        run = question_ask(session=session, content=QUESTION.format(n=n))
        run_execute(run_id=run.pk)
        run.refresh_from_db()
        runs.append(run)

    assert [run.status for run in runs] == [Run.Status.COMPLETED] * 8, [run.error for run in runs]
    assert server.refused, "no request outgrew the window: the test proves nothing"
    connection.refresh_from_db()
    assert connection.learned_context_window == 2_048
    # Never worded as an outage on the way.
    said = json.dumps(list(RunEvent.objects.filter(run__session=session, type="run_error").values_list("payload")))
    assert "provider_unavailable" not in said and "down" not in said
