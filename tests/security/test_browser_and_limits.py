"""CSRF on browser-session writes, and rate limits on logging in and on asking (SPEC §9, §11)."""
from __future__ import annotations

import pytest
from django.test import Client

from core.accounts.models import ApiToken
from sessions.api import AskThrottle
from sessions.models import Run, Session, SessionMessage
from tests.security.conftest import assert_error_shape, token_for

pytestmark = pytest.mark.django_db


def _browser(user=None) -> Client:
    """A browser: CSRF enforced as in production, with the csrftoken cookie a page would set."""
    client = Client(enforce_csrf_checks=True)
    client.get("/admin/login/")  # any page with a form sets the cookie
    if user is not None:
        client.force_login(user)
    return client


def _written() -> tuple[int, int, int]:
    return Session.objects.count(), Run.objects.count(), SessionMessage.objects.count()


# --- CSRF -----------------------------------------------------------------------------------------


def test_a_browser_session_post_without_the_csrf_token_is_refused_and_writes_nothing(alice, make_session):
    session = make_session(alice)
    browser = _browser(alice)
    before = _written()
    for path, body in ((f"/api/v1/sessions/{session.pk}/questions", {"content": "forged"}),
                       ("/api/v1/sessions", {"agent": session.agent_id}),
                       (f"/api/v1/sessions/{session.pk}/compact", {})):
        response = browser.post(path, body, content_type="application/json")
        error = assert_error_shape(response, 403)
        assert "CSRF" in error["message"]
    assert _written() == before


def test_a_browser_session_post_with_the_csrf_token_is_accepted(alice, make_session):
    session = make_session(alice)
    browser = _browser(alice)
    response = browser.post(f"/api/v1/sessions/{session.pk}/questions", {"content": "real"},
                            content_type="application/json", HTTP_X_CSRFTOKEN=browser.cookies["csrftoken"].value)
    assert response.status_code == 202


def test_a_token_client_needs_no_csrf_token(alice, make_session):
    session = make_session(alice)
    client = Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Token {token_for(alice)}")
    response = client.post(f"/api/v1/sessions/{session.pk}/questions", {"content": "from a script"},
                           content_type="application/json")
    assert response.status_code == 202


@pytest.mark.parametrize("path, data", [
    ("/login/", {"username": "alice", "password": "alice-password-1"}),
    ("/admin/login/", {"username": "alice", "password": "alice-password-1"}),
])
def test_the_login_forms_refuse_a_post_without_the_csrf_token(alice, path, data):
    client = Client(enforce_csrf_checks=True)
    response = client.post(path, data)
    assert response.status_code == 403
    assert "_auth_user_id" not in client.session  # nobody was logged in


def test_the_new_chat_form_refuses_a_post_without_the_csrf_token(alice, agent, version):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    before = _written()
    assert browser.post("/sessions/new", {"agent": agent.pk}).status_code == 403
    assert _written() == before


# --- rate limits ----------------------------------------------------------------------------------


def test_api_login_attempts_are_limited_with_retry_after_even_for_the_right_password(alice, settings):
    client = Client()
    wrong = [client.post("/api/v1/auth/token", {"username": "alice", "password": f"guess-{i}"},
                         content_type="application/json") for i in range(10)]
    assert [r.status_code for r in wrong] == [401] * 10
    assert all(assert_error_shape(r)["code"] == "bad_credentials" for r in wrong)
    blocked = client.post("/api/v1/auth/token", {"username": "alice", "password": "alice-password-1"},
                          content_type="application/json")
    error = assert_error_shape(blocked, 429)
    assert error["code"] == "rate_limited"
    assert 1 <= int(blocked["Retry-After"]) <= 61
    assert not ApiToken.objects.filter(user=alice).exists()


def test_browser_login_failures_are_limited(alice):
    client = Client()
    for i in range(10):
        assert client.post("/login/", {"username": "alice", "password": f"guess-{i}"}).status_code == 200
    blocked = client.post("/login/", {"username": "alice", "password": "alice-password-1"})
    assert blocked.status_code == 429
    assert "_auth_user_id" not in client.session


