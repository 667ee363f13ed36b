"""The README's first ten minutes are true: the addresses it gives answer, and every
control it tells a new user to click is on the page it says (a README that names a button
the product does not have sends people looking for it)."""
from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from agents.models import Agent
from tests.conftest import REPO

pytestmark = pytest.mark.django_db


def first_ten_minutes() -> str:
    readme = (REPO / "README.md").read_text()
    match = re.search(r"^## The first ten minutes\n(.*?)^## ", readme, re.S | re.M)
    assert match, "the README leads with its first ten minutes"
    return match.group(1)


@pytest.fixture
def admin_client(monkeypatch) -> Client:
    monkeypatch.delenv("DJANGO_SUPERUSER_USERNAME", raising=False)
    call_command("bootstrap_demo", verbosity=0)
    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    return client


def test_the_addresses_it_gives_answer(admin_client):
    section = first_ten_minutes()
    for path in ("/", "/admin/", "/api/docs/"):
        assert f"8000{path}>" in section or f"`{path}`" in section, path
        assert admin_client.get(path).status_code == 200, path
    assert admin_client.get("/healthz").status_code in (200, 503)  # 503 until a worker has beaten


def test_every_control_it_names_is_on_its_page(admin_client):
    section = first_ten_minutes()
    agent = Agent.objects.get(name="Demo assistant")
    pages = {
        "New chat": "/",
        "Test connection": "/admin/models_catalog/modelconnection/add/",
        "Discover models": "/admin/models_catalog/modelconnection/add/",
        "Save and continue editing": f"/admin/agents/agent/{agent.pk}/change/",
        "Publish": f"/admin/agents/agent/{agent.pk}/change/",
    }
    named = set(re.findall(r"\*\*([^*]+?)\*\*", section))
    for control, path in pages.items():
        assert control in named, f"the README no longer walks through {control!r}"
        html = admin_client.get(path).content.decode()
        assert control in html, f"{control!r} is not on {path}"
