"""What the console shows people about connections, prices and versions (SPEC §10): the
provider's label, never its registry name; a key's hint under a proper label; prices as
people write them, with their currency; each figure's source marked up for the live script."""
from __future__ import annotations

import re
from decimal import Decimal

import pytest

from models_catalog.forms import amount_text
from models_catalog.models import ModelPrice
from tests.catalog_api.conftest import CONNECTIONS, DISCOVER, assert_no_secret
from tests.fakes.fake_provider import models_list, route

pytestmark = pytest.mark.django_db
PRICES = "/admin/models_catalog/modelprice/"


def visible_text(html: str) -> str:
    """What a person reads: no scripts, no tags, no attribute values."""
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


@pytest.mark.parametrize(("stored", "shown"), [
    ("2.000000", "2.00"), ("0.150000", "0.15"), ("0.075000", "0.075"), ("10", "10.00"), ("0", "0.00"),
    ("1234.5", "1234.50"),
])
def test_amounts_read_as_people_write_them(stored, shown):
    assert amount_text(Decimal(stored)) == shown


def test_the_connection_pages_name_the_provider_by_its_label_and_the_key_by_its_hint(operator, make_connection):
    connection = make_connection()
    for url in (CONNECTIONS, f"{CONNECTIONS}{connection.pk}/change/"):
        text = visible_text(operator.get(url).content.decode())
        assert "openai_compatible" not in text and "Api key hint" not in text
        assert "Stored key" in text and "sk-…0042" in text
    change = visible_text(operator.get(f"{CONNECTIONS}{connection.pk}/change/").content.decode())
    assert "Local vLLM (qwen3 on the OpenAI-compatible server)" in change
    assert_no_secret(change)


def test_the_agent_and_version_pages_name_the_provider_by_its_label(operator, make_connection, space, alice):
    from agents.services import agent_create, agent_publish

    agent = agent_create(space=space, name="Helper", model_connection=make_connection(), created_by=alice)
    version = agent_publish(agent=agent)
    for url in (f"/admin/agents/agent/{agent.pk}/change/", "/admin/agents/agent/",
                f"/admin/agents/agentversion/{version.pk}/change/"):
        text = visible_text(operator.get(url).content.decode())
        assert "openai_compatible" not in text, url
    assert "The OpenAI-compatible server" in visible_text(
        operator.get(f"/admin/agents/agentversion/{version.pk}/change/").content.decode())


def test_prices_read_with_their_currency_and_without_six_decimals(operator):
    price = ModelPrice.objects.create(provider="openai_compatible", model="qwen3", currency="EUR",
                                      input_per_million=Decimal("2"), output_per_million=Decimal("0.075"))
    text = visible_text(operator.get(PRICES).content.decode())
    assert "2.00 EUR" in text and "0.075 EUR" in text and "as input" in text
    assert "000000" not in text and "openai_compatible" not in text
    form = operator.get(f"{PRICES}{price.pk}/change/").content.decode()
    assert 'value="2.00"' in form and 'value="0.075"' in form and "000000" not in form


def test_each_figures_source_carries_what_is_saved_for_the_live_script(operator, make_connection):
    connection = make_connection()
    html = operator.get(f"{CONNECTIONS}{connection.pk}/change/").content.decode()
    assert 'class="figure-source" data-figure="context_window" data-saved="32768"' in html
    assert 'data-figure="max_output_tokens" data-saved="4096"' in html
    assert "figure_sources.js" in html


def test_discovery_badges_say_each_source_in_words(operator, fake_provider):
    fake_provider.handler = route({"GET /v1/models": models_list([{"id": "Qwen/Qwen3-8B", "max_model_len": 40960}])})
    html = operator.post(DISCOVER, {"provider": "openai_compatible", "base_url": fake_provider.base_url},
                         HTTP_X_REQUESTED_WITH="XMLHttpRequest").content.decode()
    assert '<span class="source-badge source-provider">Provider</span>' in html
    assert '<span class="source-badge source-platform_default">Platform default (check it)</span>' in html
    assert 'data-context-window-source="Provider"' in html
