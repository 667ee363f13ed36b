"""A malformed host or port is a 400 naming its field, or a form error, wherever a URL is
typed — never a 500 (issue #44 item 9, SPEC §11).

The four spellings the review found (an empty A-label, a bracketed non-address, a hex port,
a second port) against discovery, model connections (create and change), tool servers
(register and change), the console's connection form, Discover and Test connection
buttons and tool-server form. Each is refused before anything is contacted and changes
nothing. The fuzz tests (``test_fuzz_input_classes.py``, ``test_fuzz_console.py``) send
every malformed host of ``tests/security/fuzzing.py`` to every URL field.
"""
from __future__ import annotations

import pytest

from models_catalog.models import ModelConnection
from tests.security.conftest import assert_error_shape
from toolservers.models import ToolServer

pytestmark = pytest.mark.django_db

MALFORMED = ["http://xn--/v1", "http://[abc]/v1", "http://models.example:0x10/v1", "http://models.example:1:2/v1"]
CONNECTIONS = "/admin/models_catalog/modelconnection/"


@pytest.fixture
def stored(space):
    connection = ModelConnection.objects.create(space=space, name="Local", provider="openai_compatible",
                                                base_url="http://127.0.0.1:9/v1", model="m")
    server = ToolServer.objects.create(space=space, name="tools", url="http://127.0.0.1:9/mcp")
    return connection, server


def _rows() -> list[tuple]:
    return [*ModelConnection.objects.values_list("pk", "base_url"), *ToolServer.objects.values_list("pk", "url")]


@pytest.mark.parametrize("url", MALFORMED)
def test_the_api_answers_a_malformed_host_with_a_400_naming_the_field_and_changes_nothing(api, alice, stored,
                                                                                         outbound, url):
    connection, server = stored
    before = _rows()
    client = api(alice)
    answers = {
        "base_url": [
            client.post("/api/models/discover", {"provider": "openai_compatible", "base_url": url,
                                                 "api_key": "sk-x"}, format="json"),
            client.post("/api/v1/model-connections", {"name": "n", "provider": "openai_compatible", "model": "m",
                                                      "base_url": url, "api_key": "sk-x"}, format="json"),
            client.patch(f"/api/v1/model-connections/{connection.pk}", {"base_url": url, "api_key": "sk-x"},
                         format="json"),
        ],
        "url": [
            client.post("/api/v1/tool-servers", {"name": "other", "url": url}, format="json"),
            client.patch(f"/api/v1/tool-servers/{server.pk}", {"url": url}, format="json"),
        ],
    }
    for field, responses in answers.items():
        for response in responses:
            error = assert_error_shape(response, 400)
            assert field in error["fields"], error
            assert url not in response.content.decode()
    assert _rows() == before
    assert outbound.lookups == []  # refused before any name was looked up


@pytest.mark.parametrize("url", MALFORMED)
def test_the_console_shows_a_malformed_host_as_an_error_of_its_field(console, space, stored, outbound, url):
    before = _rows()
    typed = {"provider": "openai_compatible", "base_url": url, "api_key": "sk-x"}
    discover = console.post(f"{CONNECTIONS}discover/", typed, HTTP_X_REQUESTED_WITH="XMLHttpRequest")
    tested = console.post(f"{CONNECTIONS}test-connection/", {**typed, "model": "m"})
    added = console.post(f"{CONNECTIONS}add/", {**typed, "space": space.pk, "name": "New", "model": "m"})
    server = console.post("/admin/toolservers/toolserver/add/", {"space": space.pk, "name": "other", "url": url,
                                                                 "timeout_seconds": "60"})
    for response in (discover, tested, added, server):
        assert response.status_code == 200, response.status_code
    assert "base_url" in discover.context["form"].errors and "base_url: the " in discover.content.decode()
    assert tested.context["ok"] is False and tested.context["message"].startswith("base_url: ")
    assert "base_url" in added.context["adminform"].form.errors
    assert "url" in server.context["adminform"].form.errors
    assert _rows() == before and outbound.lookups == []


def test_the_console_asks_for_the_space_of_a_tool_server_added_without_one(console, space, outbound):
    response = console.post("/admin/toolservers/toolserver/add/", {"name": "nowhere", "url": "http://127.0.0.1:9/mcp",
                                                                   "timeout_seconds": "60"})
    assert response.status_code == 200
    assert "space" in response.context["adminform"].form.errors
    assert not ToolServer.objects.exists() and outbound.lookups == []
