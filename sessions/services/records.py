"""Appending source records: gap-free seqs, entry-key de-duplication, JSON-safe payloads."""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from context.surrogates import may_hold_surrogates, replace_lone_surrogate_escapes, replace_lone_surrogates
from core.db_rows import rows_insert
from core.errors import ValidationFailed
from sessions.models import Instance, MessageKind, Run, Session, SessionMessage

_KINDS = set(MessageKind.values)


@dataclass(frozen=True)
class NewRecord:
    """A record to append. ``entry_key`` names it within its (run, instance) for de-duplication."""

    kind: str
    message: dict[str, Any]
    entry_key: str


def _json_safe(message: Any) -> dict[str, Any]:
    # The encryption library pickles values; only plain JSON goes in, so a record always
    # reads back as the same data whatever Python wrote it.
    if not isinstance(message, dict):
        raise ValidationFailed("A record's message must be a JSON object.", fields={"message": "not an object"})
    try:
        text = json.dumps(message, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationFailed("A record's message must be plain JSON.", fields={"message": str(exc)}) from None
    plain = json.loads(text)
    # The door of every record: whatever entry let a lone surrogate through, it is not
    # stored. ``text`` is ASCII (every surrogate an escape, and one inside a tool call's
    # arguments text an escaped escape), so the common record costs one scan for ``\u``.
    return _surrogates_replaced(plain) if may_hold_surrogates(text) else plain


def _surrogates_replaced(message: dict[str, Any]) -> dict[str, Any]:
    message = replace_lone_surrogates(message)  # a fresh value (json.loads): changed in place below
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("arguments"), str):
            # JSON text kept as text: its escapes decode to lone surrogates wherever it is read.
            function["arguments"] = replace_lone_surrogate_escapes(function["arguments"])
    return message


def records_append(
    *, session: Session, run: Run, instance: Instance, records: Sequence[NewRecord]
) -> list[SessionMessage]:
    """Append ``records`` in order and return the rows actually inserted.

    Records whose ``(run, instance, entry_key)`` already exists are skipped, so saving
    the same checkpoint twice inserts nothing. Runs in its own transaction, or joins the
    caller's (RUN-10: record sync, checkpoint and view commit together). The session row
    is locked for the duration: concurrent appenders get gap-free, increasing seqs.
    """
    prepared: list[NewRecord] = []
    seen: set[str] = set()
    for record in records:
        if record.kind not in _KINDS:
            raise ValidationFailed(f"Unknown record kind {record.kind!r}.", fields={"kind": "unknown"})
        if not record.entry_key or len(record.entry_key) > 200:
            raise ValidationFailed("entry_key must be 1–200 characters.", fields={"entry_key": "invalid"})
        if record.entry_key in seen:
            continue
        seen.add(record.entry_key)
        prepared.append(NewRecord(record.kind, _json_safe(record.message), record.entry_key))
    if not prepared:
        return []

    # No savepoint when joining the caller's transaction: nothing here is retried on its
    # own, and a savepoint costs two more round trips.
    with transaction.atomic(savepoint=False):
        # Lock the session row first (PostgreSQL; SQLite's IMMEDIATE transactions already
        # serialise writers), so the de-duplication check below cannot race; the seq read
        # under the lock is the latest, so the UPDATE can set it without reading it back.
        seq = Session.objects.select_for_update().filter(pk=session.pk).values_list("last_seq", flat=True).get()
        existing = set(
            SessionMessage.objects.filter(
                run=run, instance=instance, entry_key__in=[r.entry_key for r in prepared]
            ).values_list("entry_key", flat=True)
        )
        fresh = [r for r in prepared if r.entry_key not in existing]
        if not fresh:
            return []
        last_seq = seq + len(fresh)
        Session.objects.filter(pk=session.pk).update(last_seq=last_seq)
        first = seq + 1
        rows = [
            SessionMessage(
                session=session,
                seq=first + offset,
                run=run,
                instance=instance,
                in_main=instance.parent_id is None,
                kind=record.kind,
                entry_key=record.entry_key,
                message=record.message,
            )
            for offset, record in enumerate(fresh)
        ]
        SessionMessage.objects.bulk_create(rows)
    session.last_seq = last_seq
    return rows


def records_append_new(
    *, session: Session, run: Run, instance: Instance, records: Sequence[NewRecord]
) -> list[SessionMessage]:
    """Append records the caller knows are new, in two statements: the seqs are taken with
    one UPDATE of the session row (which also holds that row's lock until the caller's
    transaction ends: seqs stay gap-free) and the rows go in with one INSERT.

    Must run inside the caller's transaction. A record that was in fact already saved (a
    step saved again after a crash) violates the entry-key constraint: the IntegrityError
    rolls the caller's transaction back, and the caller takes ``records_append``, which
    de-duplicates.
    """
    prepared = [NewRecord(r.kind, _json_safe(r.message), r.entry_key) for r in records]
    for record in prepared:
        if record.kind not in _KINDS:
            raise ValidationFailed(f"Unknown record kind {record.kind!r}.", fields={"kind": "unknown"})
    if not prepared:
        return []
    with connection.cursor() as cursor:
        cursor.execute(f'UPDATE "{Session._meta.db_table}" SET "last_seq" = "last_seq" + %s WHERE "id" = %s '
                       'RETURNING "last_seq"', [len(prepared), session.pk])
        last_seq = cursor.fetchone()[0]
    first = last_seq - len(prepared) + 1
    rows = [SessionMessage(session=session, seq=first + offset, run=run, instance=instance,
                           in_main=instance.parent_id is None, kind=record.kind, entry_key=record.entry_key,
                           message=record.message)
            for offset, record in enumerate(prepared)]
    rows_insert(rows)
    session.last_seq = last_seq
    return rows


def record_append(
    *, session: Session, run: Run, instance: Instance, kind: str, message: dict[str, Any], entry_key: str
) -> SessionMessage | None:
    """Append one record; None when its entry key was already saved."""
    rows = records_append(
        session=session, run=run, instance=instance, records=[NewRecord(kind, message, entry_key)]
    )
    return rows[0] if rows else None
