"""The connection form's Test connection and discovery failures that say what was tried
(SPEC §10, CAT-1, CAT-5): each against the fake OpenAI-compatible server on a loopback
socket, a port nothing listens on, and a server that never answers."""
from __future__ import annotations

import socket

import pytest

from models_catalog.admin import ModelConnectionAdmin
from models_catalog.http import HttpLimits
from models_catalog.models import ModelConnection
from tests.catalog_api.conftest import API_KEY, CONNECTIONS, DISCOVER, PROVIDER_SECRET, assert_no_secret
from tests.fakes.fake_provider import Hang, RawResponse, error, models_list, route

pytestmark = pytest.mark.django_db
TEST = f"{CONNECTIONS}test-connection/"
XHR = {"HTTP_X_REQUESTED_WITH": "XMLHttpRequest"}


def closed_port_url() -> str:
    """A loopback base URL where nothing listens: connecting is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def qwen(fake_provider):
    fake_provider.handler = route({"GET /v1/models": models_list(["Qwen/Qwen3-8B", "Qwen/Qwen3-32B"])})


def test_it_says_the_model_is_listed_and_saves_nothing(operator, fake_provider):
    qwen(fake_provider)
    html = operator.post(TEST, {"provider": "openai_compatible", "base_url": fake_provider.base_url,
                                "api_key": API_KEY, "model": "Qwen/Qwen3-8B"}, **XHR).content.decode()
    assert "connection-test-ok" in html and "Qwen/Qwen3-8B among them" in html and "with the key entered" in html
    assert fake_provider.base_url in html and "lists 2 models" in html
    assert fake_provider.requests[0].headers["authorization"] == f"Bearer {API_KEY}"
    assert ModelConnection.objects.count() == 0
    assert_no_secret(html)


def test_it_names_the_closest_ids_when_the_model_is_not_listed(operator, fake_provider):
    qwen(fake_provider)
    html = operator.post(TEST, {"provider": "openai_compatible", "base_url": fake_provider.base_url,
                                "model": "Qwen/Qwen3-8b"}, **XHR).content.decode()
    assert "connection-test-failed" in html and "but not Qwen/Qwen3-8b" in html and "Did you mean Qwen/Qwen3-8B" in html


def test_it_uses_the_stored_key_of_the_connection_being_edited_and_changes_nothing(operator, fake_provider,
                                                                                  make_connection):
    qwen(fake_provider)
    connection = make_connection(base_url=fake_provider.base_url, model="Qwen/Qwen3-8B")
    before = ModelConnection.objects.filter(pk=connection.pk).values().get()
    html = operator.post(TEST, {"provider": "openai_compatible", "base_url": fake_provider.base_url,
                                "model": "Qwen/Qwen3-32B", "connection": connection.pk}, **XHR).content.decode()
    assert "with the stored key" in html and "Qwen/Qwen3-32B among them" in html
    assert fake_provider.requests[0].headers["authorization"] == f"Bearer {API_KEY}"
    assert ModelConnection.objects.filter(pk=connection.pk).values().get() == before
    assert_no_secret(html)


def test_a_refused_connection_names_the_url_and_says_it_was_refused(operator):
    url = closed_port_url()
    html = operator.post(TEST, {"provider": "openai_compatible", "base_url": url, "api_key": API_KEY,
                                "model": "qwen3"}, **XHR).content.decode()
    assert "connection-test-failed" in html and f"GET {url}/models" in html
    assert "the connection was refused" in html
    assert_no_secret(html)


def test_a_server_that_never_answers_is_given_up_on_within_the_bound(operator, fake_provider, monkeypatch):
    monkeypatch.setattr(ModelConnectionAdmin, "connection_test_limits",
                        HttpLimits(connect_timeout=5.0, read_timeout=0.5, total_timeout=5.0))
    fake_provider.handler = lambda request: Hang(seconds=5.0)
    html = operator.post(TEST, {"provider": "openai", "base_url": fake_provider.base_url, "api_key": API_KEY,
                                "model": "gpt-4o"}, **XHR).content.decode()
    assert f"GET {fake_provider.base_url}/models" in html and "connected, but no answer within 0.5 s" in html
    assert_no_secret(html)


def test_a_refused_key_says_so_without_the_providers_words_or_the_key(operator, fake_provider):
    fake_provider.handler = lambda request: error(401, f"{PROVIDER_SECRET} {API_KEY}", code="invalid_api_key")
    html = operator.post(TEST, {"provider": "openai", "base_url": fake_provider.base_url, "api_key": API_KEY,
                                "model": "gpt-4o"}, **XHR).content.decode()
    assert "rejected the credentials" in html and "HTTP 401 Unauthorized" in html
    assert_no_secret(html, API_KEY, PROVIDER_SECRET)


def test_the_offline_demo_needs_no_connection(operator, fake_provider):
    html = operator.post(TEST, {"provider": "demo", "base_url": "", "model": "demo"}, **XHR).content.decode()
    assert "connection-test-ok" in html and "nothing to connect to" in html
    assert fake_provider.requests == []


def test_a_private_address_is_refused_when_private_endpoints_are_off(operator, fake_provider, settings):
    settings.ALLOW_PRIVATE_MODEL_ENDPOINTS = False
    qwen(fake_provider)
    html = operator.post(TEST, {"provider": "openai_compatible", "base_url": fake_provider.base_url,
                                "model": "Qwen/Qwen3-8B"}, **XHR).content.decode()
    assert "connection-test-failed" in html and "not contacted" in html and fake_provider.requests == []


def test_people_outside_the_console_cannot_test(alice, fake_provider):
    from django.test import Client

    client = Client()
    client.force_login(alice)
    response = client.post(TEST, {"provider": "openai_compatible", "base_url": fake_provider.base_url})
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert fake_provider.requests == []


def test_the_connection_form_has_the_test_button(operator):
    html = operator.get(f"{CONNECTIONS}add/").content.decode()
    assert 'id="test-connection"' in html and TEST in html


# --- discovery failures say what was tried ----------------------------------------------

def test_a_discovery_that_gets_an_html_page_says_it_was_not_json_at_which_url(operator, fake_provider):
    fake_provider.handler = lambda request: RawResponse(b"<html>" + PROVIDER_SECRET.encode() + b"</html>",
                                                        headers={"Content-Type": "text/html"})
    html = operator.post(DISCOVER, {"provider": "openai", "base_url": fake_provider.url, "api_key": API_KEY},
                         **XHR).content.decode()
    assert f"GET {fake_provider.url}/models: HTTP 200 OK, but text/html" in html and "not JSON" in html
    assert_no_secret(html, API_KEY, PROVIDER_SECRET)


def test_a_discovery_status_error_names_the_status_and_every_url_tried(operator, fake_provider):
    fake_provider.handler = lambda request: error(404, PROVIDER_SECRET)
    html = operator.post(DISCOVER, {"provider": "openai_compatible", "base_url": fake_provider.base_url},
                         **XHR).content.decode()
    assert (f"GET {fake_provider.base_url}/models and GET {fake_provider.url}/api/tags: "
            "HTTP 404 Not Found (application/json") in html
    assert_no_secret(html, PROVIDER_SECRET)


def test_a_base_url_without_v1_gets_a_404_and_the_hint_to_add_it(operator, fake_provider):
    qwen(fake_provider)  # serves /v1/models only, as OpenAI-compatible servers do
    said = (f"The server answered 404 at {fake_provider.url}/models. OpenAI-compatible servers usually serve "
            f"under /v1 — try {fake_provider.url}/v1.")
    discovered = operator.post(DISCOVER, {"provider": "openai_compatible", "base_url": fake_provider.url},
                               **XHR).content.decode()
    tested = operator.post(TEST, {"provider": "openai_compatible", "base_url": fake_provider.url, "model": "m"},
                           **XHR).content.decode()
    assert said in discovered and said in tested and "connection-test-failed" in tested
    # What it says works: the same form with the suggested base lists the models.
    again = operator.post(DISCOVER, {"provider": "openai_compatible", "base_url": f"{fake_provider.url}/v1"},
                          **XHR).content.decode()
    assert "Qwen/Qwen3-8B" in again and "answered 404" not in again


@pytest.mark.parametrize(("path", "suggested"), [("/v1/chat/completions", "/v1"), ("/v1/v1", "/v1")])
def test_a_base_url_past_v1_gets_the_hint_to_end_it_at_v1(operator, fake_provider, path, suggested):
    qwen(fake_provider)
    html = operator.post(DISCOVER, {"provider": "openai_compatible", "base_url": fake_provider.url + path},
                         **XHR).content.decode()
    assert f"The server answered 404 at {fake_provider.url}{path}/models." in html
    assert f"try {fake_provider.url}{suggested}." in html


def test_a_404_under_a_right_looking_base_gets_no_path_hint(operator, fake_provider):
    fake_provider.handler = lambda request: error(404, "nothing here")
    html = operator.post(DISCOVER, {"provider": "openai_compatible", "base_url": fake_provider.base_url},
                         **XHR).content.decode()
    assert "HTTP 404" in html and "try http" not in html


def test_a_refused_discovery_says_which_url_and_why(operator):
    url = closed_port_url()
    html = operator.post(DISCOVER, {"provider": "openai_compatible", "base_url": url, "api_key": API_KEY},
                         **XHR).content.decode()
    assert f"GET {url}/models and GET {url.removesuffix('/v1')}/api/tags: the connection was refused" in html
    assert_no_secret(html)
