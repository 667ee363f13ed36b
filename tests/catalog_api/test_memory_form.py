"""Memory across sessions in the console's agent form and on the version page (SPEC §7c,
MEM-1, MEM-2 with TOOL-7): the box with what memory does, the memory tool's "Ask before
calling" under it, the policy frozen at publish only while memory is on.

The operator here is the console's superuser; alice administers Acme (tests/conftest.py).
"""
from __future__ import annotations

import re

import pytest

from agents.models import Agent
from agents.services import agent_draft_changes, agent_publish
from agents.tool_approvals import builtin_approvals_freeze
from tests.catalog_api.test_catalog_admin import AGENTS, agent_form

pytestmark = pytest.mark.django_db

MEMORY_SELECT = re.compile(r'<select[^>]*name="approval:memory"[^>]*>')


def test_mem1_the_agent_form_explains_memory_and_leaves_it_off(operator, settings):
    settings.AGENTLOOM_MEMORY_MAX_CHARS = 6000
    page = operator.get(f"{AGENTS}add/").content.decode()
    assert re.search(r'<input[^>]*name="memory"', page)
    assert not re.search(r'<input[^>]*name="memory"[^>]*checked', page)  # off by default
    assert "Memory across sessions" in page
    for words in ("short notes the agent keeps about them across their conversations",
                  "after the instructions", "Memory panel", "can turn memory off for themselves",
                  "Nobody else sees them", "audited read", "AGENTLOOM_MEMORY_MAX_CHARS: 6,000 characters",
                  "costs tokens in every request", "usage page", "asks before it writes, not before it reads"):
        assert words in page
    # The tool's policy is there but hidden and not posted while memory is off.
    select = MEMORY_SELECT.search(page)
    assert select and "disabled" in select.group(0)
    assert re.search(r'id="id_memory_tool_policy"[^>]*hidden', page)


def test_mem2_an_admin_turns_memory_on_with_its_tools_policy_and_publishing_freezes_both(operator, space,
                                                                                          demo_connection):
    form = agent_form(space, demo_connection, memory="on", **{"approval:memory": "side_effects"})
    assert operator.post(f"{AGENTS}add/", form).status_code == 302
    agent = Agent.objects.get()
    assert agent.memory is True
    assert agent.tool_overrides == {"memory": {"approval": "side_effects"}}
    page = operator.get(f"{AGENTS}{agent.pk}/change/").content.decode()
    assert re.search(r'<input[^>]*name="memory"[^>]*checked', page)
    select = MEMORY_SELECT.search(page)
    assert select and "disabled" not in select.group(0)
    assert re.search(r'<option value="side_effects" selected>When it may change something: before writing, '
                     r"not before reading</option>", page)

    version = agent_publish(agent=agent, published_by=None)
    assert version.memory is True
    assert version.tool_approvals == {"memory": "side_effects"}
    shown = operator.get(f"/admin/agents/agentversion/{version.pk}/change/").content.decode()
    assert "Memory across sessions" in shown and "On: each person" in shown
    assert "<code>memory</code>: When it may change something: asks before every call that writes, " \
           "not before reading" in shown


def test_mem2_turning_memory_off_takes_its_tools_policy_with_it(operator, space, demo_connection):
    operator.post(f"{AGENTS}add/", agent_form(space, demo_connection, memory="on", **{"approval:memory": "always"}))
    agent = Agent.objects.get()
    agent_publish(agent=agent, published_by=None)
    # Unticked, the box is not posted, and neither is the (then disabled) select.
    assert operator.post(f"{AGENTS}{agent.pk}/change/", agent_form(space, demo_connection)).status_code == 302
    agent.refresh_from_db()
    assert agent.memory is False and agent.tool_overrides == {}
    _, changes = agent_draft_changes(agent=agent)
    assert [(c.what, c.before, c.after) for c in changes] == [("Memory across sessions", "on", "off")]
    version = agent_publish(agent=agent, published_by=None)
    assert version.memory is False and version.tool_approvals == {}
    shown = operator.get(f"/admin/agents/agentversion/{version.pk}/change/").content.decode()
    assert "Off: no memory, no memory tool." in shown


def test_mem2_a_changed_memory_policy_is_in_the_next_versions_changes(operator, space, demo_connection):
    operator.post(f"{AGENTS}add/", agent_form(space, demo_connection, memory="on"))
    agent = Agent.objects.get()
    agent_publish(agent=agent, published_by=None)
    operator.post(f"{AGENTS}{agent.pk}/change/", agent_form(space, demo_connection, memory="on",
                                                           **{"approval:memory": "always"}))
    agent.refresh_from_db()
    _, changes = agent_draft_changes(agent=agent)
    assert [(c.what, c.before, c.after) for c in changes] == [("Ask before calling memory", "Never", "Always")]


def test_mem2_the_frozen_policies_name_memory_only_while_memory_is_on():
    overrides = {"memory": {"approval": "always"}, "http_fetch": {"approval": "side_effects"}}
    assert builtin_approvals_freeze(tools=["http_fetch"], overrides=overrides, memory=True) == {
        "http_fetch": "side_effects", "memory": "always"}
    assert builtin_approvals_freeze(tools=["http_fetch"], overrides=overrides, memory=False) == {
        "http_fetch": "side_effects"}


def test_mem2_the_api_sets_the_memory_tools_policy_only_on_an_agent_with_memory(api, alice, space, demo_connection):
    client = api(alice)
    created = client.post("/api/v1/agents", {"name": "Keeper", "model_connection": demo_connection.pk,
                                             "memory": True, "tool_overrides": {"memory": {"approval": "always"}}},
                          format="json")
    assert created.status_code == 201, created.json()
    agent = Agent.objects.get(pk=created.json()["id"])
    assert agent.memory and agent.tool_overrides == {"memory": {"approval": "always"}}
    off = client.patch(f"/api/v1/agents/{agent.pk}", {"memory": False}, format="json")
    assert off.status_code == 200
    agent.refresh_from_db()
    assert agent.tool_overrides == {}
    refused = client.patch(f"/api/v1/agents/{agent.pk}", {"tool_overrides": {"memory": {"approval": "always"}}},
                           format="json")
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"]["tool_overrides"] == (
        "memory: the agent's memory is off: turn it on to set this tool's policy")
