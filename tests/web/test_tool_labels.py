"""How the chat names a tool step: ``server · tool`` from what the version froze, never by
splitting the wire name (``web.tool_labels``)."""
from __future__ import annotations

import json

import pytest

from agents.services import agent_create, agent_publish
from context.tool_names import function_names
from sessions.models import Session
from tests.web.conftest import finished_run
from web.tool_labels import tool_label, tool_labels


def frozen(refs: list[tuple[str, str]], *, reserved: tuple[str, ...] = ()) -> list[dict]:
    """Entries as ``agents.server_tools`` freezes them (only the fields the labels read)."""
    return [{"function": function, "server": server, "tool": tool}
            for (server, tool), function in zip(refs, function_names(refs, reserved=reserved))]


def test_a_server_tool_reads_as_server_dot_tool():
    labels = tool_labels(frozen([("git", "git_log")]))
    assert labels == {"git__git_log": "git · git_log"}
    assert tool_label("git__git_log", labels) == "git · git_log"


def test_underscores_in_either_name_split_where_the_version_says():
    # Both sanitize to "my_server__get__log": the second gets a hash prefix; splitting the
    # wire name on "__" would name the wrong server for one of them.
    refs = [("my_server", "get__log"), ("my_server__get", "log")]
    entries = frozen(refs)
    labels = tool_labels(entries)
    first, second = (entry["function"] for entry in entries)
    assert first == "my_server__get__log" and second != first
    assert tool_label(first, labels) == "my_server · get__log"
    assert tool_label(second, labels) == "my_server__get · log"


def test_a_name_cut_from_the_front_still_reads_whole():
    tool = "summarize_the_repository_history_since_the_last_release_tag"
    entries = frozen([("archive_server", tool)])
    assert len(entries[0]["function"]) == 64 and not entries[0]["function"].startswith("archive_server")
    assert tool_label(entries[0]["function"], tool_labels(entries)) == f"archive_server · {tool}"


def test_a_built_in_and_an_unknown_name_read_as_they_came():
    labels = tool_labels(frozen([("git", "calculator")], reserved=("calculator",)))
    assert tool_label("calculator", labels) == "calculator"
    assert tool_label("gone__tool", labels) == "gone__tool"


def test_malformed_entries_are_left_out():
    assert tool_labels([{"function": "a__b", "server": "", "tool": "b"}, {"function": 3, "server": "a", "tool": "b"},
                        {"server": "a", "tool": "b"}]) == {}


@pytest.mark.django_db
def test_the_chat_page_names_each_step_by_server_and_tool(space, alice, demo_connection, client_for):
    from toolservers.models import ToolServer

    schema = {"type": "object", "properties": {}}
    for name, tool in (("my_server", "get__log"), ("my_server__get", "log")):
        ToolServer.objects.create(space=space, name=name, url="http://127.0.0.1:9/mcp", tools_json=json.dumps(
            [{"name": tool, "description": "Reads a log.", "input_schema": schema, "annotations": {}}]))
    agent = agent_create(space=space, name="Logs", model_connection=demo_connection, instructions="Be brief.",
                         created_by=alice,
                         tools=["calculator", "my_server.get__log", "my_server__get.log"])
    version = agent_publish(agent=agent, published_by=alice)
    first, second = (entry["function"] for entry in json.loads(version.server_tools))
    session = Session.objects.create(space=space, user=alice, agent=agent, version=version)
    finished_run(session, steps=[{"call": ("c1", first, "one")}, {"call": ("c2", second, "two")},
                                 {"call": ("c3", "calculator", "42")}, {"content": "Done."}])

    html = client_for(alice).get(f"/sessions/{session.pk}/").content.decode()
    assert f'<span class="step-name" data-tool="{first}">my_server · get__log</span>' in html
    assert f'<span class="step-name" data-tool="{second}">my_server__get · log</span>' in html
    assert '<span class="step-name" data-tool="calculator">calculator</span>' in html
    config = json.loads(html.split('id="chat-config" type="application/json">', 1)[1].split("</script>", 1)[0])
    assert config["toolLabels"] == {first: "my_server · get__log", second: "my_server__get · log"}
