"""Fixtures for tool-server tests: SDK-built MCP servers on loopback, and the API as Alice."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from rest_framework.test import APIClient

from tests.fakes.mcp_servers import ToolServerApp


@pytest.fixture
def mcp_server() -> Iterator[ToolServerApp]:
    """A Streamable HTTP server behind a bearer token."""
    with ToolServerApp() as server:
        yield server


@pytest.fixture
def sse_server() -> Iterator[ToolServerApp]:
    """A server that speaks only the older HTTP+SSE transport."""
    with ToolServerApp(transport="sse") as server:
        yield server


@pytest.fixture
def as_alice(alice, space) -> APIClient:
    client = APIClient()
    client.force_authenticate(alice)
    return client


@pytest.fixture
def as_bob(bob, space) -> APIClient:
    client = APIClient()
    client.force_authenticate(bob)
    return client


@pytest.fixture
def as_mallory(mallory, mallory_space) -> APIClient:
    client = APIClient()
    client.force_authenticate(mallory)
    return client


@pytest.fixture
def registered(as_alice, mcp_server):
    """Alice's space has registered the server as ``tests``."""
    from toolservers.models import ToolServer

    response = as_alice.post("/api/v1/tool-servers", {"name": "tests", "url": mcp_server.url,
                                                      "headers": mcp_server.headers}, format="json")
    assert response.status_code == 201, response.json()
    return ToolServer.objects.get(pk=response.json()["id"])


# The run loop's fixtures: an agent on the strict fake provider (both wires where a module asks).
from tests.runloop.conftest import FAKE_KEY, extra_sink, fake, strict  # noqa: E402,F401


@pytest.fixture
def server_agent(space, alice, fake, dialect, registered):
    """``make(tools, overrides=None)``: a published agent of Alice's space on the fake provider
    that chooses the given tools (built-ins and ``tests.<tool>``); returns its session."""
    from agents.services import agent_create, agent_publish
    from models_catalog.models import ModelConnection
    from sessions.models import Session
    from tests.runloop.conftest import DIALECT_PROVIDERS

    provider, model = DIALECT_PROVIDERS[dialect]
    connection = ModelConnection.objects.create(space=space, name="Fake", provider=provider, base_url=fake.base_url,
                                                api_key=FAKE_KEY, model=model, context_window=32_768,
                                                max_output_tokens=1_024)

    def make(tools, overrides=None, limits=None):
        agent = agent_create(space=space, name="Tool user", model_connection=connection, instructions="Use tools.",
                             tools=list(tools), tool_overrides=overrides, limits=limits, created_by=alice)
        version = agent_publish(agent=agent, published_by=alice)
        return Session.objects.create(space=space, user=alice, agent=agent, version=version)

    return make
