"""Starting sessions."""
from __future__ import annotations

from typing import Any

from django.db import transaction

from agents.models import Agent
from core.errors import ValidationFailed
from sessions.models import Run, Session
from sessions.services.people import person_lock, sessions_per_day_check
from sessions.services.questions import question_ask


def session_draft(*, user, agent_id: int) -> Session:
    """The session a new chat would start, unsaved: the user, the agent and its latest
    published version (SPEC §2). Nothing is written; ``session_start`` saves it with the
    first question.

    The agent must be in a space the user belongs to (otherwise it does not exist for
    them) and must have a published version: else ValidationFailed.
    """
    agent = Agent.objects.filter(pk=agent_id, space__memberships__user=user).select_related("space").first()
    if agent is None:
        raise ValidationFailed("No such agent.", fields={"agent": "not found in your spaces"})
    version = agent.versions.order_by("-version").first()
    if version is None:
        raise ValidationFailed("This agent has no published version yet.", fields={"agent": "not published"})
    return Session(space=agent.space, user=user, agent=agent, version=version)


def session_create(*, user, agent_id: int) -> Session:
    """Bind the user, the agent and its latest published version (``session_draft``), saved;
    TryLater (429) when the person has started as many sessions today as they may
    (``people.sessions_per_day_check``, under their row lock: its own transaction, or the
    caller's)."""
    session = session_draft(user=user, agent_id=agent_id)
    with transaction.atomic():
        person_lock(user=user)
        sessions_per_day_check(user=user)
        session.save(force_insert=True)
    return session


def session_start(*, user, agent_id: int, content: Any) -> Run:
    """A new chat's first question: the session and its first run in one transaction, so
    a chat nobody asked anything in leaves no session behind (a "New chat" page is only a
    page until its first question). Raises what ``session_create`` and ``question_ask``
    raise; then nothing is created."""
    with transaction.atomic():
        session = session_create(user=user, agent_id=agent_id)
        return question_ask(session=session, content=content)
