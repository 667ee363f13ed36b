"""Approvals (SPEC §7b, TOOL-8/9): a run waits for a person's decision without a worker,
and each decision is a record, an event and, once nothing is left to decide, the run's
way back to the queue.

The run's worker records the calls that wait and moves the run to ``waiting`` in one
transaction (``approvals_wait``); from then on nobody executes the run, so the decision,
a Stop and the expiry sweep write here, each under the run row's lock. An approved call is
started by the next attempt, which marks it started before calling (``approval_started``):
whatever is killed when, it is called at most once (TOOL-9).
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.errors import Conflict, NotFound, ValidationFailed
from sessions.models import AccessAudit, Instance, Run, ToolApproval
from sessions.selectors.sessions import session_creator_is_member
from sessions.services import run_slots
from sessions.services.events import event_emit
from sessions.services.runs import run_dispatch_on_commit, run_finish, run_transition

logger = logging.getLogger("agentloom.approvals")

DECISIONS = {"approve": ToolApproval.Status.APPROVED, "deny": ToolApproval.Status.DENIED}
MAX_REASON = 2_000


@dataclass(frozen=True)
class ApprovalAsk:
    """One call of a step that waits: its position, what it is and why it waits."""

    index: int
    call_id: str
    tool: str
    label: str
    description: str
    arguments: Any  # as stored: redacted (LOOP-8)
    why: str


def requested_event(approval: ToolApproval, *, description: str) -> dict[str, Any]:
    return {"approval_id": approval.pk, "call_id": approval.call_id, "tool": approval.tool, "label": approval.label,
            "description": description, "arguments": approval.arguments, "why": approval.why}


def decided_event(approval: ToolApproval) -> dict[str, Any]:
    by = approval.decided_by.get_username() if approval.decided_by is not None else ""
    return {"approval_id": approval.pk, "call_id": approval.call_id, "decision": approval.status,
            "scope": approval.scope, "reason": approval.reason, "by": by}


def approvals_wait(*, run: Run, attempt: int, instance: Instance, step: int, asks: Sequence[ApprovalAsk]) -> bool:
    """TOOL-8: the calls that wait, recorded and announced, and the run moved to ``waiting``
    in one transaction, only from this attempt's ``running``. The attempt moves on, so the
    worker that waited can write nothing more; it frees its slot and thread. False when
    the run was not this attempt's."""
    with transaction.atomic():
        if not run_transition(run=run, to=Run.Status.WAITING, expected_from=(str(Run.Status.RUNNING),),
                              of_attempt=attempt, attempt=attempt + 1, heartbeat_at=None, waiting_reason=""):
            return False
        for ask in asks:
            approval, made = ToolApproval.objects.get_or_create(
                run=run, instance=instance, step=step, index=ask.index,
                defaults={"session_id": run.session_id, "call_id": ask.call_id, "tool": ask.tool,
                          "label": ask.label[:300], "arguments": ask.arguments, "why": ask.why[:300]})
            if made:
                event_emit(run_id=run.pk, type="approval_requested",
                           data=requested_event(approval, description=ask.description))
        # It held a running slot of its person and space: a run waiting for one may go now.
        transaction.on_commit(lambda: run_slots.runs_wake(user_id=run.user_id, space_id=run.space_id), robust=True)
    return True


def approval_decide(*, run: Run, user: Any, call_id: Any, decision: Any, reason: Any = "",
                    scope: Any = "call") -> ToolApproval:
    """TOOL-9: the session's creator decides a waiting call. The same decision sent again
    (a double click, a second tab) returns the row as it is; another one is a 409. The
    last decision of the run's waiting calls sends the run back to the queue."""
    status, reason, scope = _decision_clean(call_id=call_id, decision=decision, reason=reason, scope=scope)
    if run.session.user_id != getattr(user, "pk", None) or not session_creator_is_member(session=run.session):
        raise NotFound("Run not found.")
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        approval = _approval_for(run=locked, call_id=call_id)
        if approval.status != ToolApproval.Status.AWAITING:
            if approval.status == status and approval.scope == scope:
                return approval
            raise Conflict(f"This call was already decided ({approval.get_status_display().lower()}).",
                           code="already_decided")
        if locked.status != Run.Status.WAITING:
            raise Conflict("This run is no longer waiting for a decision; reload the page.", code="state_changed")
        decided = [approval]
        if status == ToolApproval.Status.APPROVED and scope == ToolApproval.Scope.SESSION:
            # "For this session": the other calls of the same tool waiting in this run too.
            decided += list(ToolApproval.objects.select_for_update().filter(
                run=locked, status=ToolApproval.Status.AWAITING, tool=approval.tool).exclude(pk=approval.pk))
        _decided(decided, status=status, by=user, reason=reason, scope=scope)
        _requeue_when_decided(locked)
    return approval


