"""A provider is one registration: the API, the console and validation all read the registry.

Registering a ``ProviderSpec`` is all it takes for a provider to be offered by every form,
accepted by every serializer and checked by what its spec says (a key, a default endpoint,
no network at all), with no migration and no edit elsewhere. A name the registry does not
know is a 400 that lists the registered ones.
"""
from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from django.core.management import call_command

from models_catalog.forms import DiscoverForm, ModelConnectionAdminForm, ModelPriceAdminForm
from models_catalog.models import ModelConnection, ModelPrice
from models_catalog.providers import (
    Listing,
    ListingContext,
    ProviderSpec,
    RawModel,
    find_provider,
    provider_choices,
    register_provider,
    unregister_provider,
)
from models_catalog.serializers import ConnectionCreateIn, ConnectionUpdateIn, DiscoverIn
from tests.catalog_api.conftest import API_KEY, CONNECTIONS, connection_form

pytestmark = pytest.mark.django_db
URL = "/api/v1/model-connections"
BUILTIN = ["openai", "deepseek", "openai_compatible", "anthropic", "demo"]


def list_acme(ctx: ListingContext) -> Listing:  # noqa: ARG001 - the list adapter's signature
    # Answers without the network: the test is about the registry, not the wire.
    return Listing(models=[RawModel(id="acme-large", context_window=65_536, max_output_tokens=8_192,
                                    chat_capable=True)], api_shape="acme")


ACME = ProviderSpec(name="acme", label="Acme Models", list_models=list_acme,
                    default_base_url="https://models.acme.example/v1")
REHEARSAL = ProviderSpec(name="rehearsal", label="The rehearsal model", list_models=list_acme,
                         requires_api_key=False, offline=True)


@pytest.fixture
def acme() -> Iterator[ProviderSpec]:
    """Acme's hosted models, registered for one test: an official endpoint and a key."""
    yield from _registered(ACME)


@pytest.fixture
def rehearsal() -> Iterator[ProviderSpec]:
    """An offline provider, registered for one test: no key, no base URL."""
    yield from _registered(REHEARSAL)


def _registered(spec: ProviderSpec) -> Iterator[ProviderSpec]:
    register_provider(spec)
    try:
        yield spec
    finally:
        unregister_provider(spec.name)
    assert find_provider(spec.name) is None


def offered_choices() -> dict[str, list[tuple[str, str]]]:
    """The provider choices every form and serializer offers right now."""
    serializers = {cls.__name__: list(cls().fields["provider"].choices.items())
                   for cls in (DiscoverIn, ConnectionCreateIn, ConnectionUpdateIn)}
    forms = {cls.__name__: list(cls().fields["provider"].choices)
             for cls in (DiscoverForm, ModelConnectionAdminForm, ModelPriceAdminForm)}
    return {**serializers, **forms}


def test_every_form_and_serializer_offers_exactly_the_registrys_providers_with_their_labels():
    expected = [(name, find_provider(name).label) for name in BUILTIN]
    assert provider_choices() == expected
    assert offered_choices() == dict.fromkeys(offered_choices(), expected)


def test_a_provider_registered_later_is_offered_everywhere_and_gone_once_unregistered(acme):
    assert all(choices[-1] == ("acme", "Acme Models") for choices in offered_choices().values())
    unregister_provider("acme")
    assert all("acme" not in dict(choices) for choices in offered_choices().values())


def test_a_registered_provider_needs_no_migration(acme, rehearsal):
    out = io.StringIO()
    call_command("makemigrations", "models_catalog", "--check", "--dry-run", stdout=out)  # exits 1 on a change
    assert "No changes detected" in out.getvalue()


def test_alice_creates_a_connection_to_a_registered_provider_at_its_official_endpoint(api, alice, space, acme):
    response = api(alice).post(URL, {"name": "Acme", "provider": "acme", "api_key": API_KEY, "model": "acme-large"},
                               format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["provider"], body["base_url"]) == ("acme", "https://models.acme.example/v1")


