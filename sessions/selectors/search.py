"""Searching a person's own sessions by their titles and the text of their questions.

Titles and records are encrypted at rest (SPEC §11), so the database cannot match them:
the search reads them back and matches here. What it reads is bounded, so a search costs
the same however long a person has used the chat: the titles of their ``SEARCH_SESSIONS``
most recent sessions, then their questions and supplements in those sessions, newest
first, up to ``SEARCH_QUESTIONS`` records. Older ones are not searched (docs/web.md).
"""
from __future__ import annotations

from django.db.models import QuerySet

from context.records import content_text
from sessions.models import MessageKind, Session, SessionMessage
from sessions.selectors.sessions import session_list_for_user

SEARCH_SESSIONS = 200
SEARCH_QUESTIONS = 2_000
QUERY_MAX_CHARS = 200
_PERSON_KINDS = (MessageKind.USER, MessageKind.SUPPLEMENT)


def search_terms(query: object) -> str:
    """The query as matched: trimmed, case folded, at most ``QUERY_MAX_CHARS`` ("" for none)."""
    return " ".join(str(query or "").split())[:QUERY_MAX_CHARS].casefold()


def sessions_listed(*, user) -> QuerySet[Session]:
    """The caller's sessions a list shows: those with something in them (a question, or an
    import's records). One a new chat's first file started, with no question yet, is
    reached from "New chat" instead (``session_empty_like``), not listed."""
    return session_list_for_user(user=user).filter(last_seq__gt=0)


def sessions_search(*, user, query: object, limit: int = SEARCH_SESSIONS) -> list[Session]:
    """The caller's listed sessions whose title or one of whose questions (or supplements)
    holds ``query``, case-insensitively, newest first; all of them (up to ``limit``) for an
    empty query. Only the caller's own sessions are read."""
    terms = search_terms(query)
    recent = list(sessions_listed(user=user)[:SEARCH_SESSIONS])
    if not terms:
        return recent[:limit]
    found = {session.pk for session in recent if terms in session.title.casefold()}
    rest = [session.pk for session in recent if session.pk not in found]
    if rest:
        records = (SessionMessage.objects.filter(session_id__in=rest, kind__in=_PERSON_KINDS, in_main=True)
                   .order_by("-id").only("session_id", "message")[:SEARCH_QUESTIONS])
        for record in records.iterator(chunk_size=100):
            if record.session_id in found:
                continue
            message = record.message if isinstance(record.message, dict) else {}
            if terms in content_text(message.get("content"), image="").casefold():
                found.add(record.session_id)
    return [session for session in recent if session.pk in found][:limit]
