"""Publish from the agent's own page (SPEC §10): the change page shows what publishing the
saved draft would change since the last version, and its button publishes it; nothing to
publish and unsaved edits are refused. olivia is the operator; alice owns the agent."""
from __future__ import annotations

import json

import pytest

from agents.forms import AgentAdminForm
from agents.models import AgentVersion
from agents.services import agent_update

pytestmark = pytest.mark.django_db


def change_url(agent) -> str:
    return f"/admin/agents/agent/{agent.pk}/change/"


def publish_url(agent) -> str:
    return f"/admin/agents/agent/{agent.pk}/publish/"


def page_form(agent, **overrides):
    """The change form as the browser submits it when the admin clicks Publish."""
    form = AgentAdminForm(instance=agent)
    data = {}
    for name in form.fields:
        if name == "space":
            continue
        value = form[name].value()
        if isinstance(value, bool):
            if value:
                data[name] = "on"
        elif isinstance(value, (list, tuple)):
            data[name] = list(value)
        elif isinstance(value, dict):
            data[name] = json.dumps(value)
        else:
            data[name] = "" if value is None else str(value)
    return {**data, **overrides}


def test_a_draft_never_published_offers_its_first_version(console, agent):
    html = console.get(change_url(agent)).content.decode()
    assert "Not published yet" in html and "Publish v1</button>" in html and publish_url(agent) in html
    response = console.post(publish_url(agent), page_form(agent))
    assert response.status_code == 302 and response["Location"] == change_url(agent)
    assert list(agent.versions.values_list("version", flat=True)) == [1]
    assert "Published Helper v1." in console.get(change_url(agent)).content.decode()


def test_nothing_to_publish_disables_the_button_and_the_server_refuses_it_too(console, agent, version):
    html = console.get(change_url(agent)).content.decode()
    assert "Nothing to publish: the saved draft is the same as <strong>v1</strong>" in html
    assert "disabled>Publish v2</button>" in html
    console.post(publish_url(agent), page_form(agent))
    assert agent.versions.count() == 1
    assert "Nothing to publish" in console.get(change_url(agent)).content.decode()


def test_the_page_lists_what_changed_field_by_field_then_publishes_it(console, agent, version, space):
    from models_catalog.services import connection_create

    local = connection_create(space=space, data={"name": "Local", "provider": "openai_compatible",
                                                 "base_url": "http://127.0.0.1:8000/v1", "model": "qwen3"})
    agent_update(agent=agent, data={"instructions": "Be thorough.", "tools": [], "model_connection": local,
                                    "context_policy": {"context_ratio": 0.7}, "limits": {"max_tool_calls": 5}})
    html = console.get(change_url(agent)).content.decode()
    for row in ("<th scope=\"row\">Model</th><td>agentloom-demo</td><td>qwen3</td>",
                "<th scope=\"row\">Provider</th><td>The offline demo model</td><td>The OpenAI-compatible server</td>",
                "<th scope=\"row\">Instructions</th><td>9 characters</td><td>12 characters, changed</td>",
                "<th scope=\"row\">Tools removed</th><td>calculator</td>",
                "<th scope=\"row\">Context ratio</th><td>0.8</td><td>0.7</td>",
                "<th scope=\"row\">Run limit: tool calls</th><td>default</td><td>5</td>"):
        assert row in html
    assert "Publish v2</button>" in html and "disabled>Publish v2" not in html
    agent.refresh_from_db()
    console.post(publish_url(agent), page_form(agent))
    published = agent.versions.get(version=2)
    assert (published.model, published.instructions, published.tools) == ("qwen3", "Be thorough.", [])


def test_unsaved_edits_on_the_page_are_refused_naming_the_field(console, agent, version):
    agent_update(agent=agent, data={"instructions": "Be thorough."})
    console.post(publish_url(agent), page_form(agent, name="Renamed but not saved"))
    assert agent.versions.count() == 1
    html = console.get(change_url(agent)).content.decode()
    assert "Not published: the page had unsaved changes (Name). Save them first, then publish." in html


def test_instructions_that_come_back_with_crlf_line_ends_are_not_an_edit(console, agent, version):
    agent_update(agent=agent, data={"instructions": "Line one.\nLine two."})
    agent.refresh_from_db()
    console.post(publish_url(agent), page_form(agent, instructions="Line one.\r\nLine two."))
    assert agent.versions.count() == 2


def test_publishing_needs_a_post_and_the_console(console, agent, bob):
    from django.test import Client

    assert console.get(publish_url(agent)).status_code == 405
    outsider = Client()
    outsider.force_login(bob)
    response = outsider.post(publish_url(agent), page_form(agent))
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert not AgentVersion.objects.filter(agent=agent).exists()
