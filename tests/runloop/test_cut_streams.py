"""LOOP-3 on a server that answers one request at a time (issue #45, items 7 and 8); a cut
is never an empty answer (LOOP-10).

llama-cpp-python's server ends the running stream with ``[DONE]`` and no finish reason
when another request waits: that answer was cut, not finished -- for an action answer, a
summary or a completion check alike, it is asked again with back-off and never logged
``ok``. A streamed prompt over its window is answered with a clean, empty 200 on a
keep-alive connection the server closes moments later: the question asked again without
streaming goes out on a connection of its own and reads the 400 that names the window.
"""
from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context.compaction import SECTION_TITLES
from models_catalog.client import collect, get_chat_client
from models_catalog.errors import ContextOverflowError, StreamCutError
from runloop.compaction_manual import compaction_manual
from runloop.loop import run_execute
from sessions.models import ModelCall, Run, RunEvent, SessionMessage
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import FakeProvider, chat_stream
from tests.fakes.one_at_a_time import ClosingKeepAliveServer, cut_stream
from tests.fakes.summaries import is_summary
from web.errors import error_explain, retry_status

DIALECTS = ("openai",)  # the one-at-a-time server speaks chat completions
LONG = "Please keep this detail in mind: " + "the quarterly figures show steady growth across regions. " * 28


def ask(session, content: str) -> Run:
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def body(text: str) -> dict:
    return {"model": "local-smollm2", "messages": [{"role": "user", "content": text}], "max_tokens": 256}


# -- the client, on the wire --------------------------------------------------------------

def test_a_refused_stream_is_asked_again_on_a_fresh_connection_and_reads_the_window():
    with ClosingKeepAliveServer(window=300) as server:
        with get_chat_client(provider="openai_compatible", base_url=server.base_url, api_key="sk-local",
                             allow_private=True) as client:
            with pytest.raises(ContextOverflowError) as refused:
                collect(client.stream_chat(body(LONG)))
    assert refused.value.window == 300 and refused.value.prompt_tokens > 300
    prompt = server.asked[-1][1]
    assert server.asked == [(True, prompt, 200), (False, prompt, 400)]
    # The empty stream's connection went back to the pool, where the server closed it; the
    # plain question had one of its own (on that one it was reset, and retried as an outage).
    assert server.connections == 2


def test_done_without_a_finish_reason_is_a_cut_not_an_empty_answer():
    with FakeProvider() as fake:
        with get_chat_client(provider="openai_compatible", base_url=fake.base_url, api_key="sk-local",
                             allow_private=True) as client:
            fake.handler = lambda request: cut_stream([])
            with pytest.raises(StreamCutError) as nothing:
                collect(client.stream_chat(body("Hello")))
            fake.handler = lambda request: cut_stream(["The first half"])
            partial = collect(client.stream_chat(body("Hello")))
    assert nothing.value.code == "stream_cut" and nothing.value.transient
    assert partial.cut and partial.text == "The first half" and partial.error.code == "stream_cut"
    with pytest.raises(StreamCutError):
        partial.raise_if_cut()


# -- the run loop -------------------------------------------------------------------------

pytestmark_db = pytest.mark.django_db(transaction=True)


@pytestmark_db
def test_a_cut_answer_is_asked_again_and_the_chat_says_the_server_interrupted_it(fake_session, fake, strict):
    answers = iter([cut_stream(["Paris is"]), cut_stream([]), chat_stream(["Paris is the capital."])])
    strict.handler = lambda request: next(answers)
    run = ask(fake_session(), "What is the capital of France?")

    assert run.status == Run.Status.COMPLETED, run.error
    assert len(fake.requests) == 3
    [answer] = SessionMessage.objects.filter(run=run, kind="assistant")
    assert answer.message["content"] == "Paris is the capital."
    retries = [e.payload for e in RunEvent.objects.filter(run=run, type="run_error").order_by("seq")]
    assert [(r["code"], r["attempt"], r["reset"]) for r in retries] == [
        ("stream_cut", 1, True), ("stream_cut", 2, True)]
    assert retry_status(retries[0]) == ("The model server interrupted the answer (it serves one request at a time) "
                                        "— asking again now… Nothing is lost.")  # the tests' back-off is 0.01 s
    assert retry_status({**retries[0], "retrying_in": 4.0}).endswith("— asking again in 4 s… Nothing is lost.")
    assert list(ModelCall.objects.filter(run=run).values_list("outcome", flat=True)) == ["ok"]
    assert strict.rejections == []


