"""Helpers of the tool-server run tests: ask and run, scripted calls, what was recorded and sent."""
from __future__ import annotations

import json

from runloop.loop import run_execute
from sessions.models import Run, RunEvent, SessionMessage
from sessions.services.questions import question_ask


def ask_and_run(session, content="Go") -> Run:
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def call(name, arguments, call_id="c1"):
    return {"id": call_id, "name": name, "arguments": json.dumps(arguments)}


def results(session):
    return [m.message for m in SessionMessage.objects.filter(session=session, kind="tool_result").order_by("seq")]


class _Sent:
    """A chat request as the provider received it: the native body on Anthropic's wire."""

    def __init__(self, request) -> None:
        self.json = getattr(request, "native", None) or request.json


def chat_requests(fake):
    return [_Sent(r) for r in fake.requests if r.path.endswith(("/chat/completions", "/messages"))]


def tool_definitions(body):
    """(name, description, schema) of each tool of a request, in order, on either wire."""
    out = []
    for tool in body.get("tools") or []:
        spec = tool.get("function", tool)
        out.append((spec["name"], spec["description"], spec.get("parameters", spec.get("input_schema"))))
    return out


def event_data(run, type_):
    return [e.payload for e in RunEvent.objects.filter(run=run, type=type_).order_by("seq")]


def never_ask(tools) -> dict[str, dict[str, str]]:
    """Overrides that let the chosen server tools run without asking (TOOL-7): for tests of
    calls themselves; the default policy is tested in test_approvals.py."""
    return {name: {"approval": "never"} for name in tools if "." in name}


def session_with(space, alice, fake, dialect, tools, *, ask_first: bool = False):
    """A session of an agent with these tools; its server tools never ask unless ``ask_first``."""
    from agents.services import agent_create, agent_publish
    from models_catalog.models import ModelConnection
    from sessions.models import Session
    from tests.runloop.conftest import DIALECT_PROVIDERS, FAKE_KEY

    provider, model = DIALECT_PROVIDERS[dialect]
    connection = ModelConnection.objects.create(space=space, name="Fake", provider=provider, base_url=fake.base_url,
                                                api_key=FAKE_KEY, model=model, max_output_tokens=1_024)
    agent = agent_create(space=space, name="Agent", model_connection=connection, tools=tools,
                         tool_overrides=None if ask_first else never_ask(tools))
    return Session.objects.create(space=space, user=alice, agent=agent, version=agent_publish(agent=agent))

