"""Registering a remote MCP server (TOOL-1): connect, initialize, list every page; or a 400
that names the cause and saves nothing. Who may do it, and what is never shown."""
from __future__ import annotations

import json
import logging

import pytest

from tests.fakes.fake_provider import FakeProvider, redirect
from tests.fakes.mcp_servers import TOKEN, ToolServerApp
from toolservers.models import ToolServer

# Only the test's thread writes: the SDK runs on the bridge's loop, which never touches the database.
pytestmark = pytest.mark.django_db
URL = "/api/v1/tool-servers"
TOOL_NAMES = ["echo", "add", "big", "fail", "picture", "links", "slow", "gated", "increment"]


def register(client, server, **extra):
    body = {"name": "tests", "url": server.url, "headers": server.headers, **extra}
    return client.post(URL, body, format="json")


def test_tool1_registering_connects_and_lists_every_page_of_tools(as_alice, mcp_server):
    response = register(as_alice, mcp_server)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert [tool["name"] for tool in body["tools"]] == TOOL_NAMES  # five pages of two
    assert mcp_server.seen["tools/list"] >= 4
    echo = body["tools"][0]
    assert echo["description"] == "Repeat the text back."
    assert echo["input_schema"]["properties"]["text"]["type"] == "string"
    assert echo["annotations"]["readOnlyHint"] is True
    assert body["server_info"]["name"] == "tests" and body["transport"] == "streamable_http"
    assert body["header_hints"] == {"Authorization": "Bearer mcp…5a69"}
    assert TOKEN not in json.dumps(body) and "headers" not in body
    stored = ToolServer.objects.get(pk=body["id"])
    assert stored.header_values() == {"Authorization": f"Bearer {TOKEN}"} and stored.space.name == "Acme"


def test_tool1_a_server_that_speaks_only_http_sse_is_registered_on_that_transport(as_alice, sse_server):
    response = register(as_alice, sse_server)
    assert response.status_code == 201, response.json()
    assert response.json()["transport"] == "sse" and len(response.json()["tools"]) == len(TOOL_NAMES)