def _decision_clean(*, call_id: Any, decision: Any, reason: Any, scope: Any) -> tuple[str, str, str]:
    fields = {}
    if not isinstance(call_id, str) or not call_id.strip() or len(call_id) > 200:
        fields["call_id"] = "the id of a call that waits for your decision"
    if decision not in DECISIONS:
        fields["decision"] = "approve or deny"
    if reason is None:
        reason = ""
    if not isinstance(reason, str) or len(reason) > MAX_REASON:
        fields["reason"] = f"text of at most {MAX_REASON} characters"
    if scope in (None, ""):
        scope = ToolApproval.Scope.CALL
    if scope not in ToolApproval.Scope.values:
        fields["scope"] = "call or session"
    elif scope == ToolApproval.Scope.SESSION and decision == "deny":
        fields["scope"] = "only an approval may be for the whole session"
    if fields:
        raise ValidationFailed("The decision is not valid.", fields=fields)
    return DECISIONS[decision], reason.strip(), scope


def _approval_for(*, run: Run, call_id: str) -> ToolApproval:
    """The call of that id that waits; else the newest one decided (call ids repeat)."""
    rows = list(ToolApproval.objects.select_for_update(of=("self",)).filter(run=run, call_id=call_id)
                .select_related("decided_by").order_by("-step", "-index"))
    if not rows:
        raise NotFound("No call with this id waits for a decision in this run.")
    return next((row for row in rows if row.status == ToolApproval.Status.AWAITING), rows[0])


def _decided(rows: Iterable[ToolApproval], *, status: str, by: Any, reason: str, scope: str) -> None:
    now = timezone.now()
    for row in rows:
        row.status, row.reason, row.scope, row.decided_at = status, reason, scope, now
        row.decided_by = by
        row.save(update_fields=["status", "reason", "scope", "decided_by", "decided_at"])
        event_emit(run_id=row.run_id, type="approval_decided", data=decided_event(row))
        # The operators' trail of who let which tool act (no arguments, no reason: content).
        AccessAudit.objects.create(user=by, session_id=row.session_id, run_id=row.run_id, what="approval_decided",
                                   detail={"approval": row.pk, "call_id": row.call_id, "tool": row.label or row.tool,
                                           "decision": row.status, "scope": row.scope})


def _requeue_when_decided(run: Run) -> None:
    """Every call the run waits on is decided: back to the queue, as the same attempt."""
    if ToolApproval.objects.filter(run=run, status=ToolApproval.Status.AWAITING).exists():
        return
    if run_transition(run=run, to=Run.Status.QUEUED, expected_from=(str(Run.Status.WAITING),)):
        run_dispatch_on_commit(run.pk)


def approvals_stop(*, run: Run) -> bool:
    """Stop while waiting (TOOL-9): the run ends ``cancelled`` and its waiting calls are
    denied (``stopped``); a resume gives the model that answer. False when it was not waiting."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().select_related("session").get(pk=run.pk)
        if locked.status != Run.Status.WAITING:
            return False
        waiting = list(ToolApproval.objects.filter(run=locked, status=ToolApproval.Status.AWAITING))
        _decided(waiting, status=ToolApproval.Status.STOPPED, by=None, reason="stopped by user",
                 scope=ToolApproval.Scope.CALL)
        return run_finish(run=locked, status=Run.Status.CANCELLED, reason="stopped by user",
                          expected_from=(str(Run.Status.WAITING),))


def approval_hours() -> float:
    return float(settings.AGENTLOOM_APPROVAL_HOURS)


def approvals_expire(*, now: datetime | None = None) -> list[int]:
    """TOOL-8: calls nobody decided within ``AGENTLOOM_APPROVAL_HOURS`` are denied
    (``expired``) and their runs go back to the queue, where the model learns so and goes
    on. Returns the runs sent back. Reads the waiting calls alone (a partial index)."""
    cutoff = (now or timezone.now()) - timedelta(hours=approval_hours())
    run_ids = sorted(set(ToolApproval.objects.filter(status=ToolApproval.Status.AWAITING, created_at__lt=cutoff)
                         .values_list("run_id", flat=True)[:500]))
    sent = []
    for run_id in run_ids:
        with transaction.atomic():
            locked = Run.objects.select_for_update().filter(pk=run_id, status=Run.Status.WAITING).first()
            if locked is None:
                continue
            _decided(list(ToolApproval.objects.filter(run=locked, status=ToolApproval.Status.AWAITING,
                                                      created_at__lt=cutoff)),
                     status=ToolApproval.Status.EXPIRED, by=None, scope=ToolApproval.Scope.CALL,
                     reason=f"nobody decided within {approval_hours():g} hours")
            _requeue_when_decided(locked)
        sent.append(run_id)
    return sent


def approval_started(*, approval_id: int) -> bool:
    """Mark an approved call started, before it is called (inside the attempt's ownership
    transaction). False when it was started before: it must not be called again."""
    return bool(ToolApproval.objects.filter(pk=approval_id, status=ToolApproval.Status.APPROVED,
                                            started_at__isnull=True).update(started_at=timezone.now()))
