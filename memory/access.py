"""Whose memory an API call or the chat's panel reaches (SPEC §7c, MEM-1, MEM-4).

Always and only the caller's own: the owner is built from the agent (found among the
agents of the caller's spaces, so another space's agent is a 404, as every read of an
agent) and the caller. A member reaches their memory for an agent whether or not the
agent keeps memory now: a person can always see and erase what is kept.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.models import AgentVersion
from agents.selectors import agent_get_for_user
from core.errors import NotFound, ValidationFailed
from memory.selectors import MemoryOwner
from sessions.selectors.sessions import session_get_for_user


@dataclass(frozen=True)
class MemoryReach:
    """The caller's memory for one agent, and whether that agent keeps memory now (its
    latest published version's flag: what the next session of it gets)."""

    owner: MemoryOwner
    agent_memory: bool


def memory_reach_for_user(*, agent_id: Any, user) -> MemoryReach:
    """The caller's own memory for an agent of their spaces; NotFound (404) otherwise."""
    agent = agent_get_for_user(agent_id=agent_id, user=user)
    latest = getattr(agent, "latest_version", None)
    keeps = bool(latest) and AgentVersion.objects.filter(agent_id=agent.pk, version=latest, memory=True).exists()
    return MemoryReach(owner=MemoryOwner(space_id=agent.space_id, agent_id=agent.pk, user_id=user.pk),
                       agent_memory=keeps)


def memory_session_for_user(*, reach: MemoryReach, session_id: int | None, user) -> int | None:
    """The session a change from the panel is made in: the caller's own session of this
    agent, or None for the memory log. Any other id is a 400 naming ``session``."""
    if session_id is None:
        return None
    try:
        session = session_get_for_user(session_id=session_id, user=user)
    except NotFound:
        session = None
    if session is None or session.agent_id != reach.owner.agent_id:
        raise ValidationFailed("That session is not one of your sessions with this agent.",
                               fields={"session": "must be your own session of this agent"})
    return session.pk