@pytest.mark.usefixtures("alice_is_staff")  # an operator reads the cause (models_catalog/reachability.py)
@pytest.mark.parametrize("headers, code", [
    ({"Authorization": "Bearer not-the-token-at-all"}, "auth"),
    ({}, "auth"),
])
def test_tool1_a_refused_token_is_a_400_naming_the_headers_and_nothing_is_saved(as_alice, mcp_server, headers, code):
    response = as_alice.post(URL, {"name": "tests", "url": mcp_server.url, "headers": headers}, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == code and "401" in error["message"] and "headers" in error["fields"]
    assert "not-the-token-at-all" not in json.dumps(response.json())
    assert not ToolServer.objects.exists()


@pytest.mark.usefixtures("alice_is_staff")  # an operator reads the cause (models_catalog/reachability.py)
def test_tool1_a_dead_port_is_a_400_naming_the_url(as_alice):
    with ToolServerApp() as gone:
        url = gone.url
    response = as_alice.post(URL, {"name": "gone", "url": url}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unreachable" and "url" in response.json()["error"]["fields"]
    assert not ToolServer.objects.exists()


@pytest.mark.parametrize("url", ["http://169.254.169.254/mcp", "http://metadata.google.internal/mcp",
                                 "http://[fd00:ec2::254]/mcp", "http://[64:ff9b::a9fe:a9fe]/mcp"])
def test_tool1_a_metadata_address_is_refused_before_anything_is_sent(as_alice, url):
    response = as_alice.post(URL, {"name": "meta", "url": url, "headers": {"Authorization": "Bearer x" * 2}},
                             format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "unsafe_url"
    assert not ToolServer.objects.exists()


@pytest.mark.usefixtures("alice_is_staff")  # an operator reads the cause (models_catalog/reachability.py)
def test_tool1_a_url_that_is_no_mcp_endpoint_is_a_protocol_error(as_alice, mcp_server):
    response = as_alice.post(URL, {"name": "tests", "url": mcp_server.url.replace("/mcp", "/elsewhere"),
                                   "headers": mcp_server.headers}, format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "protocol"
    assert "404" in response.json()["error"]["message"]


@pytest.mark.usefixtures("alice_is_staff")  # an operator reads the cause (models_catalog/reachability.py)
def test_tool1_a_web_page_that_is_not_mcp_is_a_protocol_error(as_alice):
    from tests.fakes.fake_provider import RawResponse

    with FakeProvider(lambda request: RawResponse(b"<html><body>Welcome</body></html>", 200,
                                                  {"Content-Type": "text/html"})) as page:
        response = as_alice.post(URL, {"name": "page", "url": page.url + "/mcp"}, format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "protocol"
    assert "Welcome" not in json.dumps(response.json())


@pytest.mark.usefixtures("alice_is_staff")  # an operator reads the cause (models_catalog/reachability.py)
def test_tool1_a_redirect_is_not_followed_and_the_headers_go_nowhere_else(as_alice, mcp_server):
    with FakeProvider(lambda request: redirect(mcp_server.url, status=307)) as hop:
        response = as_alice.post(URL, {"name": "hop", "url": hop.url + "/mcp", "headers": mcp_server.headers},
                                 format="json")
        assert response.status_code == 400 and response.json()["error"]["code"] == "redirect_refused"
        assert all("authorization" not in r.headers or r.path == "/mcp" for r in hop.requests)
    assert mcp_server.seen["initialize"] + mcp_server.seen["server/discover"] == 0


@pytest.mark.parametrize("body, field", [
    ({"name": "Tests"}, "name"), ({"name": "1tests"}, "name"), ({"name": "t" * 32}, "name"),
    ({"name": "te.st"}, "name"), ({"url": "ftp://example.com/mcp"}, "url"), ({"url": ""}, "url"),
    ({"headers": {"Host": "evil.example"}}, "headers"), ({"headers": {"Mcp-Session-Id": "x"}}, "headers"),
    ({"headers": {"X-Key": " padded "}}, "headers"), ({"headers": {"Bad Name": "v"}}, "headers"),
    ({"headers": {"X-Key": "line\nbreak-secret-value"}}, "headers"), ({"headers": ["a"]}, "headers"),
    ({"timeout_seconds": 0}, "timeout_seconds"), ({"timeout_seconds": 10**30}, "timeout_seconds"),
    ({"command": "rm -rf /"}, "command"),
])
def test_tool1_bad_input_is_a_400_naming_the_field_and_saves_nothing(as_alice, mcp_server, body, field):
    payload = {"name": "tests", "url": mcp_server.url, "headers": mcp_server.headers, **body}
    response = as_alice.post(URL, payload, format="json")
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert field in json.dumps(error.get("fields", {})) or field in error["message"]
    assert "break-secret-value" not in json.dumps(response.json())
    assert not ToolServer.objects.exists()
    assert mcp_server.seen["tools/list"] == 0


def test_tool1_a_name_is_unique_in_the_space(as_alice, registered, mcp_server):
    response = register(as_alice, mcp_server)
    assert response.status_code == 400 and response.json()["error"]["code"] == "name_taken"
    assert ToolServer.objects.count() == 1


def test_tool1_a_member_cannot_register_and_an_outsider_cannot_see_or_reach(as_bob, as_mallory, registered,
                                                                              mcp_server, space):
    assert register(as_bob, mcp_server, name="bobs").status_code == 403
    assert as_bob.get(f"{URL}/{registered.pk}").status_code == 200  # members read
    assert as_bob.post(f"{URL}/{registered.pk}/refresh").status_code == 403
    assert as_bob.delete(f"{URL}/{registered.pk}").status_code == 403
    assert as_mallory.get(URL).json() == []
    for method in ("get", "patch", "delete"):
        assert getattr(as_mallory, method)(f"{URL}/{registered.pk}", {}, format="json").status_code == 404
    assert as_mallory.post(f"{URL}/{registered.pk}/refresh").status_code == 404
    assert register(as_mallory, mcp_server, space=space.pk).status_code == 404
    assert ToolServer.objects.count() == 1


def test_tool1_refresh_lists_again_and_says_what_changed(as_alice, registered, mcp_server):
    mcp_server.rename_tool("add", "sum")
    mcp_server.reschema_tool("echo")
    response = as_alice.post(f"{URL}/{registered.pk}/refresh")
    assert response.status_code == 200, response.json()
    changes = response.json()["changes"]
    assert changes["added"] == ["sum"] and changes["removed"] == ["add"]
    assert changes["changed"] == [{"name": "echo", "fields": ["input_schema"]}]
    assert registered.__class__.objects.get(pk=registered.pk).tool("sum") is not None
    again = as_alice.post(f"{URL}/{registered.pk}/refresh").json()["changes"]
    assert again == {"added": [], "removed": [], "changed": []}


def test_tool1_headers_go_only_to_the_url_they_were_entered_for(as_alice, registered, mcp_server):
    with ToolServerApp() as other:
        moved = as_alice.patch(f"{URL}/{registered.pk}", {"url": other.url}, format="json")
        assert moved.status_code == 400 and "headers" in moved.json()["error"]["fields"]
        assert other.seen["tools/list"] == 0
        with_headers = as_alice.patch(f"{URL}/{registered.pk}", {"url": other.url, "headers": other.headers},
                                      format="json")
        assert with_headers.status_code == 200 and with_headers.json()["url"] == other.url


@pytest.mark.usefixtures("alice_is_staff")  # an operator reads the cause (models_catalog/reachability.py)
def test_tool1_new_headers_that_the_server_refuses_change_nothing(as_alice, registered, mcp_server):
    response = as_alice.patch(f"{URL}/{registered.pk}", {"headers": {"Authorization": "Bearer wrong-wrong-wrong"}},
                              format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "auth"
    assert ToolServer.objects.get(pk=registered.pk).header_values() == mcp_server.headers


def test_tool1_a_server_a_draft_uses_is_not_deleted_or_renamed_under_it(as_alice, registered, agent):
    from agents.services import agent_update

    agent_update(agent=agent, data={"tools": ["calculator", "tests.echo"]})
    assert as_alice.delete(f"{URL}/{registered.pk}").json()["error"]["code"] == "in_use"
    assert as_alice.patch(f"{URL}/{registered.pk}", {"name": "renamed"}, format="json").status_code == 409
    agent_update(agent=agent, data={"tools": ["calculator"]})
    assert as_alice.delete(f"{URL}/{registered.pk}").status_code == 204
    assert not ToolServer.objects.exists()


def test_tool1_the_token_is_never_logged_or_returned(as_alice, mcp_server, caplog):
    caplog.set_level(logging.DEBUG)
    assert register(as_alice, mcp_server).status_code == 201
    bad = as_alice.post(URL, {"name": "bad", "url": mcp_server.url,
                              "headers": {"Authorization": "Bearer wrong-token-0987654321"}}, format="json")
    listed = as_alice.get(URL)
    assert bad.status_code == 400 and listed.status_code == 200
    everything = caplog.text + json.dumps(listed.json()) + json.dumps(bad.json())
    assert TOKEN not in everything and "wrong-token-0987654321" not in everything
    assert "tests" in json.dumps(listed.json())
