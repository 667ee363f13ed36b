"""Starting, renaming and deleting sessions."""
from __future__ import annotations

import unicodedata
from typing import Any

from django.db import transaction

from agents.models import Agent
from context.surrogates import replace_lone_surrogates
from core.errors import ActiveRunConflict, ValidationFailed
from sessions.models import Run, Session
from sessions.services.manual_compaction import compaction_hold_check, session_lock
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


TITLE_MAX_CHARS = 200  # the column's bound (``Session.title``)
_TITLE_BREAKS = {ord(char): " " for char in "\t\n\r\v\f\x85\u2028\u2029"}


def title_clean(title: Any) -> str:
    """A title as a person may give it: one line, at most ``TITLE_MAX_CHARS``, not empty
    once its spaces are trimmed; else ValidationFailed (400) on ``title``."""
    if not isinstance(title, str):
        raise ValidationFailed("Give the chat a name.", fields={"title": "must be a string"})
    cleaned = " ".join(replace_lone_surrogates(title).translate(_TITLE_BREAKS).split())
    cleaned = "".join(char for char in cleaned if unicodedata.category(char) not in ("Cc", "Cf"))
    if not cleaned:
        raise ValidationFailed("Give the chat a name: the name cannot be empty.",
                               fields={"title": "must not be empty"})
    if len(cleaned) > TITLE_MAX_CHARS:
        raise ValidationFailed(f"That name is too long: at most {TITLE_MAX_CHARS} characters.",
                               fields={"title": f"at most {TITLE_MAX_CHARS} characters"})
    return cleaned


def session_rename(*, session: Session, title: Any) -> Session:
    """Give the session the person's own name for it. Only the title changes: not when it
    was last used (the sidebar keeps its order), and a renamed session keeps its name when
    its first question comes later (``question_ask`` only names an untitled one)."""
    session.title = title_clean(title)
    Session.objects.filter(pk=session.pk).update(title=session.title)
    return session


def session_delete(*, session: Session) -> None:
    """Erase the session: its records, runs, events, files, summaries and the call log of
    its model requests go with it (SPEC §9: erased, not hidden). The access audit keeps its
    rows — who read what, when — with their session emptied.

    Refused while a run of it is queued or running (``ActiveRunConflict``, 409: stop it
    first) or a manual compaction holds it (``CompactionRunning``, 409): a worker is writing
    into it. Checked and deleted under the session's row lock, which a new question takes
    too, so no run starts between the look and the delete."""
    with transaction.atomic():
        session_lock(session_id=session.pk)
        if Run.objects.filter(session_id=session.pk, status__in=Run.ACTIVE_STATUSES).exists():
            raise ActiveRunConflict("An answer is still running in this chat. Stop it, then delete the chat.")
        compaction_hold_check(session_id=session.pk)
        Session.objects.filter(pk=session.pk).delete()


def session_empty_like(*, draft: Session) -> Session | None:
    """The person's newest session of the draft's agent with nothing asked in it yet (a new
    chat whose first file started it, or one started through the API), bound again to the
    agent's latest published version (``draft.version``) — no run has read the old one.
    None when there is none. "New chat" opens this one rather than starting another: empty
    chats do not pile up, and the files attached to one show again."""
    session = (Session.objects.filter(user=draft.user, agent_id=draft.agent_id, space_id=draft.space_id, last_seq=0)
               .order_by("-id").first())
    if session is None:
        return None
    if session.version_id != draft.version.pk:
        # Only while still empty: a question that came meanwhile keeps the version it read.
        if Session.objects.filter(pk=session.pk, last_seq=0).update(version=draft.version):
            session.version = draft.version
    return session