@pytestmark_db
def test_an_answer_cut_every_time_ends_as_a_cut_never_as_an_outage_or_an_empty_answer(fake_session, strict):
    strict.handler = lambda request: cut_stream(["Paris"])
    run = ask(fake_session(), "What is the capital of France?")

    assert run.status == Run.Status.FAILED and run.error["code"] == "stream_cut" and run.error["retryable"]
    assert error_explain(run.error)["title"] == "The model server interrupted the answer"
    assert list(ModelCall.objects.filter(run=run).values_list("outcome", flat=True)) == ["stream_cut"]


SMALL = {"tools": (), "window": 4_000, "provider": "openai", "model": "gpt-4o-mini"}
VERY_LONG = LONG


def summary_text() -> str:
    return "<summary>\n" + "\n".join(f"{n}. {SECTION_TITLES[n - 1]}: noted." for n in range(1, 10)) + "\n</summary>"


@pytestmark_db
@pytest.mark.parametrize("cuts", [1, 99])
def test_a_cut_summary_is_asked_again_and_never_logged_ok(fake_session, strict, cuts):
    calls = {"summary": 0}

    def handler(request):
        if is_summary(request.json["messages"]):
            calls["summary"] += 1
            return cut_stream(["<summary>\n1. Section"]) if calls["summary"] <= cuts else chat_stream([summary_text()])
        return chat_stream(["Noted. " + "Growth is steady. " * 6])

    strict.handler = handler
    session = fake_session(**SMALL, context_policy={"target_ratio": 0.2})
    for n in range(1, 3):
        assert ask(session, f"Question {n}. {VERY_LONG}").status == Run.Status.COMPLETED
    calls["summary"] = 0
    latest = Run.objects.filter(session=session).latest("pk")
    result = compaction_manual(run_id=latest.pk)
    logged = list(ModelCall.objects.filter(purpose="compaction").values_list("outcome", flat=True))
    assert "ok" not in logged or cuts == 1
    if cuts == 1:  # cut once, asked again: one call logged, whole
        assert result == "compacted" and logged == ["ok"] and calls["summary"] == 2
    else:  # cut every time: each summary call logged as cut, after its four attempts
        assert result == "not_compacted" and logged and set(logged) == {"stream_cut"}
        assert calls["summary"] == 4 * len(logged)
    assert strict.rejections == []


@pytestmark_db
def test_a_run_refused_by_the_closing_server_ends_on_the_window_never_as_an_outage(fake_session, strict):
    from agents.models import AgentVersion
    from models_catalog.models import ModelConnection

    session = fake_session(tools=())
    with ClosingKeepAliveServer(window=300) as server:
        # The agent's connection points at the one-at-a-time server (as saved and as published).
        ModelConnection.objects.filter(pk=session.version.model_connection_id).update(base_url=server.base_url)
        AgentVersion.objects.filter(pk=session.version_id).update(base_url=server.base_url)
        run = ask(session, f"Question 1. {LONG}")
    assert run.status == Run.Status.FAILED
    assert run.error["code"] == "context_window" and "keeps 300 tokens of context" in run.error["message"]
    assert [streamed for streamed, _, _ in server.asked] == [True, False]  # asked once plainly, never again
    assert list(ModelCall.objects.filter(run=run).values_list("outcome", flat=True)) == ["context_overflow"]


# -- a property: no stream without a finish reason is ever a finished answer ---------------

def _stream_bytes(pieces: list[str], *, done: bool) -> bytes:
    chunks = list(cut_stream(pieces).events)
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return body + (b"data: [DONE]\n\n" if done else b"")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.text(min_size=0, max_size=12), max_size=6), done=st.booleans())
def test_a_stream_without_a_finish_reason_is_never_a_finished_answer(pieces, done):
    """Whatever came before it, ``[DONE]`` or a clean close with no finish reason is a cut:
    raised (nothing came) or an answer marked cut by ``stream_cut`` -- never complete."""
    raw = _stream_bytes(pieces, done=done)

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=raw)

    with get_chat_client(provider="openai_compatible", base_url="http://127.0.0.1:9/v1", api_key="sk-local",
                         allow_private=True, transport=httpx.MockTransport(answer)) as client:
        try:
            end = collect(client.stream_chat(body("Hello")))
        except StreamCutError:
            assert not "".join(pieces)
            return
    assert end.cut and end.error is not None and end.error.code == "stream_cut"
    assert end.text == "".join(pieces)
