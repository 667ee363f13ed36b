"""A person's approval of one tool call (SPEC §7b, TOOL-8/9): the call as it waits, and the
decision once someone makes it. One row per call of a step (keyed like its result, by the
step and the call's position: call ids repeat), so a decision sent twice finds the row
already decided, and an approved call is started at most once (``started_at``)."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.crypto import encrypt
from sessions.models.run import Instance, Run
from sessions.models.session import Session


class ToolApproval(models.Model):
    class Status(models.TextChoices):
        AWAITING = "awaiting", "Waiting for a decision"
        APPROVED = "approved", "Approved"
        DENIED = "denied", "Denied"
        EXPIRED = "expired", "Expired (nobody decided in time)"
        STOPPED = "stopped", "Stopped with its run"

    class Scope(models.TextChoices):
        CALL = "call", "This call"
        SESSION = "session", "This tool, for the rest of the session"

    DECIDED = (Status.APPROVED, Status.DENIED, Status.EXPIRED, Status.STOPPED)

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="approvals", db_index=False)
    # A decision "for this session" is found by the session and the tool.
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+", db_index=False)
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="+")
    step = models.PositiveIntegerField()
    index = models.PositiveSmallIntegerField()
    call_id = models.CharField(max_length=200)
    # The function name the model called, and the tool as people know it (``git: log``).
    tool = models.CharField(max_length=200)
    label = models.CharField(max_length=300, blank=True)
    # The arguments as stored (redacted, LOOP-8), and why the call waits (its policy).
    arguments = encrypt(models.JSONField(default=dict))
    why = models.CharField(max_length=300, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.AWAITING)
    scope = models.CharField(max_length=16, choices=Scope.choices, default=Scope.CALL)
    reason = encrypt(models.TextField(blank=True, default=""))
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    # Set, and committed, before the approved call is made: a call started and never
    # finished is an unknown outcome on resume, never a second call (TOOL-9).
    started_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run_id", "step", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "instance", "step", "index"], name="approval_unique_call"),
        ]
        indexes = [
            models.Index(fields=["run", "status"], name="approval_run_status"),
            # The expiry sweep reads the waiting ones alone.
            models.Index(fields=["created_at"], condition=Q(status="awaiting"), name="approval_awaiting"),
            models.Index(fields=["session", "tool"], condition=Q(scope="session", status="approved"),
                         name="approval_session_grant"),
        ]

    def __str__(self) -> str:
        return f"{self.tool} in run {self.run_id} ({self.status})"
