"""Writes for agents: drafts with a complete context policy, and publishing frozen versions."""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Max

from agentloom.agents.models import Agent, AgentVersion
from agentloom.errors import ValidationFailed
from context.policy import ContextPolicy, PolicyError


def context_policy_normalize(raw: dict[str, Any] | None) -> dict[str, Any]:
    """Fill CTX-20 defaults and validate; a bad value is a 400 naming the field."""
    try:
        return ContextPolicy.from_dict(raw or {}).to_dict()
    except PolicyError as exc:
        fields = {f"context_policy.{name}": message for name, message in exc.fields.items()}
        raise ValidationFailed("The context policy is not valid.", fields=fields) from None


def agent_create(
    *,
    space,
    name: str,
    model_connection,
    instructions: str = "",
    tools: list[str] | None = None,
    context_policy: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    created_by=None,
) -> Agent:
    if model_connection.space_id != space.pk:
        raise ValidationFailed("The model connection belongs to another space.", fields={"model_connection": "not in this space"})
    return Agent.objects.create(
        space=space,
        name=name,
        instructions=instructions,
        model_connection=model_connection,
        tools=list(tools or []),
        context_policy=context_policy_normalize(context_policy),
        limits=dict(limits or {}),
        created_by=created_by,
    )


def agent_publish(*, agent: Agent, published_by=None) -> AgentVersion:
    """Freeze the draft and its connection's figures into the next version number.

    Locks the agent row so two publishers never get the same number.
    """
    with transaction.atomic():
        agent = Agent.objects.select_for_update().select_related("model_connection").get(pk=agent.pk)
        connection = agent.model_connection
        number = (agent.versions.aggregate(n=Max("version"))["n"] or 0) + 1
        return AgentVersion.objects.create(
            agent=agent,
            version=number,
            name=agent.name,
            instructions=agent.instructions,
            tools=list(agent.tools),
            model_connection=connection,
            provider=connection.provider,
            base_url=connection.base_url,
            model=connection.model,
            context_window=connection.context_window,
            max_output_tokens=connection.max_output_tokens,
            safety_margin_tokens=connection.safety_margin_tokens,
            context_policy=context_policy_normalize(agent.context_policy),
            limits=dict(agent.limits),
            verify_before_complete=agent.verify_before_complete,
            published_by=published_by,
        )
