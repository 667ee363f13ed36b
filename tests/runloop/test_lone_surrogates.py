"""A lone surrogate from the model never breaks the session (issue #44 item 4).

The strict fake provider sends ``\\ud800`` escapes in its streamed text, reasoning and tool
call arguments (split across pieces), on both wires; it also refuses, as the real APIs do,
a request body that is not valid text. The run completes, what is stored holds U+FFFD, and
the next question of the session is sent and answered. Rows the earlier code stored with a
lone surrogate (written here straight into the encrypted columns) render on every page and
in every answer, and the session's next question is answered too.
"""
from __future__ import annotations

import asyncio
import json

import pytest
from django.test import Client
from rest_framework.test import APIClient

from runloop.loop import run_execute
from sessions.models import ModelCall, Run, RunEvent, SentBlob, Session, SessionMessage, SessionView
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream, sequence
from tests.sessions.helpers import stores_a_surrogate

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")
LONE = "\ud800"


def ask_and_run(session, content: str) -> Run:
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def encodes(value) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def test_a_streamed_lone_surrogate_is_stored_as_a_replacement_and_the_session_goes_on(fake_session, fake, strict,
                                                                                        dialect):
    arguments = json.dumps({"expression": f"6*7{LONE}"})  # the escape itself, split across pieces
    # Anthropic signs its thinking (the fake signs the text it sends): reasoning on the OpenAI wire only.
    reasoning = [f"why {LONE}"] if dialect == "openai" else []
    strict.handler = sequence(
        chat_stream([f"Thinking of {LONE}", " a tool."], reasoning=reasoning,
                    tool_calls=[{"id": "call_1", "name": "calculator", "arguments": arguments}]),
        chat_stream([f"Broken {LONE} text", " and more."]),
        chat_stream(["Still here."]))
    session = fake_session()
    run = ask_and_run(session, f"Hello {LONE}")
    assert run.status == Run.Status.COMPLETED, run.error
    records = [m.message for m in SessionMessage.objects.filter(session=session).order_by("seq")]
    assert all(encodes(message) for message in records)
    assert records[0]["content"] == "Hello \ufffd"
    call = records[1]["tool_calls"][0]["function"]
    assert json.loads(call["arguments"]) == {"expression": "6*7\ufffd"}
    assert records[1]["content"] == "Thinking of \ufffd a tool."
    if dialect == "openai":
        assert records[1]["reasoning"] == "why \ufffd"
    assert records[3]["content"] == "Broken \ufffd text and more."
    events = [e.payload for e in RunEvent.objects.filter(run=run).order_by("seq")]
    assert all(encodes(payload) for payload in events)
    assert "Broken \ufffd text and more." in "".join(p.get("text", "") for p in events if "text" in p)
    assert all(encodes(call.request) for call in ModelCall.objects.filter(run=run))
    # Replaced where they came in, not only when read back.
    assert not any(stores_a_surrogate(SessionMessage, pk, "message")
                   for pk in SessionMessage.objects.filter(session=session).values_list("pk", flat=True))
    assert not any(stores_a_surrogate(RunEvent, pk, "payload")
                   for pk in RunEvent.objects.filter(run=run).values_list("pk", flat=True))

    second = ask_and_run(session, "And now?")
    assert second.status == Run.Status.COMPLETED, second.error
    assert strict.rejections == []
    sent = json.dumps(fake.requests[-1].json["messages"], ensure_ascii=False)  # OpenAI-shaped on both wires
    assert "Hello \ufffd" in sent and "Broken \ufffd text and more." in sent


def spoiled(text: str) -> str:
    return f"{text} {LONE}"


def spoil_message(message: dict) -> dict:
    """A record as the earlier code stored it when a lone surrogate came in."""
    message = dict(message)
    if isinstance(message.get("content"), str):
        message["content"] = spoiled(message["content"])
    if message.get("role") == "user":
        message[f"note{LONE}"] = LONE  # an imported message's odd key
    if message.get("tool_calls"):
        message["tool_calls"] = [{**call, "function": {**call["function"], "arguments": json.dumps(
            {"expression": f"6*7{LONE}"})}} for call in message["tool_calls"]]  # JSON text holding the escape
    return message