def test_admin_login_failures_are_limited(django_user_model):
    django_user_model.objects.create_user(username="root", password="root-password-1", is_staff=True)
    client = Client()
    for i in range(10):
        client.post("/admin/login/", {"username": "root", "password": f"guess-{i}"})
    assert client.post("/admin/login/", {"username": "root", "password": "guess-x"}).status_code == 429


def test_asking_is_rate_limited_with_retry_after_and_the_refused_question_writes_nothing(alice, make_session,
                                                                                          monkeypatch):
    monkeypatch.setattr(AskThrottle, "rate", "2/min", raising=False)
    session = make_session(alice)
    client = Client(HTTP_AUTHORIZATION=f"Token {token_for(alice)}")
    url = f"/api/v1/sessions/{session.pk}/questions"
    first = client.post(url, {"content": "one"}, content_type="application/json")
    second = client.post(url, {"content": "two"}, content_type="application/json")
    assert (first.status_code, second.status_code) == (202, 409)
    before = _written()
    third = client.post(url, {"content": "three"}, content_type="application/json")
    assert assert_error_shape(third, 429)["code"] == "rate_limited"
    assert int(third["Retry-After"]) >= 1
    assert _written() == before


def test_supplements_are_rate_limited_with_retry_after_and_the_refused_one_writes_nothing(alice, make_session,
                                                                                         settings):
    from sessions.models import Instance
    from sessions.services.questions import question_ask

    session = make_session(alice)
    run = question_ask(session=session, content="Work on this")
    client = Client(HTTP_AUTHORIZATION=f"Token {token_for(alice)}")
    url = f"/api/v1/runs/{run.pk}/supplements"
    answers = [client.post(url, {"content": f"note {i} " + "x" * 1000}, content_type="application/json")
               for i in range(40)]
    limit = int(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["supplement"].split("/")[0])
    assert [a.status_code for a in answers] == [202] * limit + [429] * (40 - limit)
    refused = answers[-1]
    assert assert_error_shape(refused, 429)["code"] == "rate_limited"
    assert int(refused["Retry-After"]) >= 1
    queued = Instance.objects.get(run=run, key=Instance.MAIN).frame["supplements"]
    assert len(queued) == limit  # the refused ones were never queued


def test_the_api_docs_load_only_from_our_own_origin_under_the_apps_csp(client):
    import re

    from web.security import CONTENT_SECURITY_POLICY

    response = client.get("/api/docs/")
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    page = response.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert assets and all(asset.startswith("/") and not asset.startswith("//") for asset in assets), assets
    assert "<style" not in page  # style-src 'self': no inline style block
    assert all(' src="' in tag for tag in re.findall(r"<script[^>]*>", page))  # no inline script
    for asset in assets:  # every piece of Swagger UI is served here, none from a CDN
        loaded = client.get(asset)
        assert loaded.status_code == 200, asset
        b"".join(loaded.streaming_content) if loaded.streaming else loaded.content


# --- rate limits key on the real peer: X-Forwarded-For is trusted only from configured proxies ---

# Each guess names another username, so only the address's counter fills (a username has one too).
LOGINS = {
    "/api/v1/auth/token": lambda client, i, username="alice", **headers: client.post(
        "/api/v1/auth/token", {"username": username, "password": f"guess-{i}"}, content_type="application/json",
        **headers),
    "/login/": lambda client, i, username="alice", **headers: client.post(
        "/login/", {"username": username, "password": f"guess-{i}"}, **headers),
    "/admin/login/": lambda client, i, username="alice", **headers: client.post(
        "/admin/login/", {"username": username, "password": f"guess-{i}"}, **headers),
}


@pytest.mark.parametrize("path", LOGINS)
def test_varying_x_forwarded_for_does_not_escape_the_login_limit(alice, path):
    client = Client()
    attempt = LOGINS[path]
    for i in range(10):
        assert attempt(client, i, f"nobody-{i}", HTTP_X_FORWARDED_FOR=f"198.51.100.{i}").status_code != 429
    assert attempt(client, 99, HTTP_X_FORWARDED_FOR="203.0.113.250").status_code == 429


