"""The operator's servers (TOOL-2): local MCP servers from the package index, started by
the workers over stdio from ``AGENTLOOM_MCP_SERVERS``; listed read-only; used by agents."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from core.errors import Forbidden
from tests.conftest import REPO
from tests.fakes.fake_provider import chat_stream, sequence
from toolservers.config import servers_parse
from toolservers.models import ToolServer
from toolservers.services import operator_servers_sync, toolserver_update

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/api/v1/tool-servers"


def _servers(space_ids=None, **extra):
    servers = {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
                        "env": {"TIME_SERVER_SECRET": "operator-secret-value-42"}}, **extra}
    if space_ids is not None:
        servers["time"]["spaces"] = space_ids
    return servers_parse(json.dumps({"mcpServers": servers}))


@pytest.fixture
def operator_time(settings, space):
    """``time``: the real ``mcp-server-time`` over stdio, for Alice's space only, listed."""
    settings.MCP_OPERATOR_SERVERS = _servers(space_ids=[space.pk])
    assert operator_servers_sync() == {"time": "ok"}
    return ToolServer.objects.get(space__isnull=True, name="time")


def test_tool2_a_worker_lists_the_operators_server_over_stdio_and_the_api_shows_it_read_only(
        operator_time, as_alice, as_mallory):
    listed = {s["name"]: s for s in as_alice.get(URL).json()}
    time = listed["time"]
    assert time["kind"] == "operator" and time["transport"] == "stdio" and time["space"] is None
    assert {"get_current_time", "convert_time"} <= {tool["name"] for tool in time["tools"]}
    assert time["server_info"]["name"] == "mcp-time"
    assert "operator-secret-value-42" not in json.dumps(listed)
    for method in ("patch", "delete"):
        refused = getattr(as_alice, method)(f"{URL}/{operator_time.pk}", {"name": "x"}, format="json")
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "read_only"
    assert as_alice.post(f"{URL}/{operator_time.pk}/refresh").status_code == 403
    assert as_mallory.get(URL).json() == [] and as_mallory.get(f"{URL}/{operator_time.pk}").status_code == 404


def test_tool2_the_update_service_itself_refuses_an_operators_server(operator_time, alice):
    with pytest.raises(Forbidden) as refused:
        toolserver_update(server=operator_time, data={"name": "renamed"}, by=alice)
    assert refused.value.code == "read_only"
    operator_time.refresh_from_db()
    assert operator_time.name == "time"


def test_tool2_only_operators_read_how_the_operators_server_is_started(operator_time, as_alice, as_bob, olivia,
                                                                        space):
    """A token passed as an argument is the operator's: members and the space's admins see
    the server's name, its tools and that it is the operator's, never its command line."""
    from rest_framework.test import APIClient

    from core.spaces.models import Membership
    from core.spaces.services import membership_add

    for person in (as_bob, as_alice):
        for body in (person.get(URL).json()[0], person.get(f"{URL}/{operator_time.pk}").json()):
            assert body["name"] == "time" and body["kind"] == "operator" and body["tools"]
            assert body["operator"] is None
            text = json.dumps(body)
            assert "mcp_server_time" not in text and "--local-timezone" not in text and sys.executable not in text
            assert "TIME_SERVER_SECRET" not in text
    membership_add(space=space, user=olivia, role=Membership.Role.MEMBER)  # staff, reading through the API
    as_olivia = APIClient()
    as_olivia.force_authenticate(olivia)
    shown = as_olivia.get(f"{URL}/{operator_time.pk}").json()["operator"]
    assert shown["command"] == sys.executable and shown["args"][:2] == ["-m", "mcp_server_time"]
    assert shown["env_names"] == ["TIME_SERVER_SECRET"] and shown["spaces"] == [space.pk]


def test_tool2_no_api_call_can_add_or_start_a_command(as_alice, space):
    for body in ({"name": "evil", "command": "touch", "args": ["/tmp/pwned"]},
                 {"name": "evil", "url": "stdio://touch"}, {"name": "evil", "transport": "stdio", "url": "x"}):
        response = as_alice.post(URL, body, format="json")
        assert response.status_code == 400, response.json()
    assert not ToolServer.objects.exists()


