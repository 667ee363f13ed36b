"""The access audit (SPEC §10): one row every time someone reads decrypted content of a
session that is not theirs — staff in the console or the API, a space's admin in the
context inspector. Who may read, and whether the read is audited, is ``sessions.staff``;
this is the door the read goes through.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import transaction

from sessions.models import AccessAudit, Run, Session


def access_audit_write(*, user, what: str, session: Session | None, run: Run | None = None,
                       detail: dict[str, Any] | None = None) -> AccessAudit:
    """Record that ``user`` opened ``what`` (records, events, context_inspector, file; memory,
    which belongs to no session: ``detail`` names its agent and person).

    Called before the decrypted content is read, in the request's own transaction (or
    autocommit): a page whose audit row could not be written is not shown.
    """
    return AccessAudit.objects.create(user=user, session=session, run=run, what=what, detail=detail or {})


@contextmanager
def read_audited(*, user, audited: bool, what: str, session: Session | None, run: Run | None = None,
                 detail: dict[str, Any] | None = None) -> Iterator[None]:
    """The block that reads decrypted content, under the audit when ``audited``
    (``sessions.staff.read_is_audited`` says when): the row is written first and the read
    runs in the same transaction — no row, no content; an error in the read takes the row
    back with it. Unaudited (the session's own creator), the block runs as it is.

    Whatever the block answers must be built inside it: the content leaves only once its
    row is written.
    """
    if not audited:
        yield
        return
    with transaction.atomic():
        access_audit_write(user=user, what=what, session=session, run=run, detail=detail)
        yield
