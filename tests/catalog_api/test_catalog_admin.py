"""The admin console's model connections and agents (SPEC §10, CAT-1, CAT-6, CTX-20)."""
from __future__ import annotations

import re

import pytest

from agents.models import Agent, AgentVersion
from agents.services import agent_publish
from context.policy import ContextPolicy
from models_catalog.models import ModelConnection
from tests.catalog_api.conftest import API_KEY, CONNECTIONS, DISCOVER, OTHER_KEY, assert_no_secret, connection_form
from tests.fakes.fake_provider import models_list, route

pytestmark = pytest.mark.django_db
AGENTS = "/admin/agents/agent/"


def listing(fake_provider):
    fake_provider.handler = route({"GET /v1/models": models_list([
        {"id": "Qwen/Qwen3-8B", "max_model_len": 40960},
        {"id": "text-embedding-3-small"},
    ])})


def test_cat1_the_admin_discovery_page_lists_the_fake_servers_models_with_source_badges(operator, fake_provider):
    listing(fake_provider)
    page = operator.post(DISCOVER, {"provider": "openai_compatible", "base_url": fake_provider.base_url,
                                    "api_key": API_KEY})
    assert page.status_code == 200
    html = page.content.decode()
    assert "Qwen/Qwen3-8B" in html and "text-embedding-3-small" in html and "not for chat" in html
    assert 'class="source-badge source-provider"' in html and "source-platform_default" in html
    assert "40960" in html and "New connection" in html
    assert fake_provider.requests[0].headers["authorization"] == f"Bearer {API_KEY}"
    assert_no_secret(html)


def test_cat1_the_form_panel_gets_a_fragment_whose_use_buttons_carry_the_figures(operator, fake_provider):
    listing(fake_provider)
    fragment = operator.post(DISCOVER, {"provider": "openai_compatible", "base_url": fake_provider.base_url},
                             HTTP_X_REQUESTED_WITH="XMLHttpRequest").content.decode()
    assert "<html" not in fragment
    assert 'data-model="Qwen/Qwen3-8B"' in fragment and 'data-context-window="40960"' in fragment
    assert "data-token=" in fragment


def test_cat1_the_admin_panel_reuses_the_stored_key_only_for_the_same_endpoint(
        operator, fake_provider, make_connection):
    listing(fake_provider)
    connection = make_connection(base_url=fake_provider.base_url)
    same = operator.post(DISCOVER, {"provider": "openai_compatible", "base_url": fake_provider.base_url,
                                    "connection": connection.pk}, HTTP_X_REQUESTED_WITH="XMLHttpRequest")
    assert "Qwen/Qwen3-8B" in same.content.decode()
    assert fake_provider.requests[0].headers["authorization"] == f"Bearer {API_KEY}"
    moved = operator.post(DISCOVER, {"provider": "openai_compatible", "base_url": "http://127.0.0.1:1/v1",
                                     "connection": connection.pk}, HTTP_X_REQUESTED_WITH="XMLHttpRequest")
    assert "stored API key is reused only for the same base URL" in moved.content.decode()
    assert len(fake_provider.requests) == 1
    assert_no_secret(same.content.decode() + moved.content.decode())


def test_cat5_a_refused_key_shows_a_clear_message_in_the_console(operator, fake_provider):
    from tests.fakes.fake_provider import error

    fake_provider.handler = lambda request: error(401, "PROVIDER-TEXT")
    html = operator.post(DISCOVER, {"provider": "openai_compatible", "base_url": fake_provider.base_url,
                                    "api_key": API_KEY}).content.decode()
    assert "rejected the credentials" in html and "PROVIDER-TEXT" not in html
    assert_no_secret(html)


def test_cat6_the_connection_form_never_shows_the_key_and_an_empty_field_keeps_it(operator, space, make_connection):
    connection = make_connection()
    page = operator.get(f"{CONNECTIONS}{connection.pk}/change/").content.decode()
    assert 'type="password"' in page and "sk-…0042" in page and "Discover models" in page
    assert_no_secret(page)
    saved = operator.post(f"{CONNECTIONS}{connection.pk}/change/", connection_form(
        space, name="Renamed", context_window="32768", max_output_tokens="4096", safety_margin_tokens="1024"))
    assert saved.status_code == 302, saved.content.decode()[:2000]
    connection.refresh_from_db()
    assert connection.name == "Renamed" and connection.api_key == API_KEY
    assert (connection.context_window_source, connection.max_output_tokens_source) == ("platform_default",) * 2


