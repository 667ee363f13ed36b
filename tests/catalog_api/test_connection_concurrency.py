"""How many requests a model server answers at once, from discovery or the admin (CAT-11).

llama.cpp says it in ``/props`` (``total_slots``); llama-cpp-python's server is recognised
by its ``/v1/models`` entries (``owned_by: "me"`` with a ``permissions`` list) and answers
one; otherwise the figure is unknown (null: no bound) until an admin sets it, 1 to 64.
"""
from __future__ import annotations

import pytest

from models_catalog.models import ModelConnection
from tests.catalog_api.conftest import CONNECTIONS, connection_form
from tests.fakes.fake_provider import models_list, route
from tests.fakes.servers import LlamaCppPythonServer, llamacpp_models, llamacpp_props

pytestmark = pytest.mark.django_db
URL = "/api/v1/model-connections"


def discovered(client, server) -> dict:
    response = client.post("/api/models/discover", {"provider": "openai_compatible", "base_url": server.base_url},
                           format="json")
    assert response.status_code == 200, response.content
    return response.json()["models"][0]


def saved(client, server, found: dict, **extra) -> dict:
    response = client.post(URL, {"name": "Local", "provider": "openai_compatible", "base_url": server.base_url,
                                 "model": found["id"], "discovery_token": found["discovery_token"], **extra},
                           format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_llamacpp_slots_come_from_props_and_are_kept_with_their_source(api, alice, space, fake_provider):
    fake_provider.handler = route({"GET /v1/models": llamacpp_models(), "GET /props": llamacpp_props(4096,
                                                                                                      total_slots=4)})
    client = api(alice)
    found = discovered(client, fake_provider)
    assert (found["concurrency"], found["concurrency_source"]) == (4, "server")
    body = saved(client, fake_provider, found)
    assert (body["concurrency"], body["concurrency_source"]) == (4, "server")


def test_llama_cpp_pythons_server_is_known_to_answer_one_request_at_a_time(api, alice, space, fake_provider):
    fake_provider.handler = LlamaCppPythonServer()
    client = api(alice)
    found = discovered(client, fake_provider)
    assert (found["concurrency"], found["concurrency_source"]) == (1, "server_kind")
    assert saved(client, fake_provider, found)["concurrency"] == 1


def test_an_ordinary_openai_compatible_list_leaves_the_concurrency_unknown(api, alice, space, fake_provider):
    fake_provider.handler = route({"GET /v1/models": models_list(["qwen3"])})
    found = discovered(api(alice), fake_provider)
    assert (found["concurrency"], found["concurrency_source"]) == (None, None)


@pytest.mark.parametrize("figure", [0, 65, -1, "two", 2.5, True])
def test_a_concurrency_outside_one_to_sixty_four_is_a_400_and_changes_nothing(api, alice, make_connection, figure):
    connection = make_connection(concurrency=3)
    response = api(alice).patch(f"{URL}/{connection.pk}", {"concurrency": figure, "name": "Renamed"}, format="json")
    assert response.status_code == 400, response.content
    assert "concurrency" in response.json()["error"]["fields"]
    stored = ModelConnection.objects.get(pk=connection.pk)
    assert (stored.concurrency, stored.concurrency_source, stored.name) == (3, "manual", "Local vLLM")


def test_the_admin_sets_and_clears_the_concurrency(api, alice, make_connection):
    connection = make_connection()
    assert (connection.concurrency, connection.concurrency_source) == (None, "")
    client = api(alice)
    body = client.patch(f"{URL}/{connection.pk}", {"concurrency": 64}, format="json").json()
    assert (body["concurrency"], body["concurrency_source"]) == (64, "manual")
    body = client.patch(f"{URL}/{connection.pk}", {"concurrency": None}, format="json").json()
    assert (body["concurrency"], body["concurrency_source"]) == (None, "")


def test_a_figure_the_admin_set_outlives_a_new_discovery_token(api, alice, space, fake_provider):
    fake_provider.handler = route({"GET /v1/models": llamacpp_models(), "GET /props": llamacpp_props(4096,
                                                                                                      total_slots=4)})
    client = api(alice)
    created = saved(client, fake_provider, discovered(client, fake_provider), concurrency=2)
    assert (created["concurrency"], created["concurrency_source"]) == (2, "manual")
    again = client.patch(f"{URL}/{created['id']}", {"discovery_token": discovered(client, fake_provider)[
        "discovery_token"]}, format="json").json()
    assert (again["concurrency"], again["concurrency_source"]) == (2, "manual")


def test_the_console_form_refuses_a_concurrency_out_of_range_on_its_field(operator, space):
    response = operator.post(f"{CONNECTIONS}add/", connection_form(space, concurrency="65"))
    assert response.status_code == 200  # the form again, with the error on its field
    assert "from 1 to 64" in response.content.decode()
    assert not ModelConnection.objects.exists()
    response = operator.post(f"{CONNECTIONS}add/", connection_form(space, concurrency="1"), follow=True)
    assert (ModelConnection.objects.get().concurrency, ModelConnection.objects.get().concurrency_source) == (
        1, "manual")


def test_discovery_of_a_one_slot_server_busy_answering_waits_its_turn_and_never_cuts_the_answer(
        api, alice, make_connection, fake_provider, monkeypatch):
    """llama-cpp-python's /v1/models takes the model's lock too: asking it while it answers
    someone would end that answer. Discovery waits for the slot; past its bound it is a
    503 saying the server is busy, and the server was not asked."""
    from models_catalog import services
    from models_catalog.slots import slot_acquire

    server = LlamaCppPythonServer()
    fake_provider.handler = server
    make_connection(base_url=fake_provider.base_url, model=server.model, concurrency=1)
    answering = slot_acquire(base_url=fake_provider.base_url, concurrency=1)  # a run's call is streaming
    monkeypatch.setattr(services, "DISCOVERY_SLOT_WAIT", 0.3)
    client = api(alice)
    response = client.post("/api/models/discover", {"provider": "openai_compatible",
                                                    "base_url": fake_provider.base_url}, format="json")
    assert response.status_code == 503, response.content
    assert response.json()["error"]["code"] == "model_server_busy" and response.headers["Retry-After"]
    assert fake_provider.requests == []
    assert answering is not None
    answering.release()
    assert discovered(client, fake_provider)["concurrency"] == 1


def test_a_typed_window_still_learns_that_the_server_answers_one_request_at_a_time(api, alice, space,
                                                                                   fake_provider):
    # The admin entered the window by hand and never pressed Discover: the save reads the
    # server's list for its kind (no probe: the typed window is kept).
    fake_provider.handler = LlamaCppPythonServer()
    response = api(alice).post(URL, {"name": "Local", "provider": "openai_compatible",
                                     "base_url": fake_provider.base_url, "model": "local-llama-3.1-8b-q4",
                                     "context_window": 2048, "max_output_tokens": 256}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["context_window"], body["concurrency"], body["concurrency_source"]) == (2048, 1, "server_kind")
