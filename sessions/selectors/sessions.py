"""Reads of a session: who may open it, what a run asks of it as it starts, and whether a
summary is ready for it. Nothing here writes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from agents.models import Agent, AgentVersion
from core.api.fields import MAX_ID
from core.db_rows import models_from_row, select_list
from core.errors import NotFound
from core.spaces.models import Membership
from sessions.models import ModelCall, PreparedCompaction, Run, Session, SessionFile, SessionView


def session_list_for_user(*, user) -> QuerySet[Session]:
    """Only the caller's own sessions, in spaces they still belong to (RUN-11): sharing an
    agent in a space never shares sessions, and leaving a space closes its sessions."""
    return Session.objects.filter(user=user, space__memberships__user=user).select_related("agent", "version")


_SESSION_LAYOUT = ((Session, "s"), (Agent, "a"), (AgentVersion, "v"))


def session_get_for_user(*, session_id: Any, user) -> Session:
    """The session when ``user`` created it and is still a member of its space; NotFound
    (404) for anyone else, admins and staff included. With its agent and version, as
    ``session_list_for_user`` reads them, in one statement written out (every question and
    every page of a session starts here)."""
    try:
        pk = int(session_id)
    except (TypeError, ValueError):
        raise NotFound("Session not found.") from None
    if not 0 < pk <= MAX_ID:
        raise NotFound("Session not found.")
    select = select_list(_SESSION_LAYOUT)
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT {select} FROM "{Session._meta.db_table}" s '
                       f'JOIN "{Agent._meta.db_table}" a ON a."id" = s."agent_id" '
                       f'JOIN "{AgentVersion._meta.db_table}" v ON v."id" = s."version_id" '
                       f'WHERE s."id" = %s AND s."user_id" = %s AND {creator_is_member_sql("s")}',
                       [pk, user.pk])
        row = cursor.fetchone()
    if row is None:
        raise NotFound("Session not found.")
    session, session.agent, session.version = models_from_row(row, _SESSION_LAYOUT)
    return session



def creator_is_member_sql(session_alias: str) -> str:
    """``session_creator_is_member`` as an SQL condition on the session row aliased
    ``session_alias``, for the statements that check it inside their own read or write."""
    return (f'EXISTS (SELECT 1 FROM "{Membership._meta.db_table}" m WHERE m."space_id" = {session_alias}."space_id" '
            f'AND m."user_id" = {session_alias}."user_id")')


def session_creator_is_member(*, session: Session) -> bool:
    """Whether the session's creator still belongs to its space: nobody asks, resumes or
    spends the space's key in a session of a space they have left."""
    return Membership.objects.filter(space_id=session.space_id, user_id=session.user_id).exists()


@dataclass(frozen=True)
class SessionTraits:
    """What a run asks of its session once, as it starts (one query for all three)."""

    other_models: bool  # an earlier action call went to another provider or model (CTX-11)
    imported: bool  # a view short of the original text: the session was imported (RUN-12)
    files_sent: bool  # a question of it sent a file (the question service marks the file, RUN-13)
    # The model asked about is the one every earlier action call went to (and there was
    # one): a run of it need not note it again (``Session.action_model``).
    model_noted: bool = False

    @property
    def may_carry_files(self) -> bool:
        """Whether a question record may carry attachments (an imported one carries what
        it carried): else no question need be read to know there are none."""
        return self.files_sent or self.imported


def session_traits(*, session_id: int, provider: str = "", model: str = "") -> SessionTraits:
    """``other_models`` is against ``provider``/``model`` (False when not given).

    One SELECT of the session's row and its EXISTS, written out (asked at every run). Where
    the session's action calls went is a column of its row (``Session.action_model``), not
    a search of its calls, whose number grows with the session. Only a session that has noted none
    has its calls looked at — a new session's first run (no calls), or calls a worker of
    the version before that column made while the platform was upgraded."""
    views, files = SessionView._meta.db_table, SessionFile._meta.db_table
    key = Session.action_model_key(provider, model) if provider or model else None
    unnoted, params = "FALSE", []  # no model named: nothing to compare with, nothing to ask
    if key is not None:
        # The session's calls, through its runs. PostgreSQL is handed the runs' ids as an
        # array it computes first: given the join, a planner whose statistics lag (a table
        # growing fast, a prepared plan made early) may scan every call of every session.
        # SQLite reads the join in the order written.
        runs, calls = Run._meta.db_table, ModelCall._meta.db_table
        session_runs = (f'= ANY(ARRAY(SELECT r."id" FROM "{runs}" r WHERE r."session_id" = s."id"))'
                        if connection.vendor == "postgresql" else
                        f'IN (SELECT r."id" FROM "{runs}" r WHERE r."session_id" = s."id")')
        unnoted = (f'CASE WHEN s."action_model" = %s THEN EXISTS (SELECT 1 FROM "{calls}" c WHERE c."run_id" '
                   f'{session_runs} AND c."purpose" = %s AND NOT (c."provider" = %s AND c."model" = %s)) '
                   'ELSE FALSE END')
        params = ["", ModelCall.Purpose.ACTION, provider, model]
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT s."action_model", {unnoted}, EXISTS (SELECT 1 FROM "{views}" WHERE "session_id" = s."id" '
            f'AND NOT "raw_complete"), EXISTS (SELECT 1 FROM "{files}" WHERE "session_id" = s."id" '
            f'AND "question_seq" IS NOT NULL) FROM "{Session._meta.db_table}" s WHERE s."id" = %s',
            [*params, session_id])
        row = cursor.fetchone()
    if row is None:  # no such session: nothing of it to carry on
        return SessionTraits(other_models=False, imported=False, files_sent=False)
    noted, unnoted_other, imported, files_sent = row
    other = key is not None and (bool(unnoted_other) if noted == "" else noted != key)
    # A session already mixed stays so whatever is noted: no write for it either.
    return SessionTraits(other_models=other, imported=bool(imported), files_sent=bool(files_sent),
                         model_noted=key is not None and noted in (key, Session.MIXED_MODELS))



def prepared_summary_state(*, session: Session) -> dict[str, Any] | None:
    """CTX-45 for the chat: whether the session has a summary ready to commit at the next
    compaction (``{"status": "ready", "ready_at": ...}``), one being prepared
    (``"preparing"``, ``ready_at`` None), or neither (None). Never the summary itself.

    A preparation whose lease lapsed has lost its worker: it is nothing any more (the
    services end it when they next look; this read does not write)."""
    now = timezone.now()
    row = (PreparedCompaction.objects.filter(session=session)
           .filter(Q(status=PreparedCompaction.Status.READY)
                   | Q(status=PreparedCompaction.Status.PREPARING, lease_until__gte=now))
           .only("status", "ready_at").order_by("-id").first())
    if row is None:
        return None
    return {"status": row.status, "ready_at": row.ready_at}