def test_a_registered_provider_that_needs_a_key_is_refused_without_one_in_its_own_name(api, alice, space, acme):
    response = api(alice).post(URL, {"name": "Acme", "provider": "acme", "model": "acme-large"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"api_key": "required for Acme Models"}
    assert not ModelConnection.objects.exists()


def test_an_offline_provider_takes_no_key_and_no_base_url(api, alice, space, rehearsal):
    client = api(alice)
    refused = client.post(URL, {"name": "Rehearsal", "provider": "rehearsal", "model": "acme-large",
                                "base_url": "https://models.acme.example/v1"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"] == {"base_url": "The rehearsal model takes no base URL"}
    created = client.post(URL, {"name": "Rehearsal", "provider": "rehearsal", "model": "acme-large"}, format="json")
    assert created.status_code == 201, created.content
    assert (created.json()["base_url"], created.json()["has_api_key"]) == ("", False)


def test_alice_discovers_a_registered_providers_models_and_keeps_their_source(api, alice, space, acme):
    client = api(alice)
    found = client.post("/api/models/discover", {"provider": "acme", "api_key": API_KEY}, format="json")
    assert found.status_code == 200, found.content
    model = found.json()["models"][0]
    assert (model["id"], model["context_window"], model["context_window_source"]) == ("acme-large", 65_536, "provider")
    assert model["provider_max_output_tokens"] == 8_192  # a maximum, not the platform's setting
    saved = client.post(URL, {"name": "Acme", "provider": "acme", "api_key": API_KEY, "model": "acme-large",
                              "discovery_token": model["discovery_token"]}, format="json").json()
    assert (saved["context_window"], saved["context_window_source"]) == (65_536, "provider")
    assert (saved["max_output_tokens"], saved["max_output_tokens_source"]) == (model["max_output_tokens"], "provider")
    assert (saved["max_output_tokens_maximum"], saved["max_output_tokens_maximum_source"]) == (8_192, "provider")


def test_the_console_offers_a_registered_provider_and_saves_a_connection_to_it(operator, space, acme):
    page = operator.get(f"{CONNECTIONS}add/").content.decode()
    assert '<option value="acme">Acme Models</option>' in page
    assert "official endpoint (OpenAI, DeepSeek, Anthropic, Acme Models)" in page
    response = operator.post(f"{CONNECTIONS}add/", connection_form(space, name="Acme", provider="acme", base_url="",
                                                                   api_key=API_KEY, model="acme-large"))
    assert response.status_code == 302, response.content.decode()
    assert ModelConnection.objects.get().base_url == "https://models.acme.example/v1"
    assert "Acme Models" in operator.get(CONNECTIONS).content.decode()  # the list shows the label


def test_a_price_for_a_registered_provider_is_entered_in_the_console_and_named_by_its_label(operator, acme):
    response = operator.post("/admin/models_catalog/modelprice/add/", {
        "provider": "acme", "model": "acme-large", "currency": "USD", "input_per_million": "1",
        "cached_input_per_million": "", "cache_write_per_million": "", "output_per_million": "2"})
    assert response.status_code == 302, response.content.decode()
    assert str(ModelPrice.objects.get()) == "Acme Models: acme-large"


@pytest.mark.parametrize("url", [URL, "/api/models/discover"])
def test_an_unknown_provider_is_a_400_listing_the_registered_ones_and_saves_nothing(api, alice, space, url):
    response = api(alice).post(url, {"name": "Mistral", "provider": "mistral", "model": "m",
                                     "base_url": "https://api.mistral.ai/v1"}
                               if url == URL else {"provider": "mistral", "base_url": "https://api.mistral.ai/v1"},
                               format="json")
    assert response.status_code == 400
    message = response.json()["error"]["fields"]["provider"]
    assert message == ('"mistral" is not a registered provider; '
                       "must be one of anthropic, deepseek, demo, openai, openai_compatible")
    assert not ModelConnection.objects.exists()


def test_a_connection_whose_provider_was_unregistered_is_refused_on_its_next_change(api, alice, space, acme):
    connection = api(alice).post(URL, {"name": "Acme", "provider": "acme", "api_key": API_KEY, "model": "acme-large"},
                                 format="json").json()
    unregister_provider("acme")
    response = api(alice).patch(f"{URL}/{connection['id']}", {"name": "Acme, renamed"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {
        "provider": "must be one of anthropic, deepseek, demo, openai, openai_compatible"}
    assert ModelConnection.objects.get().name == "Acme"


def test_a_console_form_refuses_a_name_that_is_not_registered(operator, space):
    page = operator.post(f"{CONNECTIONS}add/", connection_form(space, provider="mistral"))
    assert page.status_code == 200 and "Select a valid choice" in page.content.decode()
    assert not ModelConnection.objects.exists()
