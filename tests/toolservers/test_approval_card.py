"""A server tool's waiting call as the chat shows it (TOOL-8): the card names the tool as
its step does (``tests · increment``) and says what the server says the tool does."""
from __future__ import annotations

import json
import re
from html import unescape

import pytest
from django.test import Client

from runloop.loop import run_execute
from sessions.models import Run
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream, sequence
from tests.toolservers.runs import call

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("dialect", ["openai"])
def test_a_server_tools_card_names_it_as_its_step_does_with_the_servers_description(server_agent, strict, alice):
    session = server_agent(["tests.increment"])
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__increment", {"by": 1})]))
    run = question_ask(session=session, content="Add one")
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.WAITING

    browser = Client()
    browser.force_login(alice)
    html = browser.get(f"/chat/runs/{run.pk}/fragment").json()["html"]
    card = re.search(r'<div class="approval" role="group".*?(?=<div class="live")', html, re.S)
    assert card, html
    text = unescape(card.group())
    assert '<span class="approval-tool" data-tool="tests__increment">tests · increment</span>' in text
    [frozen] = json.loads(session.version.server_tools)
    assert frozen["description"] and f'<p class="approval-description">{frozen["description"]}</p>' in text
    assert "This tool may change something outside the chat." in text
    assert '"by": 1' in text
