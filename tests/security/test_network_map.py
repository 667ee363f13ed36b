"""A space admin cannot map the private network through discovery or a tool server's
registration (SPEC §11, issue #44 item 16); the operator's list of private endpoints.

Each failure used to say how it ended — the connection was refused, HTTP 404, HTTP 401, an
answer that is not JSON, a name that does not resolve — with a status and a code of its
own, so any space admin could tell which hosts and ports are alive. Now alice (a space admin,
not staff) gets one answer for all of them; olivia, the operator, reads each cause, and the
log has it for every person. Everything runs on loopback: names resolve only as the
``outbound`` guard declares, and nothing past 127.0.0.1 can be connected to.
"""
from __future__ import annotations

import pytest

from core.spaces.services import space_bootstrap_for_user
from models_catalog.http import check_url
from models_catalog.private_hosts import private_hosts_parse
from models_catalog.reachability import UNREACHED_MODELS, UNREACHED_TOOLS
from models_catalog.services import models_discover
from tests.catalog.support import public_resolver
from tests.fakes.fake_provider import FakeProvider, RawResponse, error, models_list, redirect, route
from tests.fakes.mcp_servers import ToolServerApp
from tests.faults.support import free_port
from tests.security.conftest import assert_error_shape
from tests.toolservers.conftest import as_alice, mcp_server  # noqa: F401
from toolservers.models import ToolServer

pytestmark = pytest.mark.django_db

DISCOVER = "/api/models/discover"
SERVERS = "/api/v1/tool-servers"
HTML = RawResponse(b"<html><body>Router admin</body></html>", 200, {"Content-Type": "text/html"})


@pytest.fixture
def operator(olivia):
    space_bootstrap_for_user(user=olivia, name="Operations")
    return olivia


@pytest.fixture
def loopback(outbound):
    """Four live servers that answer differently, a closed port and a name that does not resolve."""
    outbound.names["nowhere.example.test"] = []
    servers = {"404": FakeProvider(route({})), "401": FakeProvider(lambda request: error(401, "no", code="auth")),
               "500": FakeProvider(lambda request: error(500, "down")), "html": FakeProvider(lambda request: HTML),
               "307": FakeProvider(lambda request: redirect("http://127.0.0.1:9/", status=307))}
    for server in servers.values():
        server.__enter__()
    urls = {name: server.url for name, server in servers.items()}
    urls.update({"closed port": f"http://127.0.0.1:{free_port()}", "no such name": "http://nowhere.example.test"})
    yield urls
    for server in servers.values():
        server.__exit__(None, None, None)


def _discover(api, user, url: str):
    return api(user).post(DISCOVER, {"provider": "openai_compatible", "base_url": url + "/v1", "api_key": "sk-x"},
                          format="json")


def test_a_space_admin_gets_one_answer_for_every_way_an_address_fails_discovery(api, alice, space, loopback,
                                                                                caplog):
    answers = {name: _discover(api, alice, url) for name, url in loopback.items()}
    bodies = {name: (response.status_code, response.json()) for name, response in answers.items()}
    assert set(map(repr, bodies.values())) == {repr((400, {"error": {
        "code": "unreachable", "message": UNREACHED_MODELS, "fields": {"base_url": UNREACHED_MODELS}}}))}, bodies
    # The operator's log has every cause, for every person.
    assert "connection was refused" in caplog.text and "HTTP 404" in caplog.text and "HTTP 401" in caplog.text
    assert "could not be resolved" in caplog.text and "not JSON" in caplog.text


def test_the_operator_reads_how_each_address_failed(api, operator, loopback):
    answers = {name: assert_error_shape(_discover(api, operator, url)) for name, url in loopback.items()}
    assert answers["401"]["code"] == "auth" and answers["404"]["code"] == "invalid_request"
    assert answers["500"]["code"] == "provider_unavailable" and "(500)" in answers["500"]["message"]
    assert "connection was refused" in answers["closed port"]["message"]
    assert "could not be resolved" in answers["no such name"]["message"]
    assert "not JSON" in answers["html"]["message"] and answers["307"]["code"] == "redirect_refused"


def test_what_the_url_alone_decides_is_said_to_everyone(api, alice, space, outbound):
    for url, code, words in (("http://169.254.169.254", "unsafe_url", "metadata"),
                             ("http://127.0.0.1:22", "unsafe_url", "non-HTTP service"),
                             ("ftp://127.0.0.1", "invalid_url", "only http")):  # refused as it is read (url_syntax)
        error = assert_error_shape(_discover(api, alice, url), 400)
        assert error["code"] == code and words in error["message"], error
    assert outbound.attempts == []


