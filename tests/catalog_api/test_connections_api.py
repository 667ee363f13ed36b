"""/api/v1/model-connections (SPEC §9, CAT-2, CAT-6): reach, validation, provenance, a write-only key."""
from __future__ import annotations

import pytest
from django.db import connection as db

from core.spaces.models import Membership, Space
from core.spaces.services import membership_add
from models_catalog.models import ModelConnection
from tests.catalog_api.conftest import API_KEY, OTHER_KEY, assert_logs_clean, assert_no_secret
from tests.fakes.fake_provider import models_list, route

pytestmark = pytest.mark.django_db
URL = "/api/v1/model-connections"

NEW = {"name": "Local vLLM", "provider": "openai_compatible", "base_url": "http://127.0.0.1:8000/v1",
       "api_key": API_KEY, "model": "qwen3"}


def detail(connection) -> str:
    return f"{URL}/{connection.pk}"


def test_an_admin_creates_a_connection_and_gets_only_the_key_hint(api, alice, space):
    response = api(alice).post(URL, {**NEW, "context_window": 40960, "max_output_tokens": 4096,
                                     "safety_margin_tokens": 1024}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert "api_key" not in body and body["api_key_hint"] == "sk-…0042" and body["has_api_key"] is True
    assert {k: body[k] for k in ("space", "name", "provider", "base_url", "model", "context_window",
                                 "max_output_tokens", "safety_margin_tokens", "effective_input_tokens")} == {
        "space": space.pk, "name": "Local vLLM", "provider": "openai_compatible",
        "base_url": "http://127.0.0.1:8000/v1", "model": "qwen3", "context_window": 40960,
        "max_output_tokens": 4096, "safety_margin_tokens": 1024, "effective_input_tokens": 35840,
    }
    assert (body["context_window_source"], body["max_output_tokens_source"]) == ("manual", "manual")  # no token
    stored = ModelConnection.objects.get(pk=body["id"])
    assert stored.api_key == API_KEY and stored.space_id == space.pk
    assert_no_secret(response.content.decode())


def test_cat2_figures_left_out_are_the_platform_default_flagged_for_checking(api, alice, space):
    body = api(alice).post(URL, NEW, format="json").json()
    assert (body["context_window"], body["max_output_tokens"], body["safety_margin_tokens"]) == (32768, 4096, 1024)
    assert (body["context_window_source"], body["max_output_tokens_source"]) == ("platform_default",) * 2
    assert body["effective_input_tokens"] == 27648


def test_openai_without_a_base_url_gets_the_official_endpoint(api, alice, space):
    body = api(alice).post(URL, {**NEW, "provider": "openai", "base_url": ""}, format="json").json()
    assert body["base_url"] == "https://api.openai.com/v1"


def test_cat2_a_discovery_token_keeps_each_figures_source_until_that_figure_is_changed(api, alice, space,
                                                                                      fake_provider):
    fake_provider.handler = route({"GET /v1/models": models_list([{"id": "qwen3", "max_model_len": 40960}])})
    client = api(alice)
    found = client.post("/api/models/discover", {"provider": "openai_compatible", "base_url": fake_provider.base_url},
                        format="json").json()["models"][0]
    base = {**NEW, "base_url": fake_provider.base_url, "discovery_token": found["discovery_token"]}
    kept = client.post(URL, base, format="json").json()
    assert (kept["context_window"], kept["max_output_tokens"]) == (40960, 4096)  # filled in from the token
    assert (kept["context_window_source"], kept["max_output_tokens_source"]) == ("provider", "platform_default")
    typed = client.post(URL, {**base, "context_window": 32000}, format="json").json()
    assert (typed["context_window_source"], typed["max_output_tokens_source"]) == ("manual", "platform_default")
    same = client.post(URL, {**base, "context_window": 40960, "max_output_tokens": 4096}, format="json").json()
    assert (same["context_window_source"], same["max_output_tokens_source"]) == ("provider", "platform_default")


def test_cat2_a_manifest_token_gives_official_manifest_figures(api, alice, space, fake_provider):
    from models_catalog.serializers import discovery_data
    from models_catalog.services import models_discover
    from tests.catalog.support import public_resolver

    fake_provider.handler = route({"GET /v1/models": models_list(["gpt-4o"])})
    result = models_discover(provider="openai", base_url="https://api.openai.com/v1", api_key=API_KEY,
                             transport=fake_provider.forwarding_transport(), resolver=public_resolver)
    token = discovery_data(result)["models"][0]["discovery_token"]
    body = api(alice).post(URL, {**NEW, "provider": "openai", "base_url": "https://api.openai.com/v1/",
                                 "model": "gpt-4o", "discovery_token": token}, format="json").json()
    assert (body["context_window_source"], body["max_output_tokens_source"]) == ("official_manifest",) * 2
    assert body["manifest_version"] == result.manifest_version
    assert (body["max_output_tokens_maximum"], body["max_output_tokens_maximum_source"]) == (16_384,
                                                                                             "official_manifest")
    assert body["context_window"] == 128_000


@pytest.mark.parametrize(("extra", "field"), [
    ({"discovery_token": "forged"}, "discovery_token"),
    ({"discovery_token": "x" * 40 + ":abc"}, "discovery_token"),
])
def test_cat2_a_forged_discovery_token_is_a_400(api, alice, space, extra, field):
    response = api(alice).post(URL, {**NEW, **extra}, format="json")
    assert response.status_code == 400 and field in response.json()["error"]["fields"]


def test_cat2_a_token_for_another_model_is_refused(api, alice, space, fake_provider):
    fake_provider.handler = route({"GET /v1/models": models_list([{"id": "qwen3", "max_model_len": 40960}])})
    client = api(alice)
    token = client.post("/api/models/discover", {"provider": "openai_compatible", "base_url": fake_provider.base_url},
                        format="json").json()["models"][0]["discovery_token"]
    response = client.post(URL, {**NEW, "base_url": fake_provider.base_url, "model": "llama",
                                 "discovery_token": token}, format="json")
    assert response.status_code == 400 and "discovery_token" in response.json()["error"]["fields"]


@pytest.mark.parametrize(("change", "field"), [
    ({"context_window": 0}, "context_window"),
    ({"context_window": -5}, "context_window"),
    ({"context_window": "lots"}, "context_window"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
    ({"safety_margin_tokens": -1}, "safety_margin_tokens"),
    ({"context_window": 5000, "max_output_tokens": 4096, "safety_margin_tokens": 904}, "context_window"),
    ({"context_window": 10**12}, "context_window"),
    ({"provider": "mistral"}, "provider"),
    ({"base_url": "ftp://models.example/v1"}, "base_url"),
    ({"base_url": "not a url"}, "base_url"),
    ({"base_url": "http://user:pw@models.example/v1"}, "base_url"),
    ({"base_url": ""}, "base_url"),  # openai_compatible has no default endpoint
    ({"provider": "openai", "api_key": ""}, "api_key"),
    ({"api_key": "sk with spaces"}, "api_key"),
    ({"name": ""}, "name"),
    ({"model": ""}, "model"),
    ({"context_window_source": "provider"}, "context_window_source"),  # not writable: provenance is earned
    ({"max_output_tokens_maximum": 10**6}, "max_output_tokens_maximum"),  # nor is a maximum
    ({"space": "acme"}, "space"),
])
def test_bad_connection_input_is_a_400_naming_the_field_and_saves_nothing(api, alice, space, change, field):
    response = api(alice).post(URL, {**NEW, **change}, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert not ModelConnection.objects.exists()
    assert_no_secret(response.content.decode())


def test_members_read_their_spaces_connections_but_cannot_change_them(api, bob, space, make_connection):
    connection = make_connection()
    client = api(bob)
    assert [c["id"] for c in client.get(URL).json()] == [connection.pk]
    assert client.get(detail(connection)).json()["api_key_hint"] == "sk-…0042"
    assert client.post(URL, NEW, format="json").status_code == 403
    assert client.post(URL, {**NEW, "space": space.pk}, format="json").status_code == 403
    assert client.patch(detail(connection), {"name": "Mine"}, format="json").status_code == 403
    assert client.delete(detail(connection)).status_code == 403
    assert ModelConnection.objects.get().name == "Local vLLM"


def test_outsiders_get_404_and_see_nothing(api, mallory, mallory_space, space, make_connection):
    connection = make_connection()
    client = api(mallory)
    assert client.get(URL).json() == []
    for response in (client.get(detail(connection)), client.patch(detail(connection), {"name": "x"}, format="json"),
                     client.delete(detail(connection)),
                     client.post(URL, {**NEW, "space": space.pk}, format="json")):
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert client.get(f"{URL}/999999").status_code == 404
    assert api().get(URL).status_code in (401, 403)


def test_the_list_can_be_filtered_by_space(api, alice, space, mallory, mallory_space, make_connection):
    membership_add(space=mallory_space, user=alice, role=Membership.Role.MEMBER)
    ours, theirs = make_connection(), make_connection(in_space=mallory_space, name="Theirs")
    client = api(alice)
    assert {c["id"] for c in client.get(URL).json()} == {ours.pk, theirs.pk}
    assert [c["id"] for c in client.get(URL, {"space": mallory_space.pk}).json()] == [theirs.pk]
    assert client.get(URL, {"space": "x"}).status_code == 400


def test_someone_administering_two_spaces_must_name_the_space(api, alice, space):
    other = Space.objects.create(name="Second")
    membership_add(space=other, user=alice, role=Membership.Role.ADMIN)
    client = api(alice)
    response = client.post(URL, NEW, format="json")
    assert response.status_code == 400 and "space" in response.json()["error"]["fields"]
    assert client.post(URL, {**NEW, "space": other.pk}, format="json").json()["space"] == other.pk


def test_patch_rotates_the_key_and_updates_the_hint(api, alice, space, make_connection):
    connection = make_connection()
    body = api(alice).patch(detail(connection), {"api_key": OTHER_KEY}, format="json").json()
    assert body["api_key_hint"] == "sk-…9876" and "api_key" not in body
    connection.refresh_from_db()
    assert connection.api_key == OTHER_KEY


def test_patch_without_the_key_keeps_the_stored_key(api, alice, space, make_connection):
    connection = make_connection()
    body = api(alice).patch(detail(connection), {"name": "Renamed"}, format="json").json()
    assert body["name"] == "Renamed" and body["api_key_hint"] == "sk-…0042"
    connection.refresh_from_db()
    assert connection.api_key == API_KEY


def test_an_empty_key_clears_it_where_the_provider_needs_none(api, alice, space, make_connection):
    connection = make_connection()
    body = api(alice).patch(detail(connection), {"api_key": ""}, format="json").json()
    assert body["has_api_key"] is False and body["api_key_hint"] == ""
    connection.refresh_from_db()
    assert connection.api_key == ""


@pytest.mark.parametrize("change", [{"base_url": "http://10.0.0.9:8000/v1"}, {"provider": "deepseek", "base_url": ""}])
def test_cat1_the_stored_key_does_not_follow_a_new_endpoint_without_being_retyped(api, alice, space, make_connection,
                                                                                  change):
    connection = make_connection()
    client = api(alice)
    refused = client.patch(detail(connection), change, format="json")
    assert refused.status_code == 400 and "api_key" in refused.json()["error"]["fields"]
    accepted = client.patch(detail(connection), {**change, "api_key": OTHER_KEY}, format="json")
    assert accepted.status_code == 200, accepted.content


def test_cat2_a_figure_typed_in_a_patch_makes_the_source_manual(api, alice, space, make_connection):
    connection = make_connection()
    assert (connection.context_window_source, connection.max_output_tokens_source) == ("platform_default",) * 2
    client = api(alice)
    unchanged = client.patch(detail(connection), {"context_window": 32768, "safety_margin_tokens": 512},
                             format="json").json()
    # The same figure, and the margin is not a window figure.
    assert (unchanged["context_window_source"], unchanged["max_output_tokens_source"]) == ("platform_default",) * 2
    changed = client.patch(detail(connection), {"max_output_tokens": 2048}, format="json").json()
    assert changed["max_output_tokens"] == 2048
    assert (changed["context_window_source"], changed["max_output_tokens_source"]) == ("platform_default", "manual")


def test_a_patch_that_breaks_the_window_rule_is_a_400_and_changes_nothing(api, alice, space, make_connection):
    connection = make_connection()
    response = api(alice).patch(detail(connection), {"max_output_tokens": 32000}, format="json")
    assert response.status_code == 400 and "context_window" in response.json()["error"]["fields"]
    connection.refresh_from_db()
    assert connection.max_output_tokens == 4096


def test_deleting_a_connection_an_agent_uses_is_a_409(api, alice, space, make_connection, agent, demo_connection):
    unused = make_connection()
    client = api(alice)
    refused = client.delete(detail(demo_connection))
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "in_use"
    assert "Helper" in refused.json()["error"]["message"]
    assert client.delete(detail(unused)).status_code == 204
    assert list(ModelConnection.objects.values_list("pk", flat=True)) == [demo_connection.pk]


def test_deleting_a_connection_only_a_published_version_still_reads_is_a_409(api, alice, space, make_connection,
                                                                             agent, version):
    from agents.services import agent_update

    replacement = make_connection()
    old = agent.model_connection
    agent_update(agent=agent, data={"model_connection": replacement})
    response = api(alice).delete(detail(old))
    assert response.status_code == 409


def test_cat6_the_key_is_in_no_response_page_log_or_clear_text_column(api, alice, bob, space, all_logs):
    client = api(alice)
    created = client.post(URL, NEW, format="json")
    pk = created.json()["id"]
    responses = [
        created,
        client.get(URL),
        client.get(f"{URL}/{pk}"),
        client.patch(f"{URL}/{pk}", {"api_key": OTHER_KEY, "name": "Again"}, format="json"),
        client.get(f"{URL}/{pk}", HTTP_ACCEPT="text/html"),  # the browsable API page
        client.post(URL, {**NEW, "api_key": OTHER_KEY, "context_window": 0}, HTTP_ACCEPT="text/html", format="json"),
        api(bob).get(f"{URL}/{pk}"),
    ]
    for response in responses:
        assert_no_secret(response.content.decode(), API_KEY, OTHER_KEY)
    with db.cursor() as cursor:
        cursor.execute("SELECT api_key FROM models_catalog_modelconnection")
        raw = repr(cursor.fetchall())
    assert_no_secret(raw, API_KEY, OTHER_KEY)
    assert_logs_clean(all_logs, API_KEY, OTHER_KEY)


def test_cat6_a_key_that_cannot_go_in_a_header_is_refused_by_the_service_too(space, alice):
    """The admin form saves through the same service as the API: a non-ASCII key is a field error."""
    from core.errors import ValidationFailed
    from models_catalog.models import ModelConnection
    from models_catalog.services import connection_create

    with pytest.raises(ValidationFailed) as refused:
        connection_create(space=space, data={"name": "K", "provider": "openai_compatible",
                                             "base_url": "http://127.0.0.1:9/v1", "model": "m",
                                             "api_key": "sk-clé-secrète"})
    assert "api_key" in refused.value.fields
    assert not ModelConnection.objects.exists()


def test_cat3_the_default_safety_margin_follows_the_window_and_a_typed_one_stays(api, alice, space):
    small = api(alice).post(URL, {**NEW, "context_window": 2048, "max_output_tokens": 256}, format="json").json()
    assert small["safety_margin_tokens"] == 64 and small["effective_input_tokens"] == 1728
    grown = api(alice).patch(f"{URL}/{small['id']}", {"context_window": 8192}, format="json").json()
    assert grown["safety_margin_tokens"] == 256  # still the default, for the new window
    typed = api(alice).patch(f"{URL}/{small['id']}", {"safety_margin_tokens": 500}, format="json").json()
    assert typed["safety_margin_tokens"] == 500
    kept = api(alice).patch(f"{URL}/{small['id']}", {"context_window": 16384}, format="json").json()
    assert kept["safety_margin_tokens"] == 500  # the admin's choice is not overwritten


def test_cat3_a_new_window_forgets_what_a_refusal_taught(api, alice, space):
    body = api(alice).post(URL, {**NEW, "context_window": 4000, "max_output_tokens": 500}, format="json").json()
    ModelConnection.objects.filter(pk=body["id"]).update(learned_context_window=3000, learned_window_note="x")
    assert ModelConnection.objects.get(pk=body["id"]).effective_context_window() == 3000
    shown = api(alice).get(f"{URL}/{body['id']}").json()
    # CAT-9: the default margin follows the learned window (125 for 4,000; 93 for 3,000).
    assert shown["learned_context_window"] == 3000 and shown["effective_input_tokens"] == 3000 - 500 - 93
    api(alice).patch(f"{URL}/{body['id']}", {"context_window": 3500}, format="json")
    connection = ModelConnection.objects.get(pk=body["id"])
    assert connection.learned_context_window is None and connection.effective_context_window() == 3500


def test_cat3_figures_above_a_known_models_maximum_are_refused_naming_the_field_and_the_maximum(api, alice, space):
    official = {**NEW, "provider": "openai", "base_url": "", "model": "gpt-4o"}
    too_much = api(alice).post(URL, {**official, "max_output_tokens": 100_000}, format="json")
    assert too_much.status_code == 400
    error = too_much.json()["error"]
    assert error["fields"]["max_output_tokens"].startswith("at most 16,384 for gpt-4o")
    too_wide = api(alice).post(URL, {**official, "context_window": 200_000}, format="json")
    assert too_wide.status_code == 400 and "at most 128,000" in too_wide.json()["error"]["fields"]["context_window"]
    assert not ModelConnection.objects.exists()
    fine = api(alice).post(URL, {**official, "max_output_tokens": 16_384}, format="json")
    assert fine.status_code == 201, fine.content
    patched = api(alice).patch(f"{URL}/{fine.json()['id']}", {"max_output_tokens": 20_000}, format="json")
    assert patched.status_code == 400 and "max_output_tokens" in patched.json()["error"]["fields"]
    assert ModelConnection.objects.get().max_output_tokens == 16_384


def test_cat3_a_model_nobody_knows_keeps_what_the_admin_enters(api, alice, space):
    for model, base_url in (("gpt-4o", "http://127.0.0.1:8000/v1"), ("my-local-model", "http://127.0.0.1:8000/v1")):
        body = api(alice).post(URL, {**NEW, "model": model, "base_url": base_url, "context_window": 1_000_000,
                                     "max_output_tokens": 100_000}, format="json")
        assert body.status_code == 201, body.content