def test_cat6_a_typed_key_replaces_the_stored_one_and_updates_the_hint(operator, space, make_connection):
    connection = make_connection()
    operator.post(f"{CONNECTIONS}{connection.pk}/change/", connection_form(
        space, api_key=OTHER_KEY, context_window="32768", max_output_tokens="4096", safety_margin_tokens="1024"))
    connection.refresh_from_db()
    assert connection.api_key == OTHER_KEY and connection.api_key_hint == "sk-…9876"


def test_the_connection_form_reports_rule_breaks_on_the_field_and_never_echoes_the_key(operator, space):
    page = operator.post(f"{CONNECTIONS}add/", connection_form(
        space, provider="openai", base_url="", api_key=API_KEY, context_window="4100", max_output_tokens="4096"))
    assert page.status_code == 200
    errors = page.context["adminform"].form.errors
    assert "context_window" in errors
    assert_no_secret(page.content.decode())
    assert not ModelConnection.objects.exists()


def test_cat2_a_connection_added_in_the_console_with_typed_figures_is_manual(operator, space):
    response = operator.post(f"{CONNECTIONS}add/", connection_form(
        space, api_key=API_KEY, context_window="40960", max_output_tokens="2048", safety_margin_tokens="1024"))
    assert response.status_code == 302
    connection = ModelConnection.objects.get()
    assert (connection.context_window_source, connection.max_output_tokens_source) == ("manual", "manual")
    assert connection.api_key == API_KEY
    assert connection.api_key_hint == "sk-…0042"


def agent_form(space, connection, **overrides):
    return {"space": space.pk, "name": "Console agent", "instructions": "Hi.", "model_connection": connection.pk,
            "tools": ["calculator"], "context_ratio": "0.8", "target_ratio": "0.6",
            "user_turns": "", "model_steps": "", "max_compaction_calls": "4", "mask_tool_results": "on",
            "max_model_calls": "",
            "max_tool_calls": "", "max_wall_seconds": "", "max_depth": "", **overrides}


@pytest.mark.parametrize(("overrides", "field"), [
    ({"target_ratio": "0.9"}, "target_ratio"),
    ({"context_ratio": "1.5"}, "context_ratio"),
    ({"user_turns": "0"}, "user_turns"),
    ({"model_steps": "-2"}, "model_steps"),
    ({"max_compaction_calls": "17"}, "max_compaction_calls"),
    ({"max_depth": "0"}, "max_depth"),
    ({"max_model_calls": "1000001"}, "max_model_calls"),
    ({"max_wall_seconds": "-5"}, "max_wall_seconds"),
    ({"max_tool_calls": "ten"}, "max_tool_calls"),
])
def test_ctx20_the_agent_form_puts_each_policy_error_on_its_field(operator, space, demo_connection, overrides, field):
    page = operator.post(f"{AGENTS}add/", agent_form(space, demo_connection, **overrides))
    assert page.status_code == 200
    assert field in page.context["adminform"].form.errors
    assert not Agent.objects.exists()


def test_loop2_each_run_limit_is_its_own_input_refused_with_the_apis_own_words(operator, api, alice, space,
                                                                              demo_connection):
    page = operator.post(f"{AGENTS}add/", agent_form(space, demo_connection, max_depth="0", max_tool_calls="7"))
    errors = page.context["adminform"].form.errors
    assert list(errors) == ["max_depth"]
    refused = api(alice).post("/api/v1/agents", {"name": "Researcher", "model_connection": demo_connection.pk,
                                                 "limits": {"max_depth": 0}}, format="json")
    assert errors["max_depth"] == [refused.json()["error"]["fields"]["limits.max_depth"]]
    assert 'name="max_depth" value="0"' in page.content.decode()  # what was typed stays
    assert not Agent.objects.exists()


def test_loop2_run_limits_are_saved_as_numbers_and_an_empty_one_keeps_the_default(operator, space, demo_connection):
    response = operator.post(f"{AGENTS}add/", agent_form(space, demo_connection, max_model_calls="40",
                                                         max_wall_seconds="600"))
    assert response.status_code == 302
    agent = Agent.objects.get()
    assert agent.limits == {"max_model_calls": 40, "max_wall_seconds": 600}
    page = operator.get(f"{AGENTS}{agent.pk}/change/").content.decode()
    assert 'name="max_model_calls" value="40"' in page and 'name="max_wall_seconds" value="600"' in page
    assert 'name="limits"' not in page  # no raw JSON box
    response = operator.post(f"{AGENTS}{agent.pk}/change/", agent_form(space, demo_connection, max_model_calls="40"))
    assert response.status_code == 302
    agent.refresh_from_db()
    assert agent.limits == {"max_model_calls": 40}


