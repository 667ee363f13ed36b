"""A model's known maxima, kept with the connection and checked on every write (CAT-3), and
one source per figure (CAT-2).

Alice, the Acme space admin, discovers servers on a real socket shaped as the real ones:
vLLM lists ``max_model_len`` (40,960 for Qwen3-8B) and no output limit; OpenRouter lists
``top_provider.max_completion_tokens`` (8,192). She saves with the discovery result; later
writes — a PATCH, a create without the token, the console form — cannot pass the maxima
that discovery told, and each figure says where it came from.
"""
from __future__ import annotations

import pytest
from django.core import signing
from django.forms.models import model_to_dict

from models_catalog.models import ModelConnection
from tests.catalog_api.conftest import CONNECTIONS, connection_form
from tests.fakes.fake_provider import models_list, route
from tests.fakes.servers import openrouter_model, vllm_models

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("space")]
URL = "/api/v1/model-connections"
QWEN = "Qwen/Qwen3-8B"
ROUTED = "vendor/model"


@pytest.fixture
def vllm(fake_provider):
    fake_provider.handler = route({"GET /v1/models": vllm_models({QWEN: 40960})})
    return fake_provider


def discovered(client, *, base_url: str) -> dict:
    response = client.post("/api/models/discover", {"provider": "openai_compatible", "base_url": base_url},
                           format="json")
    assert response.status_code == 200, response.content
    return response.json()["models"][0]


def saved(client, *, base_url: str, found: dict, **extra) -> dict:
    response = client.post(URL, {"name": "Lab", "provider": "openai_compatible", "base_url": base_url,
                                 "model": found["id"], "discovery_token": found["discovery_token"], **extra},
                           format="json")
    assert response.status_code == 201, response.content
    return response.json()


def row(pk: int) -> dict:
    return model_to_dict(ModelConnection.objects.get(pk=pk))


def test_a_window_from_vllms_max_model_len_reads_as_the_providers_and_the_output_as_its_own(api, alice, vllm):
    client = api(alice)
    body = saved(client, base_url=vllm.base_url, found=discovered(client, base_url=vllm.base_url))
    assert (body["context_window"], body["context_window_source"]) == (40960, "provider")
    assert (body["max_output_tokens"], body["max_output_tokens_source"]) == (4096, "platform_default")
    assert (body["context_window_maximum"], body["context_window_maximum_source"]) == (40960, "provider")
    # vLLM publishes no output limit: none is known, so none is enforced.
    assert (body["max_output_tokens_maximum"], body["max_output_tokens_maximum_source"]) == (None, "")
    assert client.get(f"{URL}/{body['id']}").json() == body


def test_alice_cannot_patch_a_window_beyond_what_vllm_serves_and_nothing_changes(api, alice, vllm):
    client = api(alice)
    body = saved(client, base_url=vllm.base_url, found=discovered(client, base_url=vllm.base_url))
    before = row(body["id"])
    refused = client.patch(f"{URL}/{body['id']}", {"context_window": 131072, "name": "Bigger"}, format="json")
    assert refused.status_code == 400, refused.content
    message = refused.json()["error"]["fields"]["context_window"]
    assert message.startswith(f"at most 40,960 for {QWEN} (its context window, as the provider published it")
    assert "discover the models again" in message  # what to do when the server now serves more
    assert row(body["id"]) == before
    fine = client.patch(f"{URL}/{body['id']}", {"context_window": 40960, "max_output_tokens": 8192}, format="json")
    assert fine.status_code == 200, fine.content
    assert (fine.json()["context_window_source"], fine.json()["max_output_tokens_source"]) == ("provider", "manual")


def test_a_create_without_a_token_is_checked_against_what_another_connection_stored(api, alice, vllm):
    client = api(alice)
    saved(client, base_url=vllm.base_url, found=discovered(client, base_url=vllm.base_url))
    untokened = {"name": "Copy", "provider": "openai_compatible", "base_url": vllm.base_url + "/", "model": QWEN}
    refused = client.post(URL, {**untokened, "context_window": 131072}, format="json")
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"]["context_window"].startswith(f"at most 40,960 for {QWEN}")
    assert ModelConnection.objects.count() == 1
    copy = client.post(URL, {**untokened, "context_window": 32768}, format="json")
    assert copy.status_code == 201, copy.content
    # The copy stores the maximum it was checked against, and its typed window is manual.
    assert (copy.json()["context_window_maximum"], copy.json()["context_window_maximum_source"]) == (40960,
                                                                                                      "provider")
    assert copy.json()["context_window_source"] == "manual"


def test_another_spaces_connections_teach_mallory_nothing(api, alice, mallory, mallory_space, vllm):
    client = api(alice)
    saved(client, base_url=vllm.base_url, found=discovered(client, base_url=vllm.base_url))
    theirs = api(mallory).post(URL, {"name": "Mine", "provider": "openai_compatible", "base_url": vllm.base_url,
                                     "model": QWEN, "context_window": 131072}, format="json")
    assert theirs.status_code == 201, theirs.content
    assert theirs.json()["context_window_maximum"] is None


def test_alice_cannot_patch_an_output_limit_beyond_the_providers_maximum(api, alice, fake_provider):
    fake_provider.handler = route({"GET /api/v1/models": models_list([
        openrouter_model(ROUTED, context_length=131072, max_completion_tokens=8192)])})
    base_url = fake_provider.url + "/api/v1"
    client = api(alice)
    found = discovered(client, base_url=base_url)
    body = saved(client, base_url=base_url, found=found)
    assert (body["max_output_tokens_maximum"], body["max_output_tokens_maximum_source"]) == (8192, "provider")
    assert (body["context_window_source"], body["max_output_tokens_source"]) == ("provider", "provider")
    before = row(body["id"])
    refused = client.patch(f"{URL}/{body['id']}", {"max_output_tokens": 16000}, format="json")
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"]["max_output_tokens"].startswith(
        f"at most 8,192 for {ROUTED} (its maximum output, as the provider published it at discovery)")
    assert row(body["id"]) == before


