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
