"""Every console page carries the Content-Security-Policy (SPEC §11).

The console shows decrypted conversations, so it gets the chat's policy: scripts and
styles from our own origin only, no inline script. Every registered model's list, add
and change page, the console's own pages and the login page are asked; a page that
answers 403 or 404 carries it too. ``tests/browser/test_console_csp.py`` loads them in
Chromium and listens for violations.
"""
from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import NoReverseMatch, reverse

from sessions.models import Run
from sessions.services.questions import question_ask
from web.security import CONTENT_SECURITY_POLICY

pytestmark = pytest.mark.django_db


@pytest.fixture
def story(alice, make_session, version):
    session = make_session(alice)
    run = question_ask(session=session, content="Hello")
    return {"session": session, "run": run, "version": version}


def console_paths(story) -> list[str]:
    """Every page of the console this story reaches: index, each model's list, add and
    first change page, and the custom pages of sessions, runs and versions."""
    paths = [reverse("admin:index"), reverse("admin:password_change")]
    for model in admin.site._registry:
        opts = model._meta
        paths.append(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))
        paths.append(reverse(f"admin:{opts.app_label}_{opts.model_name}_add"))
        first = model._default_manager.order_by("pk").first()
        if first is not None:
            paths.append(reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[first.pk]))
    session, run, version = story["session"], story["run"], story["version"]
    for name, pk in (("agent_sessions_session_records", session.pk), ("agent_sessions_session_compactions", session.pk),
                     ("agent_sessions_run_events", run.pk), ("agent_sessions_run_context", run.pk),
                     ("agents_agentversion_usage", version.pk), ("agents_agentversion_usage_csv", version.pk)):
        try:
            paths.append(reverse(f"admin:{name}", args=[pk]))
        except NoReverseMatch:  # a page that moved: the listing above still covers its model
            continue
    return paths


def test_every_console_page_carries_the_content_security_policy(console, story):
    paths = console_paths(story)
    assert len(paths) > 30 and any(path.endswith("/records/") for path in paths)
    assert Run.objects.exists()
    for path in paths:
        response = console.get(path)
        assert response.status_code in (200, 302, 403, 404), (path, response.status_code)
        assert response.get("Content-Security-Policy") == CONTENT_SECURITY_POLICY, path
        assert "script-src 'self'" in response["Content-Security-Policy"] and "unsafe-inline" not in \
            response["Content-Security-Policy"]


def test_the_console_login_page_and_an_anonymous_redirect_carry_it_too():
    client = Client()
    for path in ("/admin/login/", "/admin/", "/admin/agent_sessions/session/"):
        assert client.get(path).get("Content-Security-Policy") == CONTENT_SECURITY_POLICY, path


def test_the_chat_and_the_api_keep_their_own_headers(alice):
    client = Client()
    assert client.get("/login/").get("Content-Security-Policy") == CONTENT_SECURITY_POLICY
    assert client.get("/healthz").get("Content-Security-Policy") is None
