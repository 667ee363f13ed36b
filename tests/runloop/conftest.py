"""Fixtures for run-loop tests: an agent on the strict fake provider, helpers to ask and run."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from sessions.services import events as events_module
from tests.fakes.anthropic_bridge import AnthropicBridge
from tests.fakes.fake_provider import FakeProvider
from tests.fakes.strict import StrictProvider

FAKE_KEY = "sk-fake-provider-key-0123456789"
# The provider behind each dialect a suite can run against (CAT-7): the OpenAI dialect
# through an OpenAI-compatible connection, Anthropic's through its native Messages API.
DIALECT_PROVIDERS = {"openai": ("openai_compatible", "fake-model"), "anthropic": ("anthropic", "claude-fake-4")}


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


@pytest.fixture
def strict(fake, dialect):
    """Install a strict handler: ``strict.handler = ...`` scripts the answers (OpenAI-shaped
    in every dialect: the Anthropic bridge translates both ways)."""
    front = AnthropicBridge if dialect == "anthropic" else StrictProvider
    wrapper = front(lambda request: None, api_key=FAKE_KEY)
    fake.handler = wrapper
    return wrapper


@pytest.fixture
def fake_agent_factory(space, alice, fake, dialect):
    from agents.services import agent_create, agent_publish
    from models_catalog.models import ModelConnection

    provider, model = DIALECT_PROVIDERS[dialect]
    connection = ModelConnection.objects.create(space=space, name="Fake", provider=provider,
                                                base_url=fake.base_url, api_key=FAKE_KEY, model=model,
                                                context_window=32_768, max_output_tokens=1_024)

    def make(tools=("calculator", "current_time", "read_record", "delegate"), limits=None, window=None,
             provider=None, model=None, context_policy=None, memory=False, tool_overrides=None):
        if window is not None:
            connection.context_window = window
        if provider is not None and dialect == "openai":  # on Anthropic's wire the provider is Anthropic
            connection.provider = provider
        if model is not None and dialect == "openai":
            connection.model = model
        connection.save()
        agent = agent_create(space=space, name="Fake agent", model_connection=connection, instructions="Be brief.",
                             tools=list(tools), limits=limits, context_policy=context_policy, created_by=alice)
        if memory or tool_overrides:  # MEM-1: memory is the draft's flag, frozen at publish
            agent.memory, agent.tool_overrides = memory, tool_overrides or {}
            agent.save(update_fields=["memory", "tool_overrides"])
        return agent, agent_publish(agent=agent, published_by=alice)

    return make


@pytest.fixture
def fake_session(fake_agent_factory, space, alice):
    from sessions.models import Session

    def make(**agent_options):
        agent, version = fake_agent_factory(**agent_options)
        return Session.objects.create(space=space, user=alice, agent=agent, version=version)

    return make


@pytest.fixture
def extra_sink():
    """Add an event sink for one test (the sinks list is the public extension point)."""
    added = []

    def add(sink):
        events_module.sinks.append(sink)
        added.append(sink)

    yield add
    for sink in added:
        events_module.sinks.remove(sink)
