"""Tool servers in the console (SPEC §10, TOOL-1, TOOL-2, TOOL-3, TOOL-6): add a server with its
headers masked, read each tool's description and annotations, refresh with what changed,
the operator's servers read-only, the agent's picker grouped by server, the version's
frozen tools with their drift."""
from __future__ import annotations

import json
import sys

import pytest
from django.contrib.admin import helpers

from tests.fakes.mcp_servers import TOKEN
from toolservers.config import servers_parse
from toolservers.models import ToolServer
from toolservers.services import operator_servers_sync

# Only the test's thread writes: the SDK runs on the bridge's loop, which never touches the database.
pytestmark = pytest.mark.django_db
ADD = "/admin/toolservers/toolserver/add/"


def add(console, space, server, headers: str):
    return console.post(ADD, {"space": space.pk, "name": "tests", "url": server.url, "timeout_seconds": 60,
                              "header_lines": headers}, follow=True)


def test_console_adds_a_server_whose_headers_are_masked_and_lists_each_tools_description_and_annotations(
        console, space, mcp_server):
    response = add(console, space, mcp_server, f"Authorization: Bearer {TOKEN}")
    assert response.status_code == 200
    server = ToolServer.objects.get(name="tests")
    page = console.get(f"/admin/toolservers/toolserver/{server.pk}/change/").content.decode()
    assert TOKEN not in page and "Bearer mcp…5a69" in page
    assert "Repeat the text back." in page and "read-only" in page and "increment" in page
    assert "no annotations (treated as having side effects)" in page  # increment says nothing of itself


def test_console_a_refused_token_is_an_error_on_the_headers_and_saves_nothing(console, space, mcp_server):
    response = add(console, space, mcp_server, "Authorization: Bearer not-the-token-42")
    page = response.content.decode()
    assert "refused the credentials" in page and "not-the-token-42" not in page
    assert not ToolServer.objects.exists()


def test_console_refresh_says_what_changed(console, space, registered, mcp_server):
    mcp_server.rename_tool("add", "sum")
    response = console.post("/admin/toolservers/toolserver/", {
        "action": "refresh", helpers.ACTION_CHECKBOX_NAME: [registered.pk]}, follow=True)
    assert "Server tests: Added sum; removed add." in response.content.decode()


def test_console_the_operators_servers_are_read_only(console, settings, space):
    settings.MCP_OPERATOR_SERVERS = servers_parse(json.dumps({"mcpServers": {"time": {
        "command": sys.executable, "args": ["-m", "mcp_server_time"], "env": {"TZ_KEY": "hidden-value-123"}}}}))
    operator_servers_sync()
    server = ToolServer.objects.get(name="time")
    page = console.get(f"/admin/toolservers/toolserver/{server.pk}/change/").content.decode()
    assert "get_current_time" in page and "mcp_server_time" in page and "TZ_KEY" in page
    assert "hidden-value-123" not in page and 'name="_save"' not in page
    refused = console.post(f"/admin/toolservers/toolserver/{server.pk}/change/", {"name": "evil"})
    assert refused.status_code == 403
    assert console.post(f"/admin/toolservers/toolserver/{server.pk}/delete/", {"post": "yes"}).status_code == 403
    assert ToolServer.objects.get(pk=server.pk).name == "time"


def test_console_the_agent_picker_groups_server_tools_with_what_they_say_they_do(console, agent, registered):
    page = console.get(f"/admin/agents/agent/{agent.pk}/change/").content.decode()
    assert "tests (Acme server)" in page and 'value="tests.echo"' in page
    assert ('<code class="tool-name">echo</code><span class="tool-description">Repeat the text back.</span>'
            '<span class="tool-note">read-only, not destructive, idempotent, not open world</span>') in page
    # The built-ins say what they do as well.
    assert ('<code class="tool-name">calculator</code><span class="tool-description">Evaluate an arithmetic '
            "expression") in page


def test_console_the_version_page_lists_the_frozen_tools_and_their_drift(console, agent, registered, mcp_server):
    from agents.services import agent_publish, agent_update
    from toolservers.services import toolserver_refresh

    agent_update(agent=agent, data={"tools": ["calculator", "tests.echo", "tests.increment"]})
    version = agent_publish(agent=agent)
    mcp_server.reschema_tool("echo")
    toolserver_refresh(server=registered)
    page = console.get(f"/admin/agents/agentversion/{version.pk}/change/").content.decode()
    assert "tests__echo" in page and "input schema changed on the server" in page
    assert "tests__increment" in page and "as published" in page and "an unknown outcome on resume" in page
    assert '"input_schema"' not in page and "&quot;input_schema&quot;" not in page  # a table, not the stored JSON


# --- Adding saves once and says so; a duplicate name is a field error -----------------------

def test_console_adding_a_server_saves_it_once_and_says_it_was_added(console, space, mcp_server):
    response = add(console, space, mcp_server, f"Authorization: Bearer {TOKEN}")
    page = response.content.decode()
    assert "Please correct the error" not in page and "is violated" not in page
    assert "was added successfully" in page
    assert response.redirect_chain[-1][0] == "/admin/toolservers/toolserver/"
    assert list(ToolServer.objects.values_list("name", flat=True)) == ["tests"]


def test_console_a_duplicate_name_is_an_error_on_the_name_and_saves_nothing(console, space, registered, mcp_server):
    response = add(console, space, mcp_server, f"Authorization: Bearer {TOKEN}")
    page = response.content.decode()
    assert response.redirect_chain == [] and "already used by another server of this space" in page
    assert "is violated" not in page
    assert ToolServer.objects.count() == 1


# --- Deleting: the API's rule at the console's doors ------------------------------------------