def test_ctx20_an_agent_saved_in_the_console_carries_the_whole_policy_and_shows_its_budget(operator, space,
                                                                                            demo_connection):
    response = operator.post(f"{AGENTS}add/", agent_form(space, demo_connection, user_turns="6"))
    assert response.status_code == 302
    agent = Agent.objects.get()
    assert agent.context_policy == {"context_ratio": 0.8, "target_ratio": 0.6, "user_turns": 6, "model_steps": None,
                                    "max_compaction_calls": 4, "prepare_ratio": None, "mask_tool_results": True}
    page = operator.get(f"{AGENTS}{agent.pk}/change/").content.decode()
    assert "effective input 27,648 tokens" in page and "compaction at 22,118, target 16,588" in page


def test_ctx47_an_admin_turns_masking_off_in_the_console_and_it_is_frozen_with_the_version(operator, space,
                                                                                            demo_connection):
    form = agent_form(space, demo_connection)
    add = operator.get(f"{AGENTS}add/").content.decode()
    assert re.search(r'<input[^>]*name="mask_tool_results"[^>]*checked', add)  # on unless an admin turns it off
    del form["mask_tool_results"]  # an unticked box is not posted
    assert operator.post(f"{AGENTS}add/", form).status_code == 302
    agent = Agent.objects.get()
    assert agent.context_policy["mask_tool_results"] is False
    page = operator.get(f"{AGENTS}{agent.pk}/change/").content.decode()
    assert not re.search(r'<input[^>]*name="mask_tool_results"[^>]*checked', page)
    version = agent_publish(agent=agent, published_by=None)
    assert version.context_policy["mask_tool_results"] is False
    assert ContextPolicy.from_dict(version.context_policy).mask_tool_results is False


def test_the_publish_action_calls_the_service_and_numbers_versions(operator, agent):
    for _ in range(2):
        operator.post(AGENTS, {"action": "publish", "_selected_action": [agent.pk]})
    assert list(AgentVersion.objects.filter(agent=agent).values_list("version", flat=True)) == [2, 1]
    assert operator.get(f"/admin/agents/agentversion/{AgentVersion.objects.first().pk}/change/").status_code == 200


def test_cat2_a_picked_model_keeps_its_source_and_a_stale_token_is_reported(operator, space, fake_provider):
    listing(fake_provider)
    from models_catalog.serializers import discovery_data
    from models_catalog.services import models_discover

    found = discovery_data(models_discover(provider="openai_compatible", base_url=fake_provider.base_url, api_key=""))
    qwen = found["models"][0]
    form = connection_form(space, base_url=fake_provider.base_url, model=qwen["id"],
                           context_window=str(qwen["context_window"]), max_output_tokens=str(qwen["max_output_tokens"]),
                           discovery_token=qwen["discovery_token"])
    stale = operator.post(f"{CONNECTIONS}add/", {**form, "model": "another-model"})
    assert stale.status_code == 200
    # The token's input is hidden, so its problem is shown at the top of the form.
    assert any("discovery_token" in error for error in stale.context["adminform"].form.non_field_errors())
    assert operator.post(f"{CONNECTIONS}add/", form).status_code == 302
    connection = ModelConnection.objects.get()
    assert (connection.model, connection.context_window) == ("Qwen/Qwen3-8B", 40960)
    # Each figure keeps its own source: vLLM's max_model_len is the provider's; the output is the default.
    assert (connection.context_window_source, connection.max_output_tokens_source) == ("provider", "platform_default")
    assert (connection.context_window_maximum, connection.context_window_maximum_source) == (40960, "provider")


def test_cat3_the_connection_form_refuses_an_output_limit_above_the_models_maximum_on_its_field(operator, space):
    page = operator.post(f"{CONNECTIONS}add/", connection_form(
        space, provider="openai", base_url="", api_key=API_KEY, model="gpt-4o", max_output_tokens="100000"))
    assert page.status_code == 200
    errors = page.context["adminform"].form.errors
    assert "at most 16,384 for gpt-4o" in str(errors["max_output_tokens"])
    assert not ModelConnection.objects.exists()