def test_a_new_discovery_is_what_raises_a_stored_maximum(api, alice, vllm):
    client = api(alice)
    body = saved(client, base_url=vllm.base_url, found=discovered(client, base_url=vllm.base_url))
    vllm.handler = route({"GET /v1/models": vllm_models({QWEN: 131072})})  # restarted with --max-model-len 131072
    again = discovered(client, base_url=vllm.base_url)
    raised = client.patch(f"{URL}/{body['id']}", {"discovery_token": again["discovery_token"]}, format="json")
    assert raised.status_code == 200, raised.content
    assert (raised.json()["context_window"], raised.json()["context_window_maximum"]) == (131072, 131072)
    assert raised.json()["context_window_source"] == "provider"


def test_another_model_without_a_token_carries_no_maximum_of_the_old_one(api, alice, vllm):
    client = api(alice)
    body = saved(client, base_url=vllm.base_url, found=discovered(client, base_url=vllm.base_url))
    moved = client.patch(f"{URL}/{body['id']}", {"model": "llama-3.1-8b", "context_window": 131072}, format="json")
    assert moved.status_code == 200, moved.content
    assert (moved.json()["context_window_maximum"], moved.json()["context_window_source"]) == (None, "manual")
    # The output figure was still the platform's default: moving the model leaves it so.
    assert moved.json()["max_output_tokens_source"] == "platform_default"


def test_a_token_issued_before_per_figure_sources_still_saves_with_its_maxima(api, alice, vllm):
    """Tokens live a day: one issued by the previous release carries one combined source
    ("s") and maxima without their sources."""
    from models_catalog.selectors import effective_base_url
    from models_catalog.validation import TOKEN_SALT

    old = signing.dumps({
        "p": "openai_compatible", "u": effective_base_url(provider="openai_compatible", base_url=vllm.base_url),
        "m": QWEN, "cw": 40960, "mo": 4096, "s": "platform_default", "mv": "", "img": False, "sc": None, "ss": "",
        "mx": None, "mw": 40960}, salt=TOKEN_SALT, compress=True)
    body = saved(api(alice), base_url=vllm.base_url, found={"id": QWEN, "discovery_token": old})
    assert (body["context_window_source"], body["max_output_tokens_source"]) == ("platform_default",) * 2
    assert (body["context_window_maximum"], body["context_window_maximum_source"]) == (40960, "provider")


def test_the_console_form_refuses_a_window_beyond_the_stored_maximum_on_its_field(api, alice, operator, space, vllm):
    client = api(alice)
    body = saved(client, base_url=vllm.base_url, found=discovered(client, base_url=vllm.base_url))
    before = row(body["id"])
    form = connection_form(space, name="Lab", base_url=vllm.base_url, model=QWEN, context_window="131072",
                           max_output_tokens="4096")
    form.pop("space")  # read-only once the connection exists
    page = operator.post(f"{CONNECTIONS}{body['id']}/change/", form)
    assert page.status_code == 200
    assert f"at most 40,960 for {QWEN}" in str(page.context["adminform"].form.errors["context_window"])
    assert row(body["id"]) == before
    added = operator.post(f"{CONNECTIONS}add/", connection_form(space, name="Copy", base_url=vllm.base_url,
                                                                model=QWEN, context_window="131072"))
    assert "context_window" in added.context["adminform"].form.errors
    assert ModelConnection.objects.count() == 1


def test_the_console_shows_each_figures_source_and_the_models_maximum(api, alice, operator, vllm):
    client = api(alice)
    body = saved(client, base_url=vllm.base_url, found=discovered(client, base_url=vllm.base_url))
    page = operator.get(f"{CONNECTIONS}{body['id']}/change/").content.decode()
    assert "Provider. The model allows at most 40,960 (as the provider published it at discovery)." in page
    assert ("Platform default (check it). No maximum is known for this model (discover its models to learn it)."
            in page)
    listing = operator.get(CONNECTIONS).content.decode()
    assert "40,960<br><small>Provider</small>" in listing
    assert "4,096<br><small>Platform default (check it)</small>" in listing


@pytest.mark.django_db(transaction=True)
def test_the_migration_copies_the_old_combined_source_to_each_figure(space):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from models_catalog.services import connection_create

    made = {source: connection_create(space=space, data={
        "name": source, "provider": "openai_compatible", "base_url": "http://127.0.0.1:8000/v1", "model": "qwen3",
        "context_window": 40960}).pk for source in ("provider", "official_manifest", "platform_default", "manual")}
    executor = MigrationExecutor(connection)
    executor.migrate([("models_catalog", "0006_provider_names_from_the_registry")])
    with connection.cursor() as cursor:  # rows as the earlier version wrote them
        for source, pk in made.items():
            cursor.execute("UPDATE models_catalog_modelconnection SET figures_source = %s WHERE id = %s", [source, pk])
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())  # every app: going back took the apps built on it back too
    for source, pk in made.items():
        migrated = ModelConnection.objects.get(pk=pk)
        assert (migrated.context_window_source, migrated.max_output_tokens_source) == (source, source)
        assert (migrated.context_window_maximum, migrated.max_output_tokens_maximum) == (None, None)