def delete_page(console, server):
    return console.post(f"/admin/toolservers/toolserver/{server.pk}/delete/", {"post": "yes"}, follow=True)


def bulk_delete(console, *servers, confirmed: bool = False):
    data = {"action": "delete_selected", helpers.ACTION_CHECKBOX_NAME: [s.pk for s in servers]}
    return console.post("/admin/toolservers/toolserver/", {**data, "post": "yes"} if confirmed else data, follow=True)


def test_console_does_not_delete_a_server_a_draft_chooses_and_says_what_to_do(console, agent, registered):
    from agents.services import agent_update

    change = f"/admin/toolservers/toolserver/{registered.pk}/change/"
    assert "No agent&#x27;s draft or latest version uses its tools." in console.get(change).content.decode()
    agent_update(agent=agent, data={"tools": ["calculator", "tests.echo"]})
    assert "Helper (draft)" in console.get(change).content.decode()  # before anyone tries to delete it
    for response in (console.get(f"/admin/toolservers/toolserver/{registered.pk}/delete/", follow=True),
                     delete_page(console, registered), bulk_delete(console, registered, confirmed=True)):
        page = response.content.decode()
        assert "was not deleted: agents use its tools: Helper (draft)" in page
        assert "Untick its tools in those agents, save and publish them, then delete the server." in page
    assert ToolServer.objects.filter(pk=registered.pk).exists()


def test_console_does_not_delete_a_server_the_latest_version_uses_until_a_version_without_it(
        console, agent, registered, as_alice):
    from agents.services import agent_publish, agent_update

    agent_update(agent=agent, data={"tools": ["calculator", "tests.echo"]})
    agent_publish(agent=agent)
    agent_update(agent=agent, data={"tools": ["calculator"]})  # unticked, not yet published
    assert "Helper (v1)" in delete_page(console, registered).content.decode()
    refused = as_alice.delete(f"/api/v1/tool-servers/{registered.pk}")
    assert refused.status_code == 409 and "Helper (v1)" in refused.json()["error"]["message"]
    agent_publish(agent=agent)
    assert "Nothing was deleted" not in bulk_delete(console, registered).content.decode()  # the confirmation page
    page = bulk_delete(console, registered, confirmed=True).content.decode()
    assert "Successfully deleted 1 tool server" in page
    assert not ToolServer.objects.exists()


def test_console_bulk_delete_refuses_all_when_one_is_in_use(console, space, agent, registered, mcp_server):
    from agents.services import agent_update

    spare = ToolServer.objects.create(space=space, name="spare", url=mcp_server.url)
    agent_update(agent=agent, data={"tools": ["tests.increment"]})
    page = bulk_delete(console, registered, spare, confirmed=True).content.decode()
    assert "Nothing was deleted." in page and "Helper (draft)" in page
    assert ToolServer.objects.count() == 2
    assert delete_page(console, spare).status_code == 200 and not ToolServer.objects.filter(name="spare").exists()


# --- A version whose server no longer exists says so plainly -----------------------------------

def test_console_the_agent_form_names_the_tools_of_a_server_that_no_longer_exists(console, agent, registered):
    from agents.services import agent_update

    agent_update(agent=agent, data={"tools": ["calculator", "tests.echo", "tests.add"]})
    ToolServer.objects.filter(pk=registered.pk).delete()  # by the database, past the services' rule
    url = f"/admin/agents/agent/{agent.pk}/change/"
    page = console.get(url).content.decode()
    assert "No longer offered: untick these" in page and "its server &#x27;tests&#x27; no longer exists" in page
    form = {"name": agent.name, "instructions": agent.instructions, "model_connection": agent.model_connection_id,
            "tools": ["calculator", "tests.echo", "tests.add"], "tool_overrides": "{}", "context_ratio": 0.8,
            "target_ratio": 0.5, "max_compaction_calls": 3, "mask_tool_results": "on"}
    refused = console.post(url, form).content.decode()
    assert ("the server &#x27;tests&#x27; no longer exists, so these tools cannot be used: tests.echo, tests.add. "
            "Untick them, or register a server named &#x27;tests&#x27; in this space again") in refused
    saved = console.post(url, {**form, "tools": ["calculator"]}, follow=True)
    assert "was changed successfully" in saved.content.decode()
    agent.refresh_from_db()
    assert agent.tools == ["calculator"]


def test_console_next_version_says_the_server_is_gone_and_nothing_once_it_is_registered_again(
        console, agent, registered, as_alice, mcp_server):
    from agents.services import agent_publish, agent_update

    agent_update(agent=agent, data={"tools": ["calculator", "tests.echo"]})
    version = agent_publish(agent=agent)
    ToolServer.objects.filter(pk=registered.pk).delete()
    url = f"/admin/agents/agent/{agent.pk}/change/"
    page = console.get(url).content.decode()
    assert ("The server &#x27;tests&#x27; no longer exists: untick its tools (tests.echo), or register a server "
            "named &#x27;tests&#x27; in this space again.") in page
    assert "descriptions or your overrides" not in page
    assert "the server &#x27;tests&#x27; no longer exists" in console.get(
        f"/admin/agents/agentversion/{version.pk}/change/").content.decode()

    assert as_alice.post("/api/v1/tool-servers", {"name": "tests", "url": mcp_server.url,
                                                  "headers": mcp_server.headers}, format="json").status_code == 201
    page = console.get(url).content.decode()
    assert "Nothing to publish: the saved draft is the same as <strong>v1</strong>." in page
    version_page = console.get(f"/admin/agents/agentversion/{version.pk}/change/").content.decode()
    assert "as published" in version_page and "no longer exists" not in version_page
