"""``/healthz`` tells anyone whether the service is up, and only operators what it runs on (SPEC §11).

A probe carries no credentials, so the status (200/503) and the state of each part stay
public; each worker's host and pid, its heartbeat age and run count, the broker kind and
the stale interval are for a staff user (console session or API token) only.
"""
from __future__ import annotations

import pytest
from django.test import Client

from agentloom.health import PUBLIC_FIELDS
from runloop.housekeeping import Housekeeper
from tests.security.conftest import token_for

pytestmark = pytest.mark.django_db

WORKER = "worker-host-7:4242"


@pytest.fixture
def beating():
    Housekeeper(name=WORKER).tick(first=True)  # what a worker writes when it is ready


@pytest.fixture
def olivia(django_user_model):
    return django_user_model.objects.create_user(username="olivia", password="olivia-password-1", is_staff=True)


def _logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _assert_public_only(response, status: int) -> None:
    assert response.status_code == status
    body = response.json()
    assert set(body) == set(PUBLIC_FIELDS), body
    assert "worker-host-7" not in response.content.decode() and "4242" not in response.content.decode()


def test_an_anonymous_probe_gets_the_status_and_not_the_workers(beating):
    response = Client().get("/healthz")
    _assert_public_only(response, 200)
    assert response.json() == {"status": "ok", "database": "ok", "broker": response.json()["broker"], "worker": "ok",
                               "web": "ok"}


def test_an_anonymous_probe_still_gets_503_when_no_worker_beats():
    response = Client().get("/healthz")
    _assert_public_only(response, 503)
    assert response.json()["status"] == "unavailable" and response.json()["worker"] == "none_seen"


def test_a_signed_in_person_who_is_not_staff_gets_only_the_status(beating, alice):
    _assert_public_only(_logged_in(alice).get("/healthz"), 200)
    _assert_public_only(Client().get("/healthz", HTTP_AUTHORIZATION=f"Token {token_for(alice)}"), 200)


def test_a_wrong_token_gets_only_the_status_and_no_error(beating):
    _assert_public_only(Client().get("/healthz", HTTP_AUTHORIZATION="Token not-a-real-token"), 200)


@pytest.mark.parametrize("how", ["session", "token"])
def test_a_staff_operator_gets_the_workers_by_session_or_token(beating, olivia, how):
    client = _logged_in(olivia) if how == "session" else Client(HTTP_AUTHORIZATION=f"Token {token_for(olivia)}")
    body = client.get("/healthz").json()
    (worker,) = body["workers"]
    assert worker["name"] == WORKER and worker["runs"] == 0
    assert {"broker_kind", "worker_heartbeat_age_seconds", "worker_stale_after_seconds"} <= set(body)