def test_a_refused_key_at_a_providers_official_endpoint_still_says_so():
    """api.openai.com is public and fixed: what it answers maps nothing private."""
    from core.errors import ValidationFailed

    refusing = FakeProvider(lambda request: error(401, "Incorrect API key provided", code="invalid_api_key"))
    with refusing, pytest.raises(ValidationFailed) as refused:
        models_discover(provider="openai", base_url="", api_key="sk-wrong-key-000", detailed=False,
                        transport=refusing.forwarding_transport(), resolver=public_resolver)
    assert refused.value.code == "auth" and "rejected the credentials" in refused.value.message


@pytest.fixture
def tool_servers(loopback):
    """The same addresses, and a real MCP server that refuses a wrong token."""
    with ToolServerApp() as mcp:
        yield {**{name: url + "/mcp" for name, url in loopback.items()}, "wrong token": mcp.url}


def test_a_space_admin_gets_one_answer_for_every_way_a_tool_server_fails(as_alice, tool_servers, caplog):
    answers = {name: as_alice.post(SERVERS, {"name": "probe", "url": url, "headers": {"Authorization": "Bearer no"}},
                                   format="json") for name, url in tool_servers.items()}
    bodies = {name: (response.status_code, response.json()) for name, response in answers.items()}
    assert set(map(repr, bodies.values())) == {repr((400, {"error": {
        "code": "unreachable", "message": UNREACHED_TOOLS, "fields": {"url": UNREACHED_TOOLS}}}))}, bodies
    assert not ToolServer.objects.exists()
    assert "code=auth" in caplog.text and "code=protocol" in caplog.text and "code=redirect_refused" in caplog.text


def test_the_operator_reads_why_a_tool_server_failed(api, operator, tool_servers):
    codes = {name: assert_error_shape(api(operator).post(SERVERS, {"name": "probe", "url": url}, format="json"),
                                      400)["code"] for name, url in tool_servers.items()}
    assert codes["wrong token"] == "auth" and codes["html"] == "protocol" and codes["307"] == "redirect_refused"
    assert codes["closed port"] == "unreachable"


# --- AGENTLOOM_PRIVATE_ENDPOINT_HOSTS: only the private hosts the operator lists ---------------


def test_with_a_list_only_listed_private_hosts_are_reached(api, operator, outbound, settings):
    outbound.names.update({"models.example.test": ["127.0.0.1"], "other.example.test": ["127.0.0.1"]})
    settings.ALLOW_PRIVATE_MODEL_ENDPOINTS = private_hosts_parse(["models.example.test"])
    with FakeProvider(route({"GET /v1/models": models_list(["qwen3"])})) as server:
        listed = _discover(api, operator, f"http://models.example.test:{server.port}")
        assert listed.status_code == 200 and listed.json()["models"][0]["id"] == "qwen3"
        for url in (server.url, f"http://other.example.test:{server.port}"):
            refused = assert_error_shape(_discover(api, operator, url), 400)
            assert refused["code"] == "unsafe_url" and "operator's list of private endpoints" in refused["message"]
        assert {request.headers["host"] for request in server.requests} == {f"models.example.test:{server.port}"}
    assert outbound.attempts == []


def test_a_listed_network_admits_a_tool_server_and_an_unlisted_one_refuses_it(as_alice, mcp_server, settings):
    settings.ALLOW_PRIVATE_MODEL_ENDPOINTS = private_hosts_parse(["10.0.0.0/8"])
    refused = as_alice.post(SERVERS, {"name": "tests", "url": mcp_server.url, "headers": mcp_server.headers},
                            format="json")
    assert assert_error_shape(refused, 400)["code"] == "unsafe_url"  # the address alone decides: said to everyone
    settings.ALLOW_PRIVATE_MODEL_ENDPOINTS = private_hosts_parse(["127.0.0.0/8", "::1"])
    admitted = as_alice.post(SERVERS, {"name": "tests", "url": mcp_server.url, "headers": mcp_server.headers},
                             format="json")
    assert admitted.status_code == 201, admitted.content


def test_the_list_never_opens_metadata_or_link_local_addresses_and_leaves_public_ones_alone():
    hosts = private_hosts_parse(["169.254.0.0/16", "*.corp.test", "fd00::/8"])
    for url in ("http://169.254.169.254/v1", "http://[fd00:ec2::254]/v1"):
        with pytest.raises(Exception, match="metadata|link-local"):
            check_url(url, allow_private=hosts)
    assert check_url("http://api.example.test/v1", allow_private=hosts,
                      resolver=lambda host, port: ["93.184.216.34"]).addresses == ("93.184.216.34",)
    assert check_url("http://gpu.corp.test/v1", allow_private=hosts,
                     resolver=lambda host, port: ["10.2.3.4"]).addresses == ("10.2.3.4",)
    with pytest.raises(Exception, match="operator's list"):
        check_url("http://corp.test.evil.test/v1", allow_private=hosts, resolver=lambda host, port: ["10.2.3.4"])


@pytest.mark.parametrize("entry", ["bad host!", "http://x.lan", "x..lan", "*"])
def test_an_entry_that_is_no_host_or_network_is_refused(entry):
    with pytest.raises(ValueError):
        private_hosts_parse([entry])
