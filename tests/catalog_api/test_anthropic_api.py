"""The Anthropic provider through the catalog API: discovery and connections (CAT-1, CAT-6, CAT-7)."""
from __future__ import annotations

import pytest

from models_catalog.models import ModelConnection
from tests.catalog_api.conftest import API_KEY, assert_no_secret
from tests.fakes.anthropic import AnthropicFake

pytestmark = pytest.mark.django_db


def test_cat7_an_admin_discovers_claude_models_with_their_figures(api, alice, space, fake_provider):
    fake_provider.handler = AnthropicFake(api_key=API_KEY, page_size=1)
    response = api(alice).post("/api/models/discover", {"provider": "anthropic", "base_url": fake_provider.base_url,
                                                        "api_key": API_KEY}, format="json")
    assert response.status_code == 200, response.content
    models = {m["id"]: m for m in response.json()["models"]}
    assert {k: models["claude-opus-5"][k] for k in ("context_window", "max_output_tokens", "source", "chat_capable")} \
        == {"context_window": 1_000_000, "max_output_tokens": 4096, "source": "provider", "chat_capable": True}
    assert len(fake_provider.requests) == 2 and fake_provider.requests[0].headers["x-api-key"] == API_KEY
    assert_no_secret(response.content.decode())


@pytest.mark.usefixtures("alice_is_staff")  # an operator reads the cause (models_catalog/reachability.py)
def test_cat7_a_refused_anthropic_key_is_a_400_on_the_key_that_echoes_nothing(api, alice, space, fake_provider):
    fake_provider.handler = AnthropicFake(api_key="sk-ant-the-right-one")
    response = api(alice).post("/api/models/discover", {"provider": "anthropic", "base_url": fake_provider.base_url,
                                                        "api_key": API_KEY}, format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "auth"
    assert "api_key" in response.json()["error"]["fields"]
    assert_no_secret(response.content.decode())


def test_cat6_an_anthropic_connection_needs_a_key_and_defaults_to_the_official_endpoint(api, alice, space):
    data = {"name": "Claude", "provider": "anthropic", "model": "claude-opus-5"}
    refused = api(alice).post("/api/v1/model-connections", data, format="json")
    assert refused.status_code == 400 and "api_key" in refused.json()["error"]["fields"]
    created = api(alice).post("/api/v1/model-connections", {**data, "api_key": API_KEY}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["base_url"] == "https://api.anthropic.com/v1"
    assert ModelConnection.objects.get().provider == "anthropic"
    assert_no_secret(created.content.decode())


def test_cat1_cat5_alice_discovers_with_the_sdks_base_url_saves_and_chat_reaches_v1_messages(api, alice, space,
                                                                                           fake_provider):
    """Anthropic's docs and ANTHROPIC_BASE_URL spell the base URL without /v1; the connection
    keeps the /v1 form discovery answered at, and says so, so chat is not a 404."""
    from models_catalog.client import collect, get_chat_client
    from models_catalog.serializers import discovery_data
    from models_catalog.services import models_discover
    from models_catalog.target import model_target
    from tests.catalog.support import public_resolver
    from tests.fakes.anthropic import Reply

    fake_provider.handler = AnthropicFake(api_key=API_KEY, replies=[Reply(text="Hello from Claude.")])
    forwarded = {"transport": fake_provider.forwarding_transport(), "resolver": public_resolver}
    # The API cannot inject a transport; the service it calls can (as in test_discover_api).
    found = discovery_data(models_discover(provider="anthropic", base_url="https://api.anthropic.com",
                                           api_key=API_KEY, **forwarded))
    assert found["base_url"] == "https://api.anthropic.com/v1"
    assert any("a connection saved from this discovery keeps that base URL" in w for w in found["warnings"])
    opus = next(m for m in found["models"] if m["id"] == "claude-opus-5")

    created = api(alice).post("/api/v1/model-connections", {
        "name": "Claude", "provider": "anthropic", "base_url": "https://api.anthropic.com", "model": "claude-opus-5",
        "api_key": API_KEY, "discovery_token": opus["discovery_token"]}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["base_url"] == "https://api.anthropic.com/v1"  # the save says what is stored
    # Taken with the token (a token for another endpoint is a 400): both spellings are one endpoint.
    assert (body["context_window"], body["max_output_tokens"]) == (opus["context_window"], opus["max_output_tokens"])
    connection = ModelConnection.objects.get(pk=body["id"])
    assert connection.base_url == "https://api.anthropic.com/v1"

    target = model_target(provider=connection.provider, model=connection.model, base_url=connection.base_url,
                          api_key=connection.api_key)
    with get_chat_client(provider=target.provider, base_url=target.base_url, api_key=target.api_key,
                         **forwarded) as client:
        end = collect(client.stream_chat({"model": target.model, "max_tokens": 64,
                                          "messages": [{"role": "user", "content": "Hi"}]}))
    assert end.text == "Hello from Claude."
    chat = fake_provider.requests[-1]
    assert (chat.method, chat.path, chat.headers["host"]) == ("POST", "/v1/messages", "api.anthropic.com")
    assert_no_secret(created.content.decode())


def test_cat6_either_form_of_an_anthropic_base_url_is_one_endpoint_so_the_stored_key_stays(api, alice, space,
                                                                                        fake_provider):
    """A connection saved before base URLs were completed (stored without /v1) is called at
    /v1, and writing its /v1 form is no move to another endpoint: the key stays (CAT-6)."""
    from models_catalog.client import collect, get_chat_client
    from models_catalog.models import api_key_hint
    from tests.catalog.support import public_resolver

    legacy = ModelConnection.objects.create(space=space, name="Claude", provider="anthropic",
                                            base_url="https://api.anthropic.com", api_key=API_KEY,
                                            api_key_hint=api_key_hint(API_KEY), model="claude-opus-5")
    fake_provider.handler = AnthropicFake(api_key=API_KEY)
    with get_chat_client(provider="anthropic", base_url=legacy.base_url, api_key=legacy.api_key,
                         transport=fake_provider.forwarding_transport(), resolver=public_resolver) as client:
        assert collect(client.stream_chat({"model": "claude-opus-5", "max_tokens": 64,
                                           "messages": [{"role": "user", "content": "Hi"}]})).text == "ok"
    assert fake_provider.requests[-1].path == "/v1/messages"

    moved = api(alice).patch(f"/api/v1/model-connections/{legacy.pk}", {"base_url": "https://api.anthropic.com/v1/"},
                             format="json")
    assert moved.status_code == 200, moved.content
    legacy.refresh_from_db()
    assert legacy.base_url == "https://api.anthropic.com/v1" and legacy.api_key == API_KEY
    elsewhere = api(alice).patch(f"/api/v1/model-connections/{legacy.pk}",
                                 {"base_url": "https://gateway.example/anthropic"}, format="json")
    assert elsewhere.status_code == 400 and "api_key" in elsewhere.json()["error"]["fields"]
