"""Fixtures of the catalog and agents API tests: a fake provider, API clients, factories.

People come from tests/conftest.py: alice administers Acme, bob is a member there,
mallory is an outsider with her own space.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests.fakes.fake_provider import fake_provider  # noqa: F401  (the fixture)

API_KEY = "sk-live-CATALOG-API-SECRET-0042"
OTHER_KEY = "sk-live-ROTATED-SECRET-9876"
PROVIDER_SECRET = "PROVIDER-SAYS-SECRET-do-not-echo"
DISCOVER = "/admin/models_catalog/modelconnection/discover/"
CONNECTIONS = "/admin/models_catalog/modelconnection/"



@pytest.fixture
def api() -> Callable[..., APIClient]:
    def make(user: Any = None) -> APIClient:
        client = APIClient()
        if user is not None:
            client.force_authenticate(user)
        return client

    return make


@pytest.fixture
def operator(django_user_model) -> Client:
    """The admin console, logged in as a superuser."""
    user = django_user_model.objects.create_superuser(username="root", password="root-password-1")
    client = Client()
    client.force_login(user)
    return client


def connection_form(space, **overrides):
    """The admin console's connection form as a browser posts it."""
    return {"space": space.pk, "name": "Local", "provider": "openai_compatible", "base_url": "http://127.0.0.1:8000/v1",
            "api_key": "", "model": "qwen3", "context_window": "", "max_output_tokens": "",
            "safety_margin_tokens": "", "discovery_token": "", **overrides}


@pytest.fixture
def make_connection(space) -> Callable[..., Any]:
    """A connection made through the service, as an admin would make it. The server is
    not asked for its window here (``ask_server``, CAT-8: test_window_from_server.py), so
    a test counts only the requests it makes itself."""
    from models_catalog.services import connection_create

    def make(*, in_space: Any = None, ask_server: bool = False, **data: Any):
        values = {"name": "Local vLLM", "provider": "openai_compatible", "base_url": "http://127.0.0.1:8000/v1",
                  "model": "qwen3", "api_key": API_KEY, **data}
        return connection_create(space=in_space or space, data=values, ask_server=ask_server)

    return make


@pytest.fixture
def all_logs(caplog) -> pytest.LogCaptureFixture:
    """Every log record at every level, from every logger (httpx and httpcore included)."""
    caplog.set_level(logging.DEBUG)
    return caplog


def assert_no_secret(text: str, *secrets: str) -> None:
    for secret in secrets or (API_KEY,):
        assert secret not in text, f"secret {secret[:8]}… leaked"


def assert_logs_clean(caplog: pytest.LogCaptureFixture, *secrets: str) -> None:
    assert caplog.records, "expected some log records to inspect"
    for record in caplog.records:
        assert_no_secret(record.getMessage() + repr(record.args) + str(record.exc_text or ""), *secrets)
