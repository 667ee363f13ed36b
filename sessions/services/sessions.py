"""Starting sessions."""
from __future__ import annotations

from agentloom.agents.models import Agent
from agentloom.errors import ValidationFailed
from sessions.models import Session


def session_create(*, user, agent_id: int) -> Session:
    """Bind the user, the agent and its latest published version (SPEC §2).

    The agent must be in a space the user belongs to (otherwise it does not exist for
    them) and must have a published version.
    """
    agent = Agent.objects.filter(pk=agent_id, space__memberships__user=user).select_related("space").first()
    if agent is None:
        raise ValidationFailed("No such agent.", fields={"agent": "not found in your spaces"})
    version = agent.versions.order_by("-version").first()
    if version is None:
        raise ValidationFailed("This agent has no published version yet.", fields={"agent": "not published"})
    return Session.objects.create(space=agent.space, user=user, agent=agent, version=version)
