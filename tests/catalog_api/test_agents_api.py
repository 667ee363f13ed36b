"""/api/v1/agents, publish and versions (SPEC §9, CTX-20, CTX-21, RUN-4)."""
from __future__ import annotations

import pytest

from agents.models import Agent, AgentVersion
from context.policy import POLICY_DEFAULTS

pytestmark = pytest.mark.django_db
URL = "/api/v1/agents"


def new_agent(connection, **extra):
    return {"name": "Researcher", "instructions": "Cite sources.", "model_connection": connection.pk,
            "tools": ["calculator", "http_fetch"], **extra}


def test_ctx20_a_new_draft_gets_every_policy_default_and_ctx21_budget_figures(api, alice, space, demo_connection):
    response = api(alice).post(URL, new_agent(demo_connection), format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["context_policy"] == POLICY_DEFAULTS
    assert {k: body[k] for k in ("space", "name", "model_connection", "model", "tools", "latest_version")} == {
        "space": space.pk, "name": "Researcher", "model_connection": demo_connection.pk, "model": "agentloom-demo",
        "tools": ["calculator", "http_fetch"], "latest_version": None,
    }
    # CTX-21's example: 32,768 / 4,096 / 1,024 -> 27,648; 80 % -> 22,118; 60 % -> 16,588.
    assert body["budget"] == {"context_window": 32768, "max_output_tokens": 4096, "safety_margin_tokens": 1024,
                              "effective_input_tokens": 27648, "trigger_tokens": 22118, "target_tokens": 16588,
                              "legacy_policy": False}
    assert Agent.objects.get(pk=body["id"]).context_policy == POLICY_DEFAULTS


def test_ctx20_a_partial_policy_is_completed_with_defaults(api, alice, space, demo_connection):
    body = api(alice).post(URL, new_agent(demo_connection, context_policy={"user_turns": 5, "context_ratio": 0.9}),
                           format="json").json()
    assert body["context_policy"] == {**POLICY_DEFAULTS, "user_turns": 5, "context_ratio": 0.9}
    assert body["budget"]["trigger_tokens"] == 24883  # floor(27,648 x 0.9)


def test_ctx47_the_api_turns_masking_off_and_on(api, alice, space, demo_connection):
    body = api(alice).post(URL, new_agent(demo_connection, context_policy={"mask_tool_results": False}),
                           format="json").json()
    assert body["context_policy"] == {**POLICY_DEFAULTS, "mask_tool_results": False}
    assert POLICY_DEFAULTS["mask_tool_results"] is True


@pytest.mark.parametrize(("policy", "field"), [
    ({"target_ratio": 0.8}, "context_policy.target_ratio"),  # equal to context_ratio
    ({"context_ratio": 0.5}, "context_policy.target_ratio"),  # now below the default target
    ({"context_ratio": 1.2}, "context_policy.context_ratio"),
    ({"context_ratio": 0}, "context_policy.context_ratio"),
    ({"context_ratio": "0.8"}, "context_policy.context_ratio"),
    ({"target_ratio": 0}, "context_policy.target_ratio"),
    ({"user_turns": 0}, "context_policy.user_turns"),
    ({"user_turns": 2.5}, "context_policy.user_turns"),
    ({"model_steps": -1}, "context_policy.model_steps"),
    ({"model_steps": True}, "context_policy.model_steps"),
    ({"max_compaction_calls": 0}, "context_policy.max_compaction_calls"),
    ({"max_compaction_calls": 17}, "context_policy.max_compaction_calls"),
    ({"max_compaction_call": 3}, "context_policy.max_compaction_call"),
    ({"mask_tool_results": "no"}, "context_policy.mask_tool_results"),  # CTX-47: true or false only
    ({"mask_tool_results": 0}, "context_policy.mask_tool_results"),
    ("aggressive", "context_policy"),
])
def test_ctx20_a_bad_policy_value_is_a_400_naming_the_field_and_creates_nothing(api, alice, space, demo_connection,
                                                                               policy, field):
    response = api(alice).post(URL, new_agent(demo_connection, context_policy=policy), format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert not Agent.objects.exists()


@pytest.mark.parametrize(("change", "field"), [
    ({"tools": ["calculator", "rm_rf"]}, "tools"),
    ({"tools": "calculator"}, "tools"),
    ({"limits": {"max_depth": 0}}, "limits.max_depth"),
    ({"limits": {"max_retries": 3}}, "limits.max_retries"),
    ({"limits": [1]}, "limits"),
    ({"name": ""}, "name"),
    ({"model_connection": 999999}, "model_connection"),
    ({"colour": "blue"}, "colour"),
])
def test_bad_draft_input_is_a_400_naming_the_field(api, alice, space, demo_connection, change, field):
    response = api(alice).post(URL, {**new_agent(demo_connection), **change}, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert not Agent.objects.exists()


def test_loop4_tools_are_read_from_the_registry_at_request_time(api, alice, space, demo_connection):
    from agents.tool_registry import Tool, registry

    tool = Tool(name="lookup_order", description="Find an order.", parameters={"type": "object"},
                run=lambda arguments, context: "ok", idempotent=True)
    client = api(alice)
    assert client.post(URL, new_agent(demo_connection, tools=["lookup_order"]), format="json").status_code == 400
    registry[tool.name] = tool
    try:
        response = client.post(URL, new_agent(demo_connection, tools=["lookup_order", "lookup_order"]), format="json")
    finally:
        registry.pop(tool.name, None)
    assert response.status_code == 201 and response.json()["tools"] == ["lookup_order"]


def test_an_agent_cannot_be_put_in_another_space_than_its_connection(
        api, alice, space, mallory, mallory_space, demo_connection):
    from core.spaces.models import Membership
    from core.spaces.services import membership_add

    membership_add(space=mallory_space, user=alice, role=Membership.Role.ADMIN)
    response = api(alice).post(URL, new_agent(demo_connection, space=mallory_space.pk), format="json")
    assert response.status_code == 400 and "model_connection" in response.json()["error"]["fields"]


def test_members_read_drafts_and_versions_but_cannot_write_or_publish(api, bob, agent, version, demo_connection):
    client = api(bob)
    assert [a["id"] for a in client.get(URL).json()] == [agent.pk]
    assert client.get(f"{URL}/{agent.pk}").json()["latest_version"] == 1
    assert [v["version"] for v in client.get(f"{URL}/{agent.pk}/versions").json()] == [1]
    assert client.post(URL, new_agent(demo_connection), format="json").status_code == 403
    assert client.patch(f"{URL}/{agent.pk}", {"name": "Mine"}, format="json").status_code == 403
    assert client.post(f"{URL}/{agent.pk}/publish").status_code == 403
    assert AgentVersion.objects.count() == 1 and Agent.objects.get().name == "Helper"


def test_outsiders_get_404_for_every_agent_endpoint(api, mallory, mallory_space, agent, demo_connection):
    client = api(mallory)
    assert client.get(URL).json() == []
    for response in (
        client.get(f"{URL}/{agent.pk}"),
        client.patch(f"{URL}/{agent.pk}", {"name": "x"}, format="json"),
        client.post(f"{URL}/{agent.pk}/publish"),
        client.get(f"{URL}/{agent.pk}/versions"),
    ):
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    # Creating on someone else's connection: the id is simply not one of hers.
    response = client.post(URL, new_agent(demo_connection), format="json")
    assert response.status_code == 400 and "model_connection" in response.json()["error"]["fields"]


def test_ctx20_patch_changes_only_the_policy_fields_it_names_and_null_resets(api, alice, agent):
    client = api(alice)
    body = client.patch(f"{URL}/{agent.pk}", {"context_policy": {"model_steps": 12}}, format="json").json()
    assert body["context_policy"] == {**POLICY_DEFAULTS, "model_steps": 12}
    body = client.patch(f"{URL}/{agent.pk}", {"context_policy": {"target_ratio": 0.5}}, format="json").json()
    assert body["context_policy"] == {**POLICY_DEFAULTS, "model_steps": 12, "target_ratio": 0.5}
    refused = client.patch(f"{URL}/{agent.pk}", {"context_policy": {"target_ratio": 0.95}}, format="json")
    assert refused.status_code == 400 and "context_policy.target_ratio" in refused.json()["error"]["fields"]
    body = client.patch(f"{URL}/{agent.pk}", {"context_policy": None}, format="json").json()
    assert body["context_policy"] == POLICY_DEFAULTS


def test_patch_refuses_a_connection_from_another_space(api, alice, agent, mallory_space):
    from models_catalog.models import ModelConnection

    theirs = ModelConnection.objects.create(space=mallory_space, name="Theirs", provider="demo", model="agentloom-demo")
    response = api(alice).patch(f"{URL}/{agent.pk}", {"model_connection": theirs.pk}, format="json")
    assert response.status_code == 400 and "model_connection" in response.json()["error"]["fields"]


def test_publish_numbers_versions_in_order_and_freezes_policy_and_figures(api, alice, agent):
    client = api(alice)
    first = client.post(f"{URL}/{agent.pk}/publish")
    assert first.status_code == 201, first.content
    assert {k: first.json()[k] for k in ("agent", "version", "context_policy", "tools", "model", "context_window")} == {
        "agent": agent.pk, "version": 1, "context_policy": POLICY_DEFAULTS, "tools": ["calculator"],
        "model": "agentloom-demo", "context_window": 32768,
    }
    assert first.json()["budget"]["trigger_tokens"] == 22118 and first.json()["published_by"] == alice.pk
    client.patch(f"{URL}/{agent.pk}", {"context_policy": {"context_ratio": 0.9}, "instructions": "New."},
                 format="json")
    second = client.post(f"{URL}/{agent.pk}/publish").json()
    third = client.post(f"{URL}/{agent.pk}/publish").json()
    assert (second["version"], third["version"]) == (2, 3)
    versions = client.get(f"{URL}/{agent.pk}/versions").json()
    assert [v["version"] for v in versions] == [3, 2, 1]
    assert versions[-1]["context_policy"]["context_ratio"] == 0.8 and versions[-1]["instructions"] == "Be brief."
    assert versions[0]["context_policy"]["context_ratio"] == 0.9
    assert client.get(f"{URL}/{agent.pk}").json()["latest_version"] == 3


def test_run4_versions_are_read_only_through_the_api(api, alice, agent, version):
    client = api(alice)
    path = f"{URL}/{agent.pk}/versions"
    for response in (client.post(path, {}, format="json"), client.patch(path, {}, format="json"),
                     client.delete(path), client.put(path, {}, format="json")):
        assert response.status_code == 405 and response.json()["error"]["code"] == "method_not_allowed"
    assert client.get(f"{URL}/{agent.pk}/publish").status_code == 405
    assert AgentVersion.objects.get().version == 1


def test_ctx40_a_legacy_version_without_a_policy_shows_no_thresholds(api, alice, agent, version):
    legacy = AgentVersion.objects.create(
        agent=agent, version=2, name=agent.name, provider="demo", model="agentloom-demo", context_window=32768,
        max_output_tokens=4096, safety_margin_tokens=1024, context_policy=None)
    body = next(v for v in api(alice).get(f"{URL}/{agent.pk}/versions").json() if v["id"] == legacy.pk)
    assert body["context_policy"] is None
    assert body["budget"]["legacy_policy"] is True and body["budget"]["trigger_tokens"] is None
    assert body["budget"]["effective_input_tokens"] == 27648


def test_the_openapi_schema_describes_the_catalog_and_agent_endpoints(api, alice):
    response = api(alice).get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    text = response.content.decode()
    for path in ("/api/models/discover", "/api/v1/model-connections/{connection_id}",
                 "/api/v1/agents/{agent_id}/publish", "/api/v1/agents/{agent_id}/versions"):
        assert path in text


def test_members_never_read_an_agents_instructions_its_admins_do(api, alice, bob, agent, version):
    """SPEC §9: the person chatting may not see the agent's instructions."""
    assert agent.instructions and version.instructions
    for path in (URL, f"{URL}/{agent.pk}"):
        body = api(bob).get(path).json()
        assert (body[0] if isinstance(body, list) else body)["instructions"] is None
    assert api(bob).get(f"{URL}/{agent.pk}/versions").json()[0]["instructions"] is None
    assert agent.instructions not in api(bob).get(f"{URL}/{agent.pk}").content.decode()
    assert api(alice).get(f"{URL}/{agent.pk}").json()["instructions"] == agent.instructions
    assert api(alice).get(f"{URL}/{agent.pk}/versions").json()[0]["instructions"] == version.instructions