@pytest.mark.parametrize("path", LOGINS)
def test_behind_a_configured_proxy_the_limit_keys_on_the_client_it_forwards(alice, path, settings):
    settings.AGENTLOOM_TRUSTED_PROXIES = ["10.0.0.0/8", "fd00::/8"]
    attempt = LOGINS[path]
    via_proxy = Client(REMOTE_ADDR="10.0.0.2")
    for i in range(10):  # the client's own claim comes first; the proxy appends the address it saw
        via_proxy_answer = attempt(via_proxy, i, f"nobody-{i}", HTTP_X_FORWARDED_FOR=f"1.2.3.{i}, 203.0.113.7")
        assert via_proxy_answer.status_code != 429
    assert attempt(via_proxy, 99, HTTP_X_FORWARDED_FOR="203.0.113.7").status_code == 429
    assert attempt(via_proxy, 99, HTTP_X_FORWARDED_FOR="203.0.113.8").status_code != 429  # someone else
    # A peer that is not a configured proxy is its own address, whatever it forwards.
    direct = Client(REMOTE_ADDR="198.51.100.20")
    for i in range(10):
        attempt(direct, i, f"other-{i}", HTTP_X_FORWARDED_FOR=f"203.0.113.{100 + i}")
    assert attempt(direct, 99, HTTP_X_FORWARDED_FOR="203.0.113.199").status_code == 429


def test_a_bad_trusted_proxy_setting_stops_start_up_naming_the_variable():
    import subprocess
    import sys

    from tests.conftest import REPO

    result = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=REPO, capture_output=True,
                            text=True, timeout=60,
                            env={**__import__("os").environ, "DJANGO_SETTINGS_MODULE": "agentloom.settings_test",
                                 "AGENTLOOM_TRUSTED_PROXIES": "10.0.0.0/8,not-an-address"})
    assert result.returncode != 0 and "AGENTLOOM_TRUSTED_PROXIES" in result.stderr


@pytest.mark.django_db(transaction=True)
def test_over_a_real_socket_the_launchers_server_ignores_forwarded_headers_from_loopback(tmp_path):
    """`make run`'s uvicorn used to trust X-Forwarded-For from 127.0.0.1 and hand Django
    the header's address as the peer: every guess came from somebody new."""
    import os
    import subprocess
    import sys
    import time

    import httpx

    from agentloom.launch import web_command
    from tests.conftest import REPO
    from tests.faults.support import free_port, worker_database_url

    port = free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentloom.settings_test", "DATABASE_URL": worker_database_url()}
    env.pop("AGENTLOOM_TRUSTED_PROXIES", None)
    log = open(tmp_path / "web.log", "w")
    web = subprocess.Popen(web_command(python=sys.executable, host="127.0.0.1", port=port, trusted_proxies=[]),
                           cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            deadline = time.monotonic() + 30
            while True:
                try:
                    client.get("/healthz")
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline and web.poll() is None, (tmp_path / "web.log").read_text()
                    time.sleep(0.2)
            statuses = [client.post("/api/v1/auth/token", json={"username": "alice", "password": f"guess-{i}"},
                                    headers={"X-Forwarded-For": f"198.51.100.{i}"}).status_code for i in range(11)]
            client.get("/login/")
            token = client.cookies["csrftoken"]
            pages = [client.post("/login/", data={"username": f"nobody-{i}", "password": f"guess-{i}",
                                                  "csrfmiddlewaretoken": token},
                                 headers={"X-Forwarded-For": f"198.51.100.{i}"}).status_code for i in range(3)]
    finally:
        web.terminate()
        web.wait(timeout=15)
        log.close()
    assert statuses[:10] == [401] * 10 and statuses[10] == 429, statuses
    # The page shares the API's counter: the peer (never the header's address) is locked at every door.
    assert pages == [429] * 3, pages
    # A person starting `make run` sees no warning: Django's ASGI handler has no lifespan
    # protocol, and uvicorn probing it printed "ASGI 'lifespan' protocol appears unsupported";
    # the platform's wrapper answers it (agentloom/collector.py).
    assert "lifespan" not in (tmp_path / "web.log").read_text()
