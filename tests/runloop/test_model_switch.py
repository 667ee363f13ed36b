"""CAT-7 / CTX-5 / CTX-11: a session that moves from an OpenAI model to Claude mid-history.

The first runs go to an OpenAI-compatible server, whose call ids (``functions.calculator:0``)
and reasoning text Anthropic would refuse. Then the agent is republished on an Anthropic
connection and the session moves to that version: the next run's request is built from
the same OpenAI-shaped records and must be a valid Messages API request — ids rewritten
with their pairs, no foreign thinking — checked by the strict Anthropic server.
"""
from __future__ import annotations

import json

import pytest

from agents.services import agent_publish
from models_catalog.models import ModelConnection
from runloop.loop import run_execute
from sessions.models import Run, Session
from sessions.services.questions import question_ask
from tests.fakes.anthropic_bridge import AnthropicBridge
from tests.fakes.fake_provider import FakeProvider, chat_stream
from tests.runloop.conftest import FAKE_KEY

pytestmark = pytest.mark.django_db(transaction=True)

CALL = {"id": "functions.calculator:0", "name": "calculator", "arguments": json.dumps({"expression": "17*23"})}


def _ask(session, content):
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_cat7_a_session_moved_from_an_openai_model_to_claude_sends_a_valid_messages_request(
        fake_session, strict, alice):
    def openai_side(request):
        if request.json["messages"][-1]["role"] == "tool":
            return chat_stream(["It is 391."], reasoning=["I multiplied."])
        return chat_stream(reasoning=["Use the calculator."], tool_calls=[CALL])

    strict.handler = openai_side
    session = fake_session(tools=("calculator",))
    assert _ask(session, "What is 17*23?").status == Run.Status.COMPLETED
    assert strict.rejections == []

    claude = AnthropicBridge(lambda request: chat_stream(["Still 391; anything else?"]), api_key=FAKE_KEY)
    with FakeProvider(claude) as anthropic_server:
        connection = ModelConnection.objects.create(space=session.space, name="Claude", provider="anthropic",
                                                    base_url=anthropic_server.base_url, api_key=FAKE_KEY,
                                                    model="claude-fake-4", context_window=200_000,
                                                    max_output_tokens=4_096)
        agent = session.agent
        agent.model_connection = connection
        agent.save()
        Session.objects.filter(pk=session.pk).update(version=agent_publish(agent=agent, published_by=alice))
        session.refresh_from_db()
        run = _ask(session, "And what was that again?")
        assert run.status == Run.Status.COMPLETED, run.error
        assert claude.rejections == []
        native = anthropic_server.requests[-1].native
    blocks = [block for turn in native["messages"] for block in turn["content"] if isinstance(block, dict)]
    uses = [b for b in blocks if b["type"] == "tool_use"]
    results = [b for b in blocks if b["type"] == "tool_result"]
    assert len(uses) == 1 and uses[0]["id"] != CALL["id"] and results[0]["tool_use_id"] == uses[0]["id"]
    assert uses[0]["input"] == {"expression": "17*23"}
    assert not any(b["type"] in ("thinking", "redacted_thinking") for b in blocks)  # another model's reasoning
    assert native["system"] and native["max_tokens"] == 4_096


def test_ctx11_claudes_signed_thinking_goes_back_to_claude_when_the_same_model_continues(fake_session, alice):
    def handler(request):
        if request.json["messages"][-1]["role"] == "tool":
            return chat_stream(["391."])
        return chat_stream(reasoning=["Multiply with the tool."], tool_calls=[CALL])

    claude = AnthropicBridge(handler, api_key=FAKE_KEY)
    with FakeProvider(claude) as server:
        session = fake_session(tools=("calculator",))
        connection = session.version.model_connection
        ModelConnection.objects.filter(pk=connection.pk).update(provider="anthropic", base_url=server.base_url,
                                                                model="claude-fake-4")
        session.agent.refresh_from_db()
        Session.objects.filter(pk=session.pk).update(version=agent_publish(agent=session.agent, published_by=alice))
        session.refresh_from_db()
        assert _ask(session, "What is 17*23?").status == Run.Status.COMPLETED
        assert claude.rejections == []  # the fake checks every signature against the model
        second = server.requests[-1].native
    assistant = [turn for turn in second["messages"] if turn["role"] == "assistant"][0]
    thinking = [b for b in assistant["content"] if b["type"] == "thinking"]
    assert len(thinking) == 1 and thinking[0]["thinking"] == "Multiply with the tool." and thinking[0]["signature"]


def _thinking(request) -> list[dict]:
    return [block for turn in request.native["messages"] if turn["role"] == "assistant"
            for block in turn["content"] if isinstance(block, dict) and block["type"] == "thinking"]


def test_ctx11_thinking_goes_back_across_questions_until_another_model_answered_in_the_session(
        fake_session, alice):
    """An earlier question's signed thinking goes back to the model that wrote it; once
    another model answered in the session, no thinking goes back — to the new model nor to
    the first one again (the strict server refuses a block signed for another model). The
    run learns it from the session's row (``Session.action_model``), issue #29."""
    def handler(request):
        if request.json["messages"][-1]["role"] == "tool":
            return chat_stream(["391."])
        return chat_stream(reasoning=[f"Multiply with the tool ({request.json['model']})."], tool_calls=[CALL])

    claude = AnthropicBridge(handler, api_key=FAKE_KEY)
    with FakeProvider(claude) as server:
        session = fake_session(tools=("calculator",))
        connection = session.version.model_connection

        def move_to(model: str) -> None:
            ModelConnection.objects.filter(pk=connection.pk).update(provider="anthropic", base_url=server.base_url,
                                                                    model=model)
            session.agent.refresh_from_db()
            Session.objects.filter(pk=session.pk).update(
                version=agent_publish(agent=session.agent, published_by=alice))
            session.refresh_from_db()

        def ask(content: str) -> list:
            sent = len(server.requests)
            assert _ask(session, content).status == Run.Status.COMPLETED
            return server.requests[sent:]

        move_to("claude-fake-4")
        ask("What is 17*23?")
        again = ask("And 23*17?")
        assert [block["thinking"] for block in _thinking(again[0])] == ["Multiply with the tool (claude-fake-4)."]
        move_to("claude-fake-5")
        assert [_thinking(request) for request in ask("And on the new model?")] == [[], []]
        move_to("claude-fake-4")
        assert [_thinking(request) for request in ask("And back again?")] == [[], []]
        assert claude.rejections == []
    assert Session.objects.get(pk=session.pk).action_model == Session.MIXED_MODELS