def spoil_stored_rows(session) -> None:
    """Write lone surrogates straight into the encrypted columns, as the earlier code did,
    past every entry that now replaces them (an UPDATE reaches no service)."""
    Session.objects.filter(pk=session.pk).update(title=spoiled("Old title"))
    for row in SessionMessage.objects.filter(session=session):
        SessionMessage.objects.filter(pk=row.pk).update(message=spoil_message(row.message))
    for view in SessionView.objects.filter(session=session):
        SessionView.objects.filter(pk=view.pk).update(messages=[spoil_message(m) for m in view.messages])
    for event in RunEvent.objects.filter(run__session=session):
        if isinstance(event.payload.get("text"), str):
            payload = {**event.payload, "text": spoiled(event.payload["text"])}
            RunEvent.objects.filter(pk=event.pk).update(payload=payload)
    for blob in SentBlob.objects.filter(session=session):
        if isinstance(blob.content, dict):
            SentBlob.objects.filter(pk=blob.pk).update(content=spoil_message(blob.content))
    for call in ModelCall.objects.filter(run__session=session):
        output = (call.request.get("output") or {}).get("message")
        if output:
            request = {**call.request, "output": {**call.request["output"], "message": spoil_message(output)}}
            ModelCall.objects.filter(pk=call.pk).update(request=request)


def valid_text(response) -> str:
    assert response.status_code == 200, (response.request["PATH_INFO"], response.status_code)
    if not response.streaming:
        body = response.content
    elif hasattr(response.streaming_content, "__aiter__"):  # the event stream: it ends with its finished run
        body = asyncio.run(_joined(response.streaming_content))
    else:
        body = b"".join(response.streaming_content)
    return body.decode("utf-8")  # strict: a lone surrogate cannot have been encoded


async def _joined(chunks) -> bytes:
    return b"".join([chunk async for chunk in chunks])


def test_rows_stored_with_lone_surrogates_render_everywhere_and_the_next_question_is_answered(
        fake_session, fake, strict, alice, olivia):
    strict.handler = sequence(
        chat_stream(tool_calls=[{"id": "call_1", "name": "calculator", "arguments": '{"expression": "6*7"}'}]),
        chat_stream(["It is ", "42."]), chat_stream(["Still ", "here."]))
    session = fake_session()
    run = ask_and_run(session, "What is 6*7?")
    assert run.status == Run.Status.COMPLETED, run.error
    spoil_stored_rows(session)
    first = SessionMessage.objects.filter(session=session).order_by("seq").first()
    assert stores_a_surrogate(SessionMessage, first.pk, "message")  # really stored so

    person, api, console = Client(), APIClient(), Client()
    person.force_login(alice)
    api.force_authenticate(alice)
    console.force_login(olivia)
    assert json.loads(valid_text(api.get("/api/v1/sessions")))[0]["title"] == "Old title \ufffd"
    assert "Old title \ufffd" in valid_text(person.get("/"))
    messages = json.loads(valid_text(api.get(f"/api/v1/sessions/{session.pk}/messages")))["items"]
    assert messages[0]["message"]["content"] == "What is 6*7? \ufffd"
    valid_text(api.get(f"/api/v1/sessions/{session.pk}"))
    events = json.loads(valid_text(api.get(f"/api/v1/runs/{run.pk}/events", {"format": "json"})))["items"]
    assert any(event["data"].get("text", "").endswith(" \ufffd") for event in events)
    stream = valid_text(api.get(f"/api/v1/runs/{run.pk}/events", HTTP_ACCEPT="text/event-stream"))
    assert "\\ud800" not in stream and "\\ufffd" in stream
    assert "What is 6*7? \ufffd" in valid_text(person.get(f"/sessions/{session.pk}/"))
    valid_text(person.get(f"/chat/runs/{run.pk}/fragment"))
    valid_text(person.get(f"/chat/runs/{run.pk}/text", {"after": 0, "upto": 50}))
    assert "What is 6*7? \ufffd" in valid_text(console.get(f"/admin/agent_sessions/session/{session.pk}/records/"))
    valid_text(console.get(f"/admin/agent_sessions/run/{run.pk}/events/"))
    valid_text(console.get(f"/admin/agent_sessions/run/{run.pk}/context/"))
    valid_text(console.get(f"/admin/agent_sessions/session/{session.pk}/change/"))

    second = ask_and_run(session, "And now?")
    assert second.status == Run.Status.COMPLETED, second.error
    assert strict.rejections == []  # the strict fake refuses a body that is not valid text, as the real APIs do
    sent = json.dumps(fake.requests[-1].json["messages"], ensure_ascii=False)
    assert "What is 6*7? \ufffd" in sent
