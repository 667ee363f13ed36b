"""Each tool's approval policy as an admin sets it (TOOL-7): the draft's ``tool_overrides``
are checked, publishing freezes them (a server tool's in its entry, the built-ins' in
``tool_approvals``), the run's tools say whether a call waits for a person, the console's
agent form sets the policy beside each tool, and the version page lists it in words.

Alice administers Acme; olivia is the operator in the console; the server ``tests`` is the
SDK-built one of tests/fakes/mcp_servers.py (``echo`` is read-only, ``increment`` says
nothing of itself, so it may change something).
"""
from __future__ import annotations

import json

import pytest

from agents.models import AgentVersion
from agents.server_tools import tool_overrides_normalize
from agents.services import agent_draft_changes, agent_publish, agent_update
from agents.tool_registry import approval_needed
from core.errors import ValidationFailed
from runloop.state import run_state_build
from sessions.models import Session
from sessions.services.questions import question_ask
from sessions.services.runs import run_claim

pytestmark = pytest.mark.django_db
TOOLS = ["calculator", "http_fetch", "tests.echo", "tests.increment"]
POLICIES = "never, side_effects, always"


@pytest.mark.parametrize("overrides", [
    {"calculator": {"approval": "always"}},
    {"http_fetch": {"approval": "side_effects"}},
    {"tests.increment": {"approval": "never", "idempotent": True}},
    {"tests.echo": {"observes_screen": False}},
    {"tests.echo": {"approval": "always"}, "http_fetch": {"approval": "never"}},
])
def test_tool7_overrides_take_a_policy_for_any_chosen_tool(overrides):
    assert tool_overrides_normalize(overrides, tools=TOOLS) == overrides


@pytest.mark.parametrize(("overrides", "message"), [
    ({"calculator": {"approval": "sometimes"}}, f"calculator: approval must be one of {POLICIES}"),
    ({"tests.increment": {"approval": True}}, f"tests.increment: approval must be one of {POLICIES}"),
    ({"calculator": {"idempotent": True}},
     f"calculator: 'idempotent' is not accepted; an object of approval ({POLICIES}): a built-in tool accepts "
     "only approval"),
    ({"tests.increment": {"ask": "always"}},
     f"tests.increment: 'ask' is not accepted; an object of approval ({POLICIES}), idempotent or observes_screen "
     "(true or false)"),
    ({"tests.increment": {"idempotent": "yes"}}, "tests.increment: idempotent must be true or false"),
    ({"tests.increment": {}}, f"tests.increment: must be an object of approval ({POLICIES}), idempotent or "
                              "observes_screen (true or false)"),
    ({"http_fetch": "always"}, f"http_fetch: must be an object of approval ({POLICIES}): a built-in tool accepts "
                               "only approval"),
    ({"current_time": {"approval": "always"}}, "current_time: not a tool this agent chooses"),
    ({"tests.add": {"approval": "always"}}, "tests.add: not a tool this agent chooses"),
])
def test_tool7_overrides_refuse_what_is_not_a_policy_naming_the_tool_and_the_values(overrides, message):
    with pytest.raises(ValidationFailed) as refused:
        tool_overrides_normalize(overrides, tools=TOOLS)
    assert refused.value.fields == {"tool_overrides": message}


def test_tool7_the_api_refuses_a_bad_policy_and_writes_nothing_then_returns_the_one_it_saved(
        as_alice, agent, registered):
    url = f"/api/v1/agents/{agent.pk}"
    refused = as_alice.patch(url, {"tools": TOOLS, "tool_overrides": {"tests.echo": {"approval": "maybe"}}},
                             format="json")
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"] == {"tool_overrides": f"tests.echo: approval must be one of {POLICIES}"}
    agent.refresh_from_db()
    assert agent.tools == ["calculator"] and agent.tool_overrides == {}

    chosen = {"http_fetch": {"approval": "always"}, "tests.echo": {"approval": "always", "idempotent": False}}
    saved = as_alice.patch(url, {"tools": TOOLS, "tool_overrides": chosen}, format="json")
    assert saved.status_code == 200 and saved.json()["tool_overrides"] == chosen
    assert as_alice.post(f"{url}/publish").status_code == 201
    version = as_alice.get(f"{url}/versions").json()[0]
    assert version["tool_approvals"] == {"calculator": "never", "http_fetch": "always", "tests.echo": "always",
                                         "tests.increment": "side_effects"}
    assert {tool["ref"]: tool["approval"] for tool in version["server_tools"]} == {
        "tests.echo": "always", "tests.increment": "side_effects"}


