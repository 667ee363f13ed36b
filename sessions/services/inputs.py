"""A tool server's question to the person and its answer (SPEC §7b, TOOL-10).

The question is opened by the run's execution (``runloop.inputs``), with its
``input_requested`` event, only while the run is that attempt's; the person answers through
the API (``tool_input_answer``: the session's creator, once); the waiting thread reads the
answer, hands it to the server and empties the row's ``delivery``
(``tool_input_delivered``), or ends the wait itself (``tool_input_close``: expired,
stopped). Every transition is a conditional UPDATE from ``awaiting``, so the person's
answer and the wait's end never both win.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.errors import Conflict, NotFound, ValidationFailed
from sessions.models import AccessAudit, Run, ToolInput
from sessions.services.event_log import events_write
from sessions.services.events import event_emit
from sessions.services.pasted import pasted_redactor
from toolservers.asking import Question, answer_for_record, content_errors


def tool_input_open(*, run: Run, instance_id: int, attempt: int, call_id: str, question: Question) -> ToolInput:
    """Record the question and announce it (``input_requested``) in one transaction, only
    while ``attempt`` owns the run (``RunNotOwned`` otherwise, nothing written). The
    question's message is the caller's, already redacted."""
    with transaction.atomic():
        row = ToolInput.objects.create(run=run, session_id=run.session_id, instance_id=instance_id, attempt=attempt,
                                       call_id=call_id[:200], server=question.server[:200], mode=question.mode,
                                       message=question.message, schema=question.schema or {}, url=question.url)
        events_write(run_id=run.pk, events=[("input_requested", input_requested_data(row))], of_attempt=attempt)
    return row


def input_requested_data(row: ToolInput) -> dict[str, Any]:
    data: dict[str, Any] = {"input_id": row.pk, "call_id": row.call_id, "server": row.server,
                            "message": row.message, "mode": row.mode}
    if row.mode == ToolInput.Mode.URL:
        data["url"] = row.url
    else:
        data["schema"] = row.schema
    return data


def _answered_data(row: ToolInput, *, by: str) -> dict[str, Any]:
    return {"input_id": row.pk, "call_id": row.call_id, "status": row.status, "by": by}


def tool_input_answer(*, run: Run, user: Any, input_id: Any, action: Any, content: Any = None) -> ToolInput:
    """The person's answer: ``accept`` (with the form's ``content``), ``decline`` or
    ``cancel``. ``run`` is the caller's (``run_get_for_user``: the session's creator, else
    404). 400 with the fields when the content does not fit the form; the same answer twice
    returns the row unchanged; another answer to an answered question is 409
    ``already_answered``; a question nobody waits for any more is 409 ``not_waiting``."""
    try:
        row = ToolInput.objects.get(pk=int(input_id), run=run)
    except (ToolInput.DoesNotExist, TypeError, ValueError):
        raise NotFound("Question not found.") from None
    if action not in ToolInput.ACTIONS:
        raise ValidationFailed("action must be accept, decline or cancel.", fields={"action": "invalid"})
    given = None
    if action == "accept" and row.mode == ToolInput.Mode.FORM:
        errors = content_errors(row.schema, content if content is not None else {})
        if errors:
            raise ValidationFailed("The answer does not fit the form.", fields=errors)
        given = dict(content or {})
    elif content not in (None, {}):
        raise ValidationFailed("content goes only with accept, on a form.", fields={"content": "not expected"})
    status = ToolInput.ACTIONS[action]
    kept = answer_for_record(given, row.schema, pasted_redactor(version=run.version).content)
    if row.status == ToolInput.Status.AWAITING and (run.status != Run.Status.RUNNING or run.attempt != row.attempt):
        raise Conflict("Nobody waits for this answer any more: the run moved on.", code="not_waiting")
    with transaction.atomic():
        moved = ToolInput.objects.filter(pk=row.pk, status=ToolInput.Status.AWAITING).update(
            status=status, content=kept, delivery=given, answered_by=user, answered_at=timezone.now())
        if moved:
            row.refresh_from_db()
            event_emit(run_id=run.pk, type="input_answered", data=_answered_data(row, by=user.get_username()))
            # The operators' trail of who answered which server (no message, no answer: content).
            AccessAudit.objects.create(user=user, session_id=row.session_id, run_id=row.run_id, what="input_answered",
                                       detail={"input": row.pk, "call_id": row.call_id, "server": row.server,
                                               "mode": row.mode, "status": row.status})
            return row
    row.refresh_from_db()
    if row.status == status and row.content == kept:
        return row
    raise Conflict("This question was already answered.", code="already_answered")


def tool_input_delivered(*, row: ToolInput) -> None:
    """The waiting thread handed the answer to the server: the clear copy goes."""
    ToolInput.objects.filter(pk=row.pk).update(delivery=None)


def tool_input_close(*, row: ToolInput, status: str) -> bool:
    """The wait ended without an answer (``expired``, ``stopped``); False when the person's
    answer came first (the caller reads it)."""
    return bool(ToolInput.objects.filter(pk=row.pk, status=ToolInput.Status.AWAITING).update(
        status=status, answered_at=timezone.now()))


def input_answered_data(row: ToolInput) -> dict[str, Any]:
    """The ``input_answered`` event of a wait that ended by itself."""
    return _answered_data(row, by="")


# An answer's clear copy waits in ``delivery`` for a quarter second's poll; one still there
# this long after the answer has no worker left to read it (it died meanwhile).
DELIVERY_KEPT = timedelta(minutes=5)
SETTLE_WINDOW = timedelta(hours=2)  # the sweep runs hourly: each row is looked at at least once


def tool_inputs_settle(*, now: datetime | None = None) -> dict[str, int]:
    """What no waiting thread will finish (its worker died): a question still ``awaiting``
    past the wait becomes ``expired``, and an answer's clear copy left unread is emptied.
    Called hourly by the worker's housekeeping (``runloop.housekeeping``)."""
    now = now or timezone.now()
    past_wait = now - timedelta(seconds=settings.AGENTLOOM_INPUT_WAIT_SECONDS) - DELIVERY_KEPT
    expired = ToolInput.objects.filter(status=ToolInput.Status.AWAITING, created_at__lt=past_wait).update(
        status=ToolInput.Status.EXPIRED, answered_at=now)
    emptied = ToolInput.objects.filter(answered_at__range=(now - SETTLE_WINDOW, now - DELIVERY_KEPT)).exclude(
        status=ToolInput.Status.AWAITING).update(delivery=None)
    return {"expired": expired, "emptied": emptied}
