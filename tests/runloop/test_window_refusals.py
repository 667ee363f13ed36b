"""LOOP-3, CAT-3: a local model's server that keeps less context than its connection says: the
run ends saying what to change and where, never "the provider is down, resume in a
minute" nor "Answer complete." with nothing. The bodies are the servers' own."""
from __future__ import annotations

import json

import pytest

from models_catalog.client import collect, get_chat_client
from models_catalog.errors import ContextOverflowError
from models_catalog.models import ModelConnection
from runloop.loop import run_execute
from sessions.models import ModelCall, Run, SessionMessage
from sessions.services.questions import question_ask
from tests.catalog.support import API_KEY, FAST
from tests.fakes.fake_provider import JSONResponse, RawResponse
from web.errors import error_explain

pytestmark = pytest.mark.django_db(transaction=True)

# llama.cpp's server (builds whose streamed refusal comes after the 200, as an ``error:``
# line, which is no SSE field, then ``data: [DONE]``).
LLAMACPP_STREAMED = (b'error: {"code":400,"message":"the request exceeds the available context size, try increasing '
                     b'it","type":"exceed_context_size_error"}\n\ndata: [DONE]\n\n')
LLAMACPP_STREAMED_FIGURES = (b'error: {"code":400,"message":"request (2300 tokens) exceeds the available context size '
                             b'(2048 tokens), try increasing it","type":"exceed_context_size_error",'
                             b'"n_prompt_tokens":2300,"n_ctx":2048}\n\ndata: [DONE]\n\n')
# The same refusal as a 400 (newer builds check before they answer), and vLLM's.
LLAMACPP_400 = {"error": {"code": 400, "message": "request (2300 tokens) exceeds the available context size "
                                                  "(2048 tokens)", "type": "exceed_context_size_error",
                          "n_prompt_tokens": 2300, "n_ctx": 2048}}
VLLM_400 = {"object": "error", "message": "This model's maximum context length is 2048 tokens. However, you requested "
                                          "2324 tokens (1300 in the messages, 1024 in the completion). Please reduce "
                                          "the length of the messages or completion.",
            "type": "BadRequestError", "param": None, "code": 400}


def streamed(body: bytes):
    return lambda request: RawResponse(body, status=200, headers={"Content-Type": "text/event-stream"})


SERVERS = {
    "llama.cpp streamed, no figures": (streamed(LLAMACPP_STREAMED), None),
    "llama.cpp streamed, with figures": (streamed(LLAMACPP_STREAMED_FIGURES), 2_048),
    "llama.cpp 400": (lambda request: JSONResponse(LLAMACPP_400, status=400), 2_048),
    "vLLM 400": (lambda request: JSONResponse(VLLM_400, status=400), 2_048),
}


@pytest.mark.parametrize("dialect", ["openai"])
@pytest.mark.parametrize("server", list(SERVERS))
def test_a_2048_token_server_behind_a_32768_connection_says_what_to_change_and_where(
        fake_session, fake, dialect, server):
    handler, window = SERVERS[server]
    fake.handler = handler
    session = fake_session(window=32_768)
    # The admin set these figures (CAT-9 keeps what an admin set): in a 2,048-token window
    # they leave no input, so only the admin can fix it.
    connection = session.version.model_connection
    ModelConnection.objects.filter(pk=connection.pk).update(max_output_tokens_source="manual",
                                                            safety_margin_tokens=1_000)
    type(session.version).objects.filter(pk=session.version.pk).update(safety_margin_tokens=1_000)
    session.version.refresh_from_db()
    run = question_ask(session=session, content="Hello")
    run_execute(run_id=run.pk)
    run.refresh_from_db()

    assert run.status == Run.Status.FAILED and run.error["code"] == "context_window", run.error
    assert run.error["retryable"] is False  # a resume keeps the figures the run froze
    message = run.error["message"]
    assert "Model connections → “Fake”" in message and "context window" in message and "output limit" in message
    assert "publish the agent again" in message
    if window:
        assert f"keeps {window:,} tokens of context" in message and f"({window:,})" in message
    assert "output limit of 1,024 tokens" in message
    words = error_explain(run.error)
    assert words["title"] == "The model's server keeps less context than its connection says"
    assert "down" not in json.dumps(words) and "Resume" not in json.dumps(words)
    assert set(ModelCall.objects.filter(run=run).values_list("outcome", flat=True)) == {"context_overflow"}
    assert not SessionMessage.objects.filter(run=run, kind="assistant").exists()


@pytest.mark.parametrize(("body", "figures"), [(LLAMACPP_STREAMED, (None, None)),
                                               (LLAMACPP_STREAMED_FIGURES, (2_300, 2_048))])
def test_llamacpps_error_line_after_a_200_is_its_refusal_not_an_empty_answer(fake, body, figures):
    fake.handler = streamed(body)
    with get_chat_client(provider="openai_compatible", base_url=fake.base_url, api_key=API_KEY,
                         allow_private=True, limits=FAST) as client:
        with pytest.raises(ContextOverflowError) as caught:
            collect(client.stream_chat({"model": "local", "messages": [{"role": "user", "content": "hi"}],
                                        "max_tokens": 64}))
    assert (caught.value.prompt_tokens, caught.value.window) == figures
    assert "exceed_context_size_error" not in str(caught.value)
