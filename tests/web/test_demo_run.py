"""The demo path without a browser: the offline demo model's run, through the real loop,
reads in the chat as a question, a calculator step with its duration, and the answer."""
from __future__ import annotations

import re

import pytest

from agentloom.runloop.loop import run_execute
from sessions.services.history import question_ask

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_demo_run_reads_as_question_calculator_step_and_answer(client_for, alice, make_session):
    session = make_session(alice)
    run = question_ask(session=session, content="What is 17*23?")
    run_execute(run_id=run.pk)

    body = client_for(alice).get(f"/chat/runs/{run.pk}/fragment").json()
    assert body["status"] == "completed"
    html = body["html"]
    assert "What is 17*23?" in html
    assert '<span class="step-name">calculator</span>' in html and '<span class="step-status">done</span>' in html
    assert re.search(r'<span class="step-duration">\d+ ms</span>', html)
    assert "17*23 = 391" in html
    assert html.count('class="bubble bubble-assistant markdown"') == 2  # before and after the tool