def test_tool7_publishing_freezes_the_server_default_the_overrides_and_the_builtins_the_admin_set(
        agent, registered, alice):
    agent_update(agent=agent, data={"tools": TOOLS, "tool_overrides": {
        "calculator": {"approval": "always"}, "tests.echo": {"approval": "always"}}})
    version = agent_publish(agent=agent, published_by=alice)
    frozen = {entry["ref"]: entry["approval"] for entry in json.loads(version.server_tools)}
    assert frozen == {"tests.echo": "always", "tests.increment": "side_effects"}
    assert version.tool_approvals == {"calculator": "always"}  # http_fetch: nothing set, so absent (never)


def run_tools(version: AgentVersion, user) -> dict[str, str]:
    """Why each tool of a run of ``version`` waits for a person ("" when it does not), by function name."""
    session = Session.objects.create(space=version.agent.space, user=user, agent=version.agent, version=version)
    run = run_claim(run_id=question_ask(session=session, content="Count one up.").pk)
    return {tool.name: approval_needed(tool) for tool in run_state_build(run).tools}


def test_tool7_a_runs_tools_wait_for_a_person_as_the_version_froze_their_policies(agent, registered, alice):
    agent_update(agent=agent, data={"tools": TOOLS})
    waits = run_tools(agent_publish(agent=agent, published_by=alice), alice)
    assert waits["tests__increment"] == "This tool may change something outside the chat."
    assert waits["tests__echo"] == ""  # read-only: side_effects never asks
    assert waits["calculator"] == "" and waits["http_fetch"] == ""  # built-ins: never by default

    agent_update(agent=agent, data={"tool_overrides": {
        "http_fetch": {"approval": "always"}, "tests.echo": {"approval": "always"},
        "tests.increment": {"approval": "never"}}})
    waits = run_tools(agent_publish(agent=agent, published_by=alice), alice)
    assert waits["http_fetch"] == waits["tests__echo"] == "This tool asks before every call."
    assert waits["tests__increment"] == "" and waits["calculator"] == ""


def test_tool7_a_version_published_before_policies_reads_as_the_defaults(agent, registered, alice, console):
    agent_update(agent=agent, data={"tools": TOOLS})
    version = agent_publish(agent=agent, published_by=alice)
    old = [{k: v for k, v in entry.items() if k != "approval"} for entry in json.loads(version.server_tools)]
    AgentVersion.objects.filter(pk=version.pk).update(server_tools=json.dumps(old), tool_approvals={})
    version.refresh_from_db()
    assert "approval" not in version.server_tools
    waits = run_tools(version, alice)
    assert waits["tests__increment"] and not waits["tests__echo"] and not waits["calculator"]
    assert agent_draft_changes(agent=agent)[1] == []  # the same policies: nothing to publish
    page = console.get(f"/admin/agents/agentversion/{version.pk}/change/").content.decode()
    assert ("<li><code>tests.increment</code>: When it may change something (default): asks before every call: "
            "it may change something</li>") in page


def test_tool7_next_version_says_which_tools_policy_would_change(agent, registered, alice, console):
    agent_update(agent=agent, data={"tools": TOOLS})
    agent_publish(agent=agent, published_by=alice)
    agent_update(agent=agent, data={"tool_overrides": {
        "calculator": {"approval": "always"}, "tests.increment": {"approval": "never"}}})
    changes = [(c.what, c.before, c.after) for c in agent_draft_changes(agent=agent)[1]]
    assert changes == [("Ask before calling calculator", "Never", "Always"),
                       ("Ask before calling tests.increment", "When it may change something", "Never")]
    page = console.get(f"/admin/agents/agent/{agent.pk}/change/").content.decode()
    assert ('<tr><th scope="row">Ask before calling tests.increment</th><td>When it may change something</td>'
            "<td>Never</td></tr>") in page


# --- The console -------------------------------------------------------------------------------

def form_data(agent, **extra):
    """The agent's change form as the page posts it, with TOOLS chosen and every select at its default."""
    return {"name": agent.name, "instructions": agent.instructions, "model_connection": agent.model_connection_id,
            "tools": TOOLS, "tool_overrides": "{}", "context_ratio": 0.8, "target_ratio": 0.5,
            "max_compaction_calls": 3, "mask_tool_results": "on", "approval:calculator": "never",
            "approval:http_fetch": "never", "approval:tests.echo": "side_effects",
            "approval:tests.increment": "side_effects", "approval:tests.add": "side_effects", **extra}


