"""The access audit (SPEC §10): one row every time a staff user opens decrypted content."""
from __future__ import annotations

from typing import Any

from sessions.models import AccessAudit, Run, Session


def access_audit_write(*, user, what: str, session: Session | None, run: Run | None = None,
                       detail: dict[str, Any] | None = None) -> AccessAudit:
    """Record that ``user`` opened ``what`` (records, events, context_inspector).

    Called before the decrypted content is read, in the request's own transaction (or
    autocommit): a page whose audit row could not be written is not shown.
    """
    return AccessAudit.objects.create(user=user, session=session, run=run, what=what, detail=detail or {})
