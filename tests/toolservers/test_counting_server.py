"""The counting server the approval tests rely on (tests.fakes.counting_server): its tools'
hints read as the product reads them, and one line per effect, whichever process served it."""
from __future__ import annotations

import json

import pytest

from agents.services import agent_create, agent_publish
from models_catalog.models import ModelConnection
from runloop.loop import run_execute
from sessions.models import Session, SessionMessage
from sessions.services.questions import question_ask
from tests.fakes.counting_server import EFFECTS_FILE_ENV, CountingServer, effects_read
from tests.fakes.fake_provider import chat_stream
from tests.runloop.conftest import FAKE_KEY
from toolservers.services import toolserver_register

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def counting(tmp_path, monkeypatch):
    monkeypatch.setenv(EFFECTS_FILE_ENV, str(tmp_path / "effects.jsonl"))
    with CountingServer() as server:
        yield server


def _version(space, alice, fake, tools):
    connection = ModelConnection.objects.create(space=space, name="Fake", provider="openai_compatible",
                                                base_url=fake.base_url, api_key=FAKE_KEY, model="fake-model",
                                                context_window=32_768, max_output_tokens=1_024)
    agent = agent_create(space=space, name="Payer", model_connection=connection, tools=tools, created_by=alice)
    return agent, agent_publish(agent=agent, published_by=alice)


def test_its_three_tools_freeze_as_read_only_idempotent_and_destructive(space, alice, fake, counting):
    toolserver_register(space=space, data={"name": "pay", "url": counting.url})
    _, version = _version(space, alice, fake, ["pay.lookup", "pay.set_flag", "pay.send_payment"])
    frozen = {entry["tool"]: entry for entry in json.loads(version.server_tools)}
    assert frozen["lookup"]["annotations"]["readOnlyHint"] is True and frozen["lookup"]["idempotent"] is True
    assert frozen["set_flag"]["annotations"]["idempotentHint"] is True
    assert frozen["set_flag"]["annotations"]["readOnlyHint"] is False and frozen["set_flag"]["idempotent"] is True
    assert not frozen["send_payment"]["annotations"] and frozen["send_payment"]["idempotent"] is False


def test_each_call_it_serves_is_one_line_in_the_effects_file(space, alice, fake, strict, counting, tmp_path):
    """A read-only tool does not wait by default, so a plain run calls it."""
    toolserver_register(space=space, data={"name": "pay", "url": counting.url})
    agent, version = _version(space, alice, fake, ["pay.lookup"])
    session = Session.objects.create(space=space, user=alice, agent=agent, version=version)
    replies = iter([chat_stream(tool_calls=[{"id": "l1", "name": "pay__lookup",
                                             "arguments": json.dumps({"account": "ACME"})}]),
                    chat_stream(["ACME has 120 EUR."])])
    strict.handler = lambda request: next(replies)
    run = question_ask(session=session, content="Balance?")
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "completed", run.error
    assert [e["tool"] for e in effects_read(tmp_path / "effects.jsonl")] == ["lookup"]
    result = SessionMessage.objects.get(run=run, kind="tool_result").message
    assert result["status"] == "ok" and "120.00 EUR" in result["content"]
    assert strict.rejections == []
