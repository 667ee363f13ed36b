"""What the server keeps, carried from discovery to the connection, the admin and runs (CAT-7).

An Ollama server on a real socket keeps 4,096 tokens of a 131,072-token model (its
default context: no num_ctx, not loaded). The admin may type a larger window, but is
warned, and neither the budget nor a published version relies on more than 4,096.
"""
from __future__ import annotations

import pytest

from agents.services import agent_create, agent_publish
from models_catalog.models import ModelConnection
from tests.catalog_api.conftest import CONNECTIONS, DISCOVER, connection_form
from tests.fakes.fake_provider import models_list, ollama_ps, ollama_show, ollama_tags, ollama_version, route

pytestmark = pytest.mark.django_db
URL = "/api/v1/model-connections"
MODEL = "llama3.2:latest"


@pytest.fixture
def ollama_server(fake_provider):
    fake_provider.handler = route({
        "GET /v1/models": models_list([MODEL]),
        "GET /api/tags": ollama_tags([MODEL]),
        "POST /api/show": ollama_show(context_length=131072),
        "GET /api/ps": ollama_ps({}),
        "GET /api/version": ollama_version("0.12.6"),
    })
    return fake_provider


def discovered(client, server) -> dict:
    response = client.post("/api/models/discover", {"provider": "openai_compatible", "base_url": server.base_url},
                           format="json")
    assert response.status_code == 200, response.content
    return response.json()["models"][0]


def new_connection(server, found: dict, **extra) -> dict:
    return {"name": "Ollama", "provider": "openai_compatible", "base_url": server.base_url, "model": MODEL,
            "discovery_token": found["discovery_token"], **extra}


def test_discovery_reports_what_the_ollama_server_keeps_with_its_provenance(api, alice, space, ollama_server):
    found = discovered(api(alice), ollama_server)
    assert (found["context_window"], found["model_context_window"]) == (4096, 131072)
    assert (found["server_context_window"], found["server_context_source"]) == (4096, "ollama_default")
    assert found["context_window_source"] == "server"  # CAT-8: the server said it


def test_a_window_typed_above_what_the_server_keeps_is_kept_but_never_relied_on(api, alice, space, ollama_server):
    client = api(alice)
    found = discovered(client, ollama_server)
    body = client.post(URL, new_connection(ollama_server, found, context_window=32768, max_output_tokens=2048,
                                           safety_margin_tokens=1024), format="json").json()
    assert (body["context_window"], body["context_window_source"]) == (32768, "manual")
    # The 2,048 the token attests (half the small window): that figure keeps its own source.
    assert (found["max_output_tokens"], body["max_output_tokens_source"]) == (2048, "platform_default")
    assert (body["server_context_window"], body["server_context_source"]) == (4096, "ollama_default")
    assert (body["effective_context_window"], body["effective_input_tokens"]) == (4096, 1024)


def test_a_published_version_freezes_the_window_the_server_keeps(api, alice, space, ollama_server):
    client = api(alice)
    found = discovered(client, ollama_server)
    created = client.post(URL, new_connection(ollama_server, found, context_window=32768, max_output_tokens=2048),
                          format="json").json()
    connection = ModelConnection.objects.get(pk=created["id"])
    agent = agent_create(space=space, name="Local", model_connection=connection, instructions="Hi.", tools=[],
                         created_by=alice)
    draft = client.get(f"/api/v1/agents/{agent.pk}").json()["budget"]
    assert (draft["context_window"], draft["effective_input_tokens"]) == (4096, 1024)
    version = agent_publish(agent=agent, published_by=alice)
    assert version.context_window == 4096


def test_a_window_with_no_input_room_within_what_the_server_keeps_is_a_400(api, alice, space, ollama_server):
    client = api(alice)
    found = discovered(client, ollama_server)
    response = client.post(URL, new_connection(ollama_server, found, context_window=32768, max_output_tokens=4096),
                           format="json")
    assert response.status_code == 400
    assert "server keeps only 4,096" in response.json()["error"]["fields"]["context_window"]
    assert not ModelConnection.objects.exists()


def test_another_model_without_a_token_forgets_what_the_server_kept_for_the_old_one(api, alice, space,
                                                                                   ollama_server):
    client = api(alice)
    created = client.post(URL, new_connection(ollama_server, discovered(client, ollama_server)), format="json").json()
    assert created["server_context_window"] == 4096
    kept = client.patch(f"{URL}/{created['id']}", {"name": "Renamed"}, format="json").json()
    assert kept["server_context_window"] == 4096
    moved = client.patch(f"{URL}/{created['id']}", {"model": "qwen3:8b", "context_window": 32768}, format="json")
    assert moved.json()["server_context_window"] is None and moved.json()["effective_context_window"] == 32768


def test_the_admin_discovery_results_warn_that_the_server_keeps_less_than_the_model(operator,
                                                                                    ollama_server):
    html = operator.post(DISCOVER, {"provider": "openai_compatible", "base_url": ollama_server.base_url},
                         HTTP_X_REQUESTED_WITH="XMLHttpRequest").content.decode()
    assert "server-context-warning" in html
    assert "The model supports 131072 tokens but the server keeps only 4096" in html
    assert "Ollama&#x27;s default context" in html and 'data-context-window="4096"' in html


def saved_in_the_console(operator, space, server, *, context_window: str):
    """Discover, then add the connection in the console with ``context_window`` typed."""
    from models_catalog.serializers import discovery_data
    from models_catalog.services import models_discover

    found = discovery_data(models_discover(provider="openai_compatible", base_url=server.base_url,
                                           api_key=""))["models"][0]
    form = connection_form(space, base_url=server.base_url, model=MODEL, context_window=context_window,
                           max_output_tokens="2048", discovery_token=found["discovery_token"])
    return operator.post(f"{CONNECTIONS}add/", form, follow=True)


def test_the_admin_change_page_warns_when_the_window_exceeds_what_the_server_keeps(operator, space, ollama_server):
    saved = saved_in_the_console(operator, space, ollama_server, context_window="32768")
    warning = "The configured window (32,768 tokens) exceeds what the server keeps (4,096): requests use 4,096"
    assert warning in saved.content.decode()  # the message after saving
    page = operator.get(f"{CONNECTIONS}{ModelConnection.objects.get().pk}/change/").content.decode()
    assert "server-context-warning" in page and warning in page and "Effective input" in page
    assert "1,024 tokens" in page  # 4,096 - 2,048 - 1,024


def test_the_admin_change_page_shows_no_warning_within_what_the_server_keeps(operator, space, ollama_server):
    saved = saved_in_the_console(operator, space, ollama_server, context_window="4096")
    assert saved.redirect_chain and "exceeds what the server keeps" not in saved.content.decode()
    page = operator.get(f"{CONNECTIONS}{ModelConnection.objects.get().pk}/change/").content.decode()
    assert "4,096 tokens per request" in page and "server-context-warning" not in page
