"""The login page's first-time hint says where the admin's password came from (issue: a
new user's first hour): `make run` prints a generated password only when
DJANGO_SUPERUSER_PASSWORD did not set one, so the page must not send a person looking for
output that was never printed."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_the_hint_points_at_the_printed_password_when_make_run_generated_it(client, monkeypatch):
    monkeypatch.delenv("DJANGO_SUPERUSER_PASSWORD", raising=False)
    html = client.get("/login/").content.decode()
    assert "printed the admin's username and a generated password" in html
    assert "DJANGO_SUPERUSER_PASSWORD" not in html


def test_the_hint_names_the_variables_when_they_set_the_password(client, monkeypatch):
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "correct horse battery staple")
    html = client.get("/login/").content.decode()
    assert "DJANGO_SUPERUSER_USERNAME" in html and "DJANGO_SUPERUSER_PASSWORD" in html
    assert "printed" not in html
    assert "correct horse battery staple" not in html
