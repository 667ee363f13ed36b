"""The window asked of the server before a connection is saved, and shown before (CAT-8).

llama-cpp-python's server (the strict fake of tests/fakes/servers.py, on a real socket)
publishes no window: Discover shows the one its refusal of the probe names, and a
connection saved without a discovery result or a typed window asks the server first,
instead of keeping the platform's 32,768. An output limit that window cannot hold is
refused with a 400 naming ``max_output_tokens`` (CAT-3, CAT-12).
"""
from __future__ import annotations

import pytest

from models_catalog.models import ModelConnection
from tests.catalog_api.conftest import CONNECTIONS, DISCOVER
from tests.fakes.fake_provider import Reset
from tests.fakes.servers import LlamaCppPythonServer

pytestmark = pytest.mark.django_db
URL = "/api/v1/model-connections"
MODEL = "smollm2-135m-instruct"


@pytest.fixture
def llama_cpp_python(fake_provider):
    fake_provider.handler = LlamaCppPythonServer(window=2048, model=MODEL)
    return fake_provider


def probes(server):
    return [r for r in server.requests if r.path == "/v1/chat/completions"]


def test_discover_shows_the_window_the_server_said_before_anything_is_saved(api, alice, space, llama_cpp_python):
    response = api(alice).post("/api/models/discover", {"provider": "openai_compatible",
                                                         "base_url": llama_cpp_python.base_url}, format="json")
    assert response.status_code == 200, response.content
    found = response.json()["models"][0]
    assert (found["context_window"], found["context_window_source"]) == (2048, "server")
    assert (found["server_context_window"], found["server_context_source"]) == (2048, "probe_refusal")
    assert found["max_output_tokens"] == 1024
    assert "The server said its window is 2,048 tokens" in found["note"]


def test_a_connection_saved_with_no_window_gets_the_servers_not_the_platform_default(api, alice, space,
                                                                                      llama_cpp_python):
    body = api(alice).post(URL, {"name": "SmolLM2", "provider": "openai_compatible",
                                 "base_url": llama_cpp_python.base_url, "model": MODEL}, format="json")
    assert body.status_code == 201, body.content
    saved = body.json()
    assert (saved["context_window"], saved["context_window_source"]) == (2048, "server")
    assert (saved["server_context_window"], saved["server_context_source"]) == (2048, "probe_refusal")
    assert saved["max_output_tokens"] == 1024 and saved["max_output_tokens"] < saved["context_window"]
    assert len(probes(llama_cpp_python)) == 1


def test_a_later_save_of_a_connection_still_at_the_default_asks_the_server(api, alice, space, llama_cpp_python):
    client = api(alice)
    server = LlamaCppPythonServer(window=2048, model=MODEL)
    llama_cpp_python.handler = lambda request: server(request) if request.path == "/v1/models" else Reset()
    created = client.post(URL, {"name": "SmolLM2", "provider": "openai_compatible",
                                "base_url": llama_cpp_python.base_url, "model": MODEL}, format="json").json()
    assert created["context_window_source"] == "platform_default"  # the probe's connection was cut: default kept
    llama_cpp_python.handler = LlamaCppPythonServer(window=2048, model=MODEL)
    renamed = client.patch(f"{URL}/{created['id']}", {"name": "SmolLM2 local"}, format="json").json()
    assert (renamed["context_window"], renamed["context_window_source"]) == (2048, "server")


def test_a_typed_window_is_the_admins_and_the_server_is_not_asked(api, alice, space, llama_cpp_python):
    saved = api(alice).post(URL, {"name": "SmolLM2", "provider": "openai_compatible",
                                  "base_url": llama_cpp_python.base_url, "model": MODEL, "context_window": 2048,
                                  "max_output_tokens": 512}, format="json").json()
    assert (saved["context_window"], saved["context_window_source"]) == (2048, "manual")
    assert probes(llama_cpp_python) == []


def test_an_output_limit_the_servers_window_cannot_hold_is_refused_naming_it(api, alice, space, llama_cpp_python):
    response = api(alice).post(URL, {"name": "SmolLM2", "provider": "openai_compatible",
                                     "base_url": llama_cpp_python.base_url, "model": MODEL,
                                     "max_output_tokens": 4096}, format="json")
    assert response.status_code == 400
    fields = response.json()["error"]["fields"] if "error" in response.json() else response.json()["fields"]
    assert "max_output_tokens" in fields and "2,048" in fields["max_output_tokens"]


def test_test_connection_says_the_window_the_server_keeps_and_saves_nothing(operator, llama_cpp_python):
    html = operator.post(f"{CONNECTIONS}test-connection/", {
        "provider": "openai_compatible", "base_url": llama_cpp_python.base_url, "model": MODEL},
        HTTP_X_REQUESTED_WITH="XMLHttpRequest").content.decode()
    assert "connection-test-ok" in html and "Its server keeps a window of 2,048 tokens" in html
    assert ModelConnection.objects.count() == 0


def test_the_consoles_discover_panel_shows_the_servers_window_and_its_source(operator, llama_cpp_python):
    html = operator.post(DISCOVER, {"provider": "openai_compatible", "base_url": llama_cpp_python.base_url},
                         HTTP_X_REQUESTED_WITH="XMLHttpRequest").content.decode()
    assert "source-server" in html and "The server" in html
    assert "server keeps 2048" in html and "one probe" in html


def test_a_save_at_a_public_address_asks_nothing(api, alice, space, llama_cpp_python, caplog):
    # A public address is a hosted service: not even its list is read (no request is tried,
    # so none fails and none is logged).
    caplog.set_level("INFO", logger="agentloom.catalog")
    saved = api(alice).post(URL, {"name": "Hosted", "provider": "openai_compatible",
                                  "base_url": "http://93.184.216.34:8000/v1", "model": MODEL}, format="json").json()
    assert saved["context_window_source"] == "platform_default"
    assert not [r for r in caplog.records if "discovery" in r.getMessage() or "window could not" in r.getMessage()]
