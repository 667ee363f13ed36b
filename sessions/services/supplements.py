"""Supplements (RUN-5): a person adds to a working run's question; the run loop takes the
queue into the records at a safe point."""
from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.errors import Conflict, NotFound
from sessions.frames import QueuedSupplement
from sessions.models import Instance, Run, RunAttention, Session, SessionMessage
from sessions.selectors.instances import main_instance
from sessions.selectors.sessions import session_creator_is_member
from sessions.services.frames import frame_locked
from sessions.services.pasted import pasted_redactor
from sessions.services.questions import content_clean
from sessions.services.records import NewRecord, records_append


def _creator_still_member(session: Session) -> None:
    if not session_creator_is_member(session=session):
        raise NotFound("Session not found.")


def supplement_add(*, run: Run, content: Any) -> dict[str, Any]:
    """Queue a supplement for a working run (RUN-5). It enters the context only at a safe
    point — never between a tool call and its result — when the loop takes the queue."""
    content = pasted_redactor(version=run.version).text(content_clean(content))  # LOOP-8
    _creator_still_member(run.session)
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status not in Run.ACTIVE_STATUSES:
            raise Conflict("This run has finished; ask a new question instead.", code="run_not_active")
        item = QueuedSupplement(id=uuid.uuid4().hex, content=content, at=timezone.now().isoformat())
        with frame_locked(instance=main_instance(run=run)) as frame:
            frame["supplements"] = [*frame.get("supplements", []), item]
        # The worker learns of it from its next write to the run row (no extra read per step).
        Run.objects.filter(pk=run.pk).update(attention=F("attention").bitor(RunAttention.SUPPLEMENT))
    return dict(item)


def supplements_take(*, run: Run, instance: Instance) -> list[SessionMessage]:
    """Move every queued supplement into the records, in one transaction with the frame.

    The caller guarantees no tool group is pending (CTX-30 order: finish the tool group,
    then take supplements, then prepare the context). The run row is locked first, as
    ``supplement_add`` does, and its attention bit cleared: a supplement is either taken
    here or raises the bit again after.
    """
    with transaction.atomic():
        Run.objects.filter(pk=run.pk).update(attention=F("attention").bitand(~RunAttention.SUPPLEMENT & 0xFFFF))
        return _supplements_move(run=run, instance=instance)


def _supplements_move(*, run: Run, instance: Instance) -> list[SessionMessage]:
    with frame_locked(instance=instance) as frame:
        queued = frame.get("supplements") or []
        if not queued:
            return []
        rows = records_append(
            session=run.session, run=run, instance=instance,
            records=[NewRecord("supplement", {"role": "user", "content": s["content"], "supplement": True},
                               f"supplement-{s['id']}") for s in queued],
        )
        frame["supplements"] = []
    return rows
