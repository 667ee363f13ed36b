"""POST /api/models/discover (CAT-1 … CAT-6, SPEC §9) against a fake provider on a real socket."""
from __future__ import annotations

import pytest

from models_catalog.manifest import load_manifest
from models_catalog.models import ModelConnection
from models_catalog.serializers import discovery_data
from models_catalog.services import models_discover
from tests.catalog.support import public_resolver
from tests.catalog_api.conftest import API_KEY, OTHER_KEY, PROVIDER_SECRET, assert_logs_clean, assert_no_secret
from tests.fakes.fake_provider import error, models_list, route

pytestmark = pytest.mark.django_db
URL = "/api/models/discover"

VLLM_LIST = models_list([
    {"id": "Qwen/Qwen3-8B", "object": "model", "owned_by": "vllm", "max_model_len": 40960},
    {"id": "BAAI/bge-m3", "object": "model", "owned_by": "vllm", "max_model_len": 8192},
])


def vllm(fake_provider):
    fake_provider.handler = route({"GET /v1/models": VLLM_LIST})
    return fake_provider


def test_cat1_an_admin_lists_openai_compatible_models_with_figures_from_the_list(api, alice, space, fake_provider):
    vllm(fake_provider)
    response = api(alice).post(URL, {"provider": "openai_compatible", "base_url": fake_provider.base_url,
                                     "api_key": API_KEY}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["manifest_version"] is None and body["warnings"] == []
    qwen, bge = body["models"]
    assert {k: qwen[k] for k in ("id", "context_window", "max_output_tokens", "source", "chat_capable")} == {
        "id": "Qwen/Qwen3-8B", "context_window": 40960, "max_output_tokens": 4096, "source": "platform_default",
        "chat_capable": True,
    }
    # Per-figure sources: the window came from the provider, the output maximum is unknown.
    assert (qwen["context_window_source"], qwen["max_output_tokens_source"]) == ("provider", "platform_default")
    assert qwen["manifest_version"] is None and qwen["discovery_token"]
    assert bge["chat_capable"] is False and "Not offered for chat" in bge["note"]
    assert fake_provider.requests[0].headers["authorization"] == f"Bearer {API_KEY}"
    assert_no_secret(response.content.decode())


def test_cat1_discovery_never_saves_a_key_or_a_connection(api, alice, space, fake_provider):
    vllm(fake_provider)
    api(alice).post(URL, {"provider": "openai_compatible", "base_url": fake_provider.base_url, "api_key": API_KEY},
                    format="json")
    assert not ModelConnection.objects.exists()


def test_cat2_the_openai_official_endpoint_gets_manifest_figures_at_the_service_level(fake_provider):
    """The API cannot inject a transport; the service can, like tests/catalog does."""
    fake_provider.handler = route({"GET /v1/models": models_list(["gpt-4o", "gpt-4o-2024-99-99"])})
    result = models_discover(provider="openai", base_url="", api_key=API_KEY,
                             transport=fake_provider.forwarding_transport(), resolver=public_resolver)
    data = discovery_data(result)
    models = {m["id"]: m for m in data["models"]}
    version = load_manifest().version
    assert data["manifest_version"] == version and data["base_url"] == "https://api.openai.com/v1"
    assert models["gpt-4o"]["source"] == "official_manifest"
    assert models["gpt-4o"]["manifest_version"] == version
    assert (models["gpt-4o"]["context_window"], models["gpt-4o"]["provider_max_output_tokens"]) == (128_000, 16_384)
    assert models["gpt-4o-2024-99-99"]["source"] == "platform_default"  # exact ids only
    assert fake_provider.requests[0].headers["host"] == "api.openai.com"


@pytest.mark.usefixtures("alice_is_staff")  # an operator reads the cause (models_catalog/reachability.py)
def test_cat5_a_wrong_key_is_a_400_auth_without_the_key_or_the_providers_words(api, alice, space, fake_provider,
                                                                               all_logs):
    fake_provider.handler = lambda request: error(401, f"{PROVIDER_SECRET}: bad key {API_KEY}", code="invalid_api_key")
    response = api(alice).post(URL, {"provider": "openai_compatible", "base_url": fake_provider.base_url,
                                     "api_key": API_KEY}, format="json")
    assert response.status_code == 400
    body = response.json()["error"]
    assert body["code"] == "auth" and "api_key" in body["fields"]
    assert_no_secret(response.content.decode(), API_KEY, PROVIDER_SECRET)
    assert_logs_clean(all_logs, API_KEY, PROVIDER_SECRET)


@pytest.mark.usefixtures("alice_is_staff")  # an operator reads the cause (models_catalog/reachability.py)
@pytest.mark.parametrize(("reply", "code"), [
    (error(500, PROVIDER_SECRET), "provider_unavailable"),
    (error(429, PROVIDER_SECRET, retry_after=3), "rate_limited"),
    (error(429, PROVIDER_SECRET, code="insufficient_quota"), "quota_exceeded"),
])
def test_cat5_provider_side_failures_are_a_502_in_the_one_error_shape(api, alice, space, fake_provider, reply, code):
    fake_provider.handler = lambda request: reply
    response = api(alice).post(URL, {"provider": "openai", "base_url": fake_provider.base_url, "api_key": API_KEY},
                               format="json")
    assert response.status_code == 502
    assert response.json()["error"]["code"] == code and set(response.json()) == {"error"}
    assert_no_secret(response.content.decode(), API_KEY, PROVIDER_SECRET)


def test_cat1_a_provider_that_needs_a_key_gets_a_400_naming_api_key_before_any_call(api, alice, space, fake_provider):
    response = api(alice).post(URL, {"provider": "openai", "base_url": fake_provider.base_url}, format="json")
    assert response.status_code == 400 and response.json()["error"]["fields"].keys() == {"api_key"}
    assert fake_provider.requests == []


def test_cat1_resource_id_reuses_the_stored_key_when_provider_and_base_url_are_unchanged(
        api, alice, space, fake_provider, make_connection):
    vllm(fake_provider)
    connection = make_connection(base_url=fake_provider.base_url + "/")
    response = api(alice).post(URL, {"provider": "openai_compatible", "base_url": fake_provider.base_url,
                                     "resource_id": connection.pk}, format="json")
    assert response.status_code == 200, response.content
    assert fake_provider.requests[0].headers["authorization"] == f"Bearer {API_KEY}"
    assert_no_secret(response.content.decode())


def test_cat1_a_typed_key_wins_over_the_stored_one(api, alice, space, fake_provider, make_connection):
    vllm(fake_provider)
    connection = make_connection(base_url=fake_provider.base_url)
    api(alice).post(URL, {"provider": "openai_compatible", "base_url": fake_provider.url + "/other",
                          "api_key": OTHER_KEY, "resource_id": connection.pk}, format="json")
    assert fake_provider.requests[0].headers["authorization"] == f"Bearer {OTHER_KEY}"


@pytest.mark.parametrize(("change", "field"), [
    ({"base_url": "http://127.0.0.1:1/v1"}, "base_url"),
    ({"provider": "deepseek"}, "provider"),
])
def test_cat1_the_stored_key_never_follows_a_changed_provider_or_base_url(
        api, alice, space, fake_provider, make_connection, change, field):
    connection = make_connection(base_url=fake_provider.base_url)
    body = {"provider": "openai_compatible", "base_url": fake_provider.base_url, "resource_id": connection.pk, **change}
    response = api(alice).post(URL, body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "key_reuse_refused"
    assert list(response.json()["error"]["fields"]) == [field]
    assert fake_provider.requests == []


def test_cat1_another_spaces_resource_id_is_a_404_and_nothing_is_sent(
        api, alice, space, mallory, mallory_space, fake_provider, make_connection):
    theirs = make_connection(in_space=mallory_space, base_url=fake_provider.base_url)
    response = api(alice).post(URL, {"provider": "openai_compatible", "base_url": fake_provider.base_url,
                                     "resource_id": theirs.pk}, format="json")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert fake_provider.requests == []


def test_cat1_members_and_people_without_a_space_may_not_discover(
        api, bob, space, make_connection, fake_provider, django_user_model):
    vllm(fake_provider)
    connection = make_connection(base_url=fake_provider.base_url)
    body = {"provider": "openai_compatible", "base_url": fake_provider.base_url, "api_key": API_KEY}
    assert api(bob).post(URL, body, format="json").status_code == 403
    assert api(bob).post(URL, {**body, "resource_id": connection.pk}, format="json").status_code == 403
    assert api(bob).post(URL, {**body, "space": space.pk}, format="json").status_code == 403
    loner = django_user_model.objects.create_user(username="loner", password="x")
    assert api(loner).post(URL, body, format="json").status_code == 403
    assert api().post(URL, body, format="json").status_code in (401, 403)
    assert fake_provider.requests == []


def test_cat1_an_explicit_space_outside_the_callers_reach_is_a_404(api, alice, space, mallory_space, fake_provider):
    response = api(alice).post(URL, {"provider": "openai_compatible", "base_url": fake_provider.base_url,
                                     "space": mallory_space.pk}, format="json")
    assert response.status_code == 404


def test_cat5_private_endpoints_are_refused_when_the_operator_turns_them_off(api, alice, space, fake_provider,
                                                                           settings):
    settings.ALLOW_PRIVATE_MODEL_ENDPOINTS = False
    response = api(alice).post(URL, {"provider": "openai_compatible", "base_url": fake_provider.base_url},
                               format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unsafe_url" and "base_url" in response.json()["error"]["fields"]
    assert fake_provider.requests == []


def test_cat5_metadata_addresses_are_refused_even_with_private_endpoints_allowed(api, alice, space):
    response = api(alice).post(URL, {"provider": "openai_compatible", "base_url": "http://169.254.169.254/v1"},
                               format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "unsafe_url"


@pytest.mark.parametrize(("body", "field"), [
    ({"provider": "mistral", "base_url": "http://x"}, "provider"),
    ({"base_url": "http://x"}, "provider"),
    ({"provider": "openai_compatible", "base_url": 12}, "base_url"),
    ({"provider": "openai_compatible", "base_url": "http://x", "apikey": "typo"}, "apikey"),
    ({"provider": "openai_compatible", "base_url": "http://x", "resource_id": "one"}, "resource_id"),
])
def test_cat1_bad_discovery_input_is_a_400_naming_the_field(api, alice, space, body, field):
    response = api(alice).post(URL, body, format="json")
    assert response.status_code == 400 and field in response.json()["error"]["fields"]


def test_cat6_the_key_is_in_no_log_record_of_a_discovery(api, alice, space, fake_provider, make_connection, all_logs):
    vllm(fake_provider)
    connection = make_connection(base_url=fake_provider.base_url)
    client = api(alice)
    client.post(URL, {"provider": "openai_compatible", "base_url": fake_provider.base_url, "api_key": OTHER_KEY},
                format="json")
    client.post(URL, {"provider": "openai_compatible", "base_url": fake_provider.base_url,
                      "resource_id": connection.pk}, format="json")
    assert len(fake_provider.requests) >= 2
    assert_logs_clean(all_logs, API_KEY, OTHER_KEY)


def test_discovery_is_rate_limited_per_user(api, alice, space, fake_provider, settings):
    vllm(fake_provider)
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "discover": "2/min"}}
    client = api(alice)
    body = {"provider": "openai_compatible", "base_url": fake_provider.base_url}
    codes = [client.post(URL, body, format="json").status_code for _ in range(3)]
    assert codes == [200, 200, 429]
