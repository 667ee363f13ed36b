"""The demo path without a browser: the offline demo model's run, through the real loop,
reads in the chat as a question, a calculator step with its duration, and the answer."""
from __future__ import annotations

import re

import pytest

from runloop.loop import run_execute
from sessions.services.questions import question_ask

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_demo_run_reads_as_question_calculator_step_and_answer(client_for, alice, make_session):
    session = make_session(alice)
    run = question_ask(session=session, content="What is 17*23?")
    run_execute(run_id=run.pk)

    body = client_for(alice).get(f"/chat/runs/{run.pk}/fragment").json()
    assert body["status"] == "completed"
    html = body["html"]
    assert "What is 17*23?" in html
    assert '<span class="step-name" data-tool="calculator">calculator</span>' in html
    assert '<span class="step-status">done</span>' in html
    assert re.search(r'<span class="step-duration">\d+ ms</span>', html)
    assert "17*23 = 391" in html
    assert html.count('class="bubble bubble-assistant markdown"') == 2  # before and after the tool


def test_the_demo_agent_writes_its_plan_computes_and_marks_the_plan_done(alice, settings):
    from django.core.management import call_command

    from agents.models import Agent
    from sessions.models import RunEvent, Session
    from sessions.selectors.instances import main_instance

    call_command("bootstrap_demo", verbosity=0)
    agent = Agent.objects.get(name="Demo assistant")
    assert "update_plan" in agent.versions.get().tools
    from core.spaces.services import membership_add

    membership_add(space=agent.space, user=alice)
    session = Session.objects.create(space=agent.space, user=alice, agent=agent, version=agent.versions.get())
    run = question_ask(session=session, content="What is 17*23?")
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "completed", run.error
    plans = [e.payload["steps"] for e in RunEvent.objects.filter(run=run, type="plan_updated").order_by("seq")]
    assert [[step["status"] for step in plan] for plan in plans] == [["in_progress", "pending"], ["done", "done"]]
    assert main_instance(run=run).frame["plan"] == plans[-1]
    answer = run.records.filter(kind="assistant").order_by("-seq").first().message["content"]
    assert "391" in answer