def test_tool7_the_agent_form_sets_a_policy_beside_each_tool_and_the_version_page_lists_it(
        console, agent, registered):
    url = f"/admin/agents/agent/{agent.pk}/change/"
    page = console.get(url).content.decode()
    assert '<label for="id_tools_0_approval">Ask before calling</label>' in page
    # A read-only tool's "When it may change something" says it then never asks.
    assert ('<option value="side_effects" selected>When it may change something (default): it only reads, so '
            "never</option>") in page
    assert '<option value="never" selected>Never (default)</option>' in page  # a built-in's default

    saved = console.post(url, form_data(agent, **{"approval:tests.increment": "always",
                                                  "approval:http_fetch": "always"}), follow=True)
    assert "was changed successfully" in saved.content.decode()
    agent.refresh_from_db()
    assert agent.tools == TOOLS
    assert agent.tool_overrides == {"http_fetch": {"approval": "always"}, "tests.increment": {"approval": "always"}}

    # The draft round-trips: the page shows what was saved, and saving it unchanged changes nothing.
    page = console.get(url).content.decode()
    assert page.count('<option value="always" selected>Always</option>') == 2
    assert 'name="tool_overrides"' in page and "approval" not in page.split('name="tool_overrides"')[1][:200]
    again = form_data(agent, **{"approval:tests.increment": "always", "approval:http_fetch": "always"})
    console.post(url, again, follow=True)
    agent.refresh_from_db()
    assert agent.tool_overrides == {"http_fetch": {"approval": "always"}, "tests.increment": {"approval": "always"}}

    published = console.post(f"/admin/agents/agent/{agent.pk}/publish/", again, follow=True).content.decode()
    assert "Published Helper v1." in published
    version = AgentVersion.objects.get(agent=agent)
    assert version.tool_approvals == {"http_fetch": "always"}
    version_page = console.get(f"/admin/agents/agentversion/{version.pk}/change/").content.decode()
    assert "<li><code>http_fetch</code>: Always: asks before every call</li>" in version_page
    assert "<li><code>calculator</code>: Never (default): never asks</li>" in version_page
    assert ("<li><code>tests.echo</code>: When it may change something (default): never asks: it only reads</li>"
            in version_page)
    assert "<li><code>tests.increment</code>: Always: asks before every call</li>" in version_page
    assert "<th>Ask before calling</th>" in version_page and "<td>Always</td>" in version_page


def test_tool7_a_new_agent_is_saved_once_with_the_policies_its_form_set(console, agent, space, registered):
    from agents.models import Agent

    data = form_data(agent, name="Counter", space=space.pk, **{"approval:calculator": "always",
                                                                "approval:tests.echo": "never"})
    added = console.post("/admin/agents/agent/add/", data, follow=True).content.decode()
    assert "was added successfully" in added
    created = Agent.objects.get(name="Counter")
    assert created.tool_overrides == {"calculator": {"approval": "always"}, "tests.echo": {"approval": "never"}}
    assert Agent.objects.count() == 2  # Helper and Counter: saved once


def test_tool7_the_agent_form_shows_a_refused_policy_on_its_field_and_saves_nothing(console, agent, registered):
    url = f"/admin/agents/agent/{agent.pk}/change/"
    refused = console.post(url, form_data(agent, **{"approval:calculator": "sometimes"})).content.decode()
    assert f"calculator: approval must be one of {POLICIES}" in refused
    assert 'class="errorlist' in refused.split('name="tool_overrides"')[0].rsplit("field-tool_overrides", 1)[1]
    twice = console.post(url, form_data(agent, tool_overrides='{"calculator": {"approval": "always"}}')).content
    assert "Set &quot;approval&quot; with &quot;Ask before calling&quot; beside each tool above" in twice.decode()
    agent.refresh_from_db()
    assert agent.tools == ["calculator"] and agent.tool_overrides == {}


def test_tool7_publishing_refuses_an_unsaved_policy(console, agent, registered):
    url = f"/admin/agents/agent/{agent.pk}/change/"
    console.post(url, form_data(agent), follow=True)
    edited = console.post(f"/admin/agents/agent/{agent.pk}/publish/",
                          form_data(agent, **{"approval:calculator": "always"}), follow=True).content.decode()
    assert "Not published: the page had unsaved changes (Ask before calling)." in edited
    assert not AgentVersion.objects.filter(agent=agent).exists()


@pytest.mark.django_db(transaction=True)
def test_tool7_always_makes_a_built_in_and_a_read_only_tool_wait_and_never_lets_a_writing_one_through(
        server_agent, strict, fake, mcp_server):
    from runloop.loop import run_execute
    from sessions.models import Run, ToolApproval
    from tests.fakes.fake_provider import chat_stream, sequence
    from tests.toolservers.runs import call

    session = server_agent(["calculator", "tests.echo", "tests.increment"], overrides={
        "calculator": {"approval": "always"}, "tests.echo": {"approval": "always"},
        "tests.increment": {"approval": "never"}})
    strict.handler = sequence(chat_stream(tool_calls=[call("calculator", {"expression": "2+2"}, "c1"),
                                                      call("tests__echo", {"text": "hi"}, "c2"),
                                                      call("tests__increment", {"by": 1}, "c3")]))
    run = question_ask(session=session, content="Add, echo and count")
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.WAITING, run.error
    assert sorted(ToolApproval.objects.filter(run=run).values_list("tool", "why")) == [
        ("calculator", "This tool asks before every call."), ("tests__echo", "This tool asks before every call.")]
    assert mcp_server.effects == 1  # the writing tool set to never ran without asking