def test_tool2_a_space_server_cannot_take_an_operators_name(as_alice, operator_time, mcp_server):
    response = as_alice.post(URL, {"name": "time", "url": mcp_server.url, "headers": mcp_server.headers},
                             format="json")
    assert response.status_code == 400 and "operator" in response.json()["error"]["fields"]["name"]


def test_tool2_an_agent_calls_the_real_time_server_and_its_secret_is_redacted(operator_time, space, alice, strict,
                                                                             fake):
    from runloop.loop import run_execute
    from sessions.models import Run, SessionMessage
    from sessions.services.history import question_ask
    from tests.toolservers.runs import session_with

    session = session_with(space, alice, fake, "openai", ["time.get_current_time"])
    strict.handler = sequence(chat_stream(tool_calls=[{"id": "t1", "name": "time__get_current_time",
                                                       "arguments": json.dumps({"timezone": "Europe/Paris"})}]),
                              chat_stream(["It is evening in Paris (my secret: operator-secret-value-42)."]))
    run = question_ask(session=session, content="What time is it in Paris?")
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    result = SessionMessage.objects.get(session=session, kind="tool_result").message
    assert result["status"] == "ok" and json.loads(result["content"])["timezone"] == "Europe/Paris"
    assert result["structured_content"]["timezone"] == "Europe/Paris"
    answer = SessionMessage.objects.filter(session=session, kind="assistant").order_by("-seq").first().message
    assert answer["content"] == "It is evening in Paris (my secret: [REDACTED])."  # LOOP-8: a tool secret
    assert strict.rejections == []


def test_tool2_the_real_git_server_reads_a_repository(settings, space, alice, strict, fake, tmp_path):
    from runloop.loop import run_execute
    from sessions.models import Run, SessionMessage
    from sessions.services.history import question_ask
    from tests.toolservers.runs import session_with

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "notes.txt").write_text("hello\n")
    settings.MCP_OPERATOR_SERVERS = servers_parse(json.dumps({"mcpServers": {"git": {
        "command": sys.executable, "args": ["-m", "mcp_server_git", "--repository", str(tmp_path)]}}}))
    assert operator_servers_sync() == {"git": "ok"}
    session = session_with(space, alice, fake, "openai", ["git.git_status"])
    strict.handler = sequence(chat_stream(tool_calls=[{"id": "g1", "name": "git__git_status",
                                                       "arguments": json.dumps({"repo_path": str(tmp_path)})}]),
                              chat_stream(["One untracked file."]))
    run = question_ask(session=session, content="What is the state of the repository?")
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    result = SessionMessage.objects.get(session=session, kind="tool_result").message
    assert result["status"] == "ok" and "notes.txt" in result["content"]


def test_tool2_a_command_that_cannot_start_is_recorded_and_shown_not_raised(settings, space, as_alice):
    settings.MCP_OPERATOR_SERVERS = servers_parse(json.dumps({"mcpServers": {
        "broken": {"command": "/nonexistent/agentloom-no-such-server"}}}))
    outcome = operator_servers_sync()
    assert "could not be started" in outcome["broken"]
    listed = as_alice.get(URL).json()
    assert listed[0]["name"] == "broken" and "could not be started" in listed[0]["list_error"]


def test_tool2_a_bad_servers_file_stops_start_up_with_one_line_naming_the_variable(tmp_path):
    bad = tmp_path / "servers.json"
    bad.write_text('{"mcpServers": {"Time": {"command": "x"}}}')
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=REPO, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "DEBUG": "true", "AGENTLOOM_MCP_SERVERS": str(bad),
                               "AGENTLOOM_VAR_DIR": str(tmp_path)}, timeout=120)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "AGENTLOOM_MCP_SERVERS" in lines[0] and "a name is" in lines[0]
