"""``/favicon.ico``, which every browser asks for: a small icon, not a 404, and the chat's
and the console's pages link it."""
from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_favicon_ico_leads_to_a_small_icon():
    response = Client().get("/favicon.ico", follow=True)
    assert response.status_code == 200
    assert response.redirect_chain and response.redirect_chain[0][1] == 301
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert body[:4] == b"\x00\x00\x01\x00" and len(body) < 4096  # an ICO file, and a small one


def test_the_chat_and_the_console_link_the_icon(alice, django_user_model):
    chat = Client()
    chat.force_login(alice)
    page = chat.get("/").content.decode()
    assert 'rel="icon" href="/static/agentloom/favicon' in page
    staff = django_user_model.objects.create_superuser(username="ada", password="ada-password-1")
    console = Client()
    console.force_login(staff)
    page = console.get("/admin/").content.decode()
    assert 'rel="icon" href="/static/agentloom/favicon' in page
