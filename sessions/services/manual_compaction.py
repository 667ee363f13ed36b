"""Manual compaction (CTX-43) and the one-thing-at-a-time rule it shares with runs.

A session does one thing at a time: an answer (a queued or running run, RUN-1) or a
manual compaction of its finished history, never both. A manual compaction holds the
session from the moment it is asked for until its worker is done: the ``COMPACT``
attention bit on the (finished) latest run, with ``heartbeat_at`` saying since when.
Asking, resuming and compacting each lock the session row first and then look, so two
requests at once are ordered by the database (PostgreSQL's row lock; SQLite serialises
writers), never by a read-then-write race.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Literal

from django.db import connection, transaction
from django.db.models import F
from django.db.transaction import TransactionManagementError
from django.utils import timezone

from core.errors import Conflict, NotFound
from sessions.models import Run, RunAttention, Session, SessionMessage, SessionView
from sessions.selectors.instances import main_instance
from sessions.selectors.sessions import creator_is_member_sql
from sessions.services.frames import frame_update

# A worker that died mid-summary releases the session after this long (the chat stops
# waiting after two minutes; a segmented summary on a slow model may take several).
MANUAL_COMPACTION_HOLD_SECONDS = 600

# Records that are themselves the product of a compaction, and pins (CTX-50, metadata about
# messages already there): nothing new to summarize.
_NOT_NEW = ("compaction_summary", "compaction_undone", "pin")


class CompactionRunning(Conflict):
    code = "compaction_running"


class AnswerRunning(Conflict):
    code = "answer_running"


class NothingToCompact(Conflict):
    code = "nothing_to_compact"


def session_lock(*, session_id: int) -> None:
    """Lock the session row until the caller's transaction ends (call inside ``atomic``).
    Written out (every question takes it); SQLite has no row locks: its writers take turns whole."""
    if not connection.in_atomic_block:  # as the ORM's select_for_update: outside one it would lock nothing
        raise TransactionManagementError("session_lock needs a transaction: call it inside atomic().")
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT "id" FROM "{Session._meta.db_table}" WHERE "id" = %s{lock}', [session_id])


def session_lock_to_ask(*, session_id: int) -> None:
    """Lock the session row for a new run of it, then look: NotFound (404) once its creator
    has left its space (RUN-11), CompactionRunning (409) while a manual compaction holds it.

    The lock is a statement of its own: PostgreSQL reads a statement's subqueries as they
    were when it began, so a look made in the locking statement would miss a hold
    committed while it waited for the lock. The look is then one statement (the membership
    and the hold together), and only a session some compaction marked reads the
    hold itself (``compaction_hold_check``). Call inside ``atomic``.
    """
    session_lock(session_id=session_id)
    session, run = Session._meta.db_table, Run._meta.db_table
    active = ", ".join(["%s"] * len(Run.ACTIVE_STATUSES))
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT {creator_is_member_sql("s")}, EXISTS (SELECT 1 FROM "{run}" r WHERE r."session_id" = s."id" '
            f'AND r."status" NOT IN ({active}) AND (r."attention" & %s) <> 0) '
            f'FROM "{session}" s WHERE s."id" = %s',
            [*map(str, Run.ACTIVE_STATUSES), RunAttention.COMPACT, session_id])
        row = cursor.fetchone()
    if row is None or not row[0]:
        raise NotFound("Session not found.")
    if row[1]:
        compaction_hold_check(session_id=session_id)


def _holding_run(*, session_id: int) -> Run | None:
    return (Run.objects.filter(session_id=session_id).exclude(status__in=Run.ACTIVE_STATUSES)
            .filter(attention=F("attention").bitor(RunAttention.COMPACT)).order_by("-id").first())


def compaction_hold_check(*, session_id: int) -> None:
    """Raise ``CompactionRunning`` (409) while a manual compaction holds the session.

    Call with the session row locked (``session_lock``). A hold older than
    ``MANUAL_COMPACTION_HOLD_SECONDS`` is a worker that never came back: it is released."""
    run = _holding_run(session_id=session_id)
    if run is None:
        return
    since = run.heartbeat_at
    if since is not None and since > timezone.now() - timedelta(seconds=MANUAL_COMPACTION_HOLD_SECONDS):
        raise CompactionRunning("Earlier messages are being summarized (Compact now). Wait until the summary is "
                                "done — it takes a minute or two — then send your question again.")
    compaction_hold_release(run_id=run.pk)


def compaction_hold_release(*, run_id: int) -> None:
    """The manual compaction of a finished run is over (whatever its outcome)."""
    Run.objects.filter(pk=run_id).exclude(status__in=Run.ACTIVE_STATUSES).update(
        attention=F("attention").bitand(~RunAttention.COMPACT & 0xFFFF))


def _something_new(*, session_id: int) -> bool:
    """Is there a record of the main line the latest summary does not cover yet?"""
    watermark = (SessionView.objects.filter(session_id=session_id).order_by("-watermark")
                 .values_list("watermark", flat=True).first()) or 0
    return (SessionMessage.objects.filter(session_id=session_id, in_main=True, seq__gt=watermark)
            .exclude(kind__in=_NOT_NEW).exists())


def compaction_request(*, session: Session,
                       while_answering: Literal["schedule", "refuse"] = "schedule") -> tuple[str, Run]:
    """CTX-43: ask for a manual compaction of the session's history.

    Returns ("queued", run): the caller dispatches the run's compaction on commit, and the
    session refuses questions and resumes until it is done. While an answer runs,
    ``while_answering="schedule"`` (the console) asks that run's loop to compact before its
    next step — the run itself does it, so nothing runs beside it — and returns
    ("scheduled", run); ``"refuse"`` (the chat's API) is a 409 ``answer_running``.
    Conflict (409) with a plain message while another manual compaction runs
    (``compaction_running``) and when there is nothing to summarize
    (``nothing_to_compact``). Opens its own transaction."""
    with transaction.atomic():
        session_lock(session_id=session.pk)
        active = Run.objects.filter(session_id=session.pk, status__in=Run.ACTIVE_STATUSES).first()
        if active is not None and while_answering == "schedule":
            frame_update(instance=main_instance(run=active), compact_requested=True)
            Run.objects.filter(pk=active.pk).update(attention=F("attention").bitor(RunAttention.COMPACT))
            return "scheduled", active
        if active is not None:
            raise AnswerRunning("An answer is running in this session. Wait for it to finish (or stop it), "
                                "then press Compact now again.")
        if _holding_run(session_id=session.pk) is not None:
            try:
                compaction_hold_check(session_id=session.pk)
            except CompactionRunning:
                raise CompactionRunning("Earlier messages are already being summarized. Wait until that is done.")\
                    from None
        run = Run.objects.filter(session_id=session.pk).order_by("-id").first()
        if run is None:
            raise NothingToCompact("There is nothing to summarize yet: ask a question first.")
        if not _something_new(session_id=session.pk):
            raise NothingToCompact("There is nothing new to summarize: everything up to the last message is "
                                   "already summarized.")
        Run.objects.filter(pk=run.pk).update(attention=F("attention").bitor(RunAttention.COMPACT),
                                             heartbeat_at=timezone.now())
    return "queued", run


def compaction_request_taken(*, run: Run) -> None:
    """The run's worker took a manual compaction request: clear the run's attention bit."""
    Run.objects.filter(pk=run.pk).update(attention=F("attention").bitand(~RunAttention.COMPACT & 0xFFFF))
