"""Reads of a session's records and the views built from them: pages for the API and the
console, and what an instance's context is built from. Nothing here writes."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet

from core.crypto import RecentPlaintexts
from core.db_rows import models_from_row, select_list
from sessions.models import Instance, Run, Session, SessionMessage, SessionView

RECORDS_PAGE_MAX = 200
RECORDS_PAGE_DEFAULT = 100


def instance_label(record: SessionMessage) -> str:
    """How the API and the engine name an instance: "main", or the sub-instance's id."""
    return Instance.MAIN if record.in_main else str(record.instance_id)


def record_as_engine_dict(record: SessionMessage) -> dict[str, Any]:
    """The SPEC §3 record format the context engine reads."""
    return {
        "seq": record.seq,
        "run": record.run_id,
        "instance": instance_label(record),
        "kind": record.kind,
        "message": record.message,
    }


@dataclass(frozen=True)
class RecordsPage:
    items: list[SessionMessage]
    next_after: int


def records_page(*, session: Session, after: int = 0, limit: int = RECORDS_PAGE_DEFAULT,
                 instance: str | None = None) -> RecordsPage:
    """One page of records after ``after`` (RUN-11): keyset on (session, seq), never OFFSET.

    ``instance``: None for all, "main", or a sub-instance id of this session (the caller
    validates it). An empty page returns the same cursor.
    """
    query = SessionMessage.objects.filter(session=session, seq__gt=after)
    if instance == Instance.MAIN:
        query = query.filter(in_main=True)
    elif instance is not None:
        query = query.filter(instance_id=int(instance))
    items = list(query.order_by("seq")[:limit])
    return RecordsPage(items=items, next_after=items[-1].seq if items else after)



def visible_records_query(*, run: Run, instance: Instance, after_seq: int = 0) -> QuerySet[SessionMessage]:
    """The records an instance's context is built from, after ``after_seq``.

    A main instance sees the session's main-instance records up to the watermark its
    run inherited (RUN-2), plus its own records — never questions asked later by other
    runs (RUN-4), never sub-instances' internals (RUN-3). A sub-instance sees only its own.
    """
    if instance.parent_id is not None:
        return SessionMessage.objects.filter(instance=instance, seq__gt=after_seq).order_by("seq")
    inherited = Q(session_id=run.session_id, in_main=True, seq__lte=run.inherited_watermark)
    own = Q(instance=instance)
    return SessionMessage.objects.filter(inherited | own, seq__gt=after_seq).order_by("seq")


# Records and views a worker (or the web process) read lately, decrypted: each run reads
# its whole context again (see ``RecentPlaintexts``); 64 MiB bounds what a process keeps.
_RECORDS_READ = RecentPlaintexts(max_bytes=64 * 1024 * 1024)


def visible_records_for_engine(*, run: Run, instance: Instance, after_seq: int = 0) -> Iterator[dict[str, Any]]:
    """``visible_records_query`` as the engine reads it (``record_as_engine_dict``), from
    the six columns it needs: no model instance per record, no column it does not read,
    a statement written out, and a record decrypted once per process while it is read
    again and again (a run loads its session's records at its first step)."""
    table = SessionMessage._meta.db_table
    if instance.parent_id is not None:
        visible, params = '"instance_id" = %s', [instance.pk]
    else:
        visible = '(("session_id" = %s AND "in_main" AND "seq" <= %s) OR "instance_id" = %s)'
        params = [run.session_id, run.inherited_watermark, instance.pk]
    message = SessionMessage._meta.get_field("message")
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT "seq", "run_id", "in_main", "instance_id", "kind", "message" FROM "{table}" '
                       f'WHERE {visible} AND "seq" > %s ORDER BY "seq"', [*params, after_seq])
        rows = cursor.fetchall()
    for seq, run_id, in_main, instance_id, kind, raw in rows:
        yield {"seq": seq, "run": run_id, "instance": Instance.MAIN if in_main else str(instance_id), "kind": kind,
               "message": _RECORDS_READ.load(message, raw)}



_VIEW_LAYOUT = ((SessionView, "v"),)


def view_best_for_run(*, run: Run) -> SessionView | None:
    """RUN-8: the compliant view with the highest watermark this run may start from.

    Only views inside the run's inherited prefix qualify: a resumed run never starts from
    a view that includes questions asked after it began (RUN-4, RUN-9).
    """
    # Written out, its messages decrypted through the records' cache: each run of a session
    # starts from the same view until a compaction makes the next.
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT {select_list(_VIEW_LAYOUT)} FROM "{SessionView._meta.db_table}" v '
                       'WHERE v."session_id" = %s AND v."watermark" <= %s ORDER BY v."watermark" DESC, v."id" DESC '
                       'LIMIT 1', [run.session_id, run.inherited_watermark])
        row = cursor.fetchone()
    return None if row is None else models_from_row(row, _VIEW_LAYOUT, recent=_RECORDS_READ)[0]
