"""CAT-6: a stored key only ever goes to the endpoint it was entered for.

Reproduces the review's finding: a connection at endpoint A with key K1, an agent
published on it, then the connection moved to endpoint B with a new key K2. The published
version froze A; the key is read live, so its runs would have sent K2 to A.
"""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from agents.services import agent_create, agent_publish
from models_catalog.models import ModelConnection
from runloop.loop import run_execute
from sessions.models import Run, Session
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import FakeProvider, chat_stream

pytestmark = pytest.mark.django_db(transaction=True)

K1 = "sk-entered-for-endpoint-A-000000001"
K2 = "sk-entered-for-endpoint-B-000000002"


def _ask(session) -> Run:
    run = question_ask(session=session, content="Which endpoint answers?")
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_cat6_a_version_whose_connection_moved_is_refused_and_no_key_reaches_the_old_endpoint(space, alice):
    with FakeProvider(lambda r: chat_stream(["From A."])) as a, FakeProvider(lambda r: chat_stream(["From B."])) as b:
        connection = ModelConnection.objects.create(space=space, name="Moving", provider="openai_compatible",
                                                    base_url=a.base_url, api_key=K1, model="m")
        agent = agent_create(space=space, name="Pinned", model_connection=connection, instructions="Hi.",
                             tools=[], created_by=alice)
        version = agent_publish(agent=agent, published_by=alice)
        session = Session.objects.create(space=space, user=alice, agent=agent, version=version)
        assert _ask(session).status == Run.Status.COMPLETED
        assert a.requests[-1].headers["authorization"] == f"Bearer {K1}"

        client = APIClient()
        client.force_authenticate(alice)
        moved = client.patch(f"/api/v1/model-connections/{connection.pk}", {"base_url": b.base_url, "api_key": K2},
                             format="json")
        assert moved.status_code == 200, moved.content
        sent_to_a = len(a.requests)
        # The save asked B for its window (CAT-8), with the key entered for B and nothing else.
        assert all(r.headers.get("authorization") == f"Bearer {K2}" for r in b.requests)
        asked_b = len(b.requests)

        run = _ask(session)
        assert run.status == Run.Status.FAILED and run.error["code"] == "endpoint_changed"
        assert run.error["retryable"] is False and "publish the agent again" in run.error["message"]
        assert len(a.requests) == sent_to_a and len(b.requests) == asked_b  # K2 never left for A (nor for B unasked)
        assert K2 not in str(run.error)

        # The admin republishes: the new version's sessions reach B with the key entered for B.
        republished = agent_publish(agent=agent, published_by=alice)
        fresh = Session.objects.create(space=space, user=alice, agent=agent, version=republished)
        assert _ask(fresh).status == Run.Status.COMPLETED
        assert [r.headers["authorization"] for r in b.requests[asked_b:]] == [f"Bearer {K2}"]
        assert all(r.headers["authorization"] == f"Bearer {K1}" for r in a.requests)
