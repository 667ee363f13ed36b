"""The encrypted, append-only source records of a session and what compaction makes of
them: snapshots, prepared summaries and reusable views (SPEC §6, RUN-7, RUN-10, CTX-45).
Content is encrypted; seq, run, instance, kind and time stay in plain indexed columns."""
from __future__ import annotations

from django.db import models
from django.db.models import Q

from core.crypto import encrypt
from sessions.models.run import Instance, Run
from sessions.models.session import Session


class MessageKind(models.TextChoices):
    USER = "user"
    SUPPLEMENT = "supplement"
    ASSISTANT = "assistant"
    TOOL_RESULT = "tool_result"
    DELEGATION_RESULT = "delegation_result"
    RUN_STATUS = "run_status"
    MODEL_CHANGE = "model_change"
    LABEL = "label"
    EXTENSION_STATE = "extension_state"
    CONTEXT = "context"
    COMMAND = "command"
    COMPACTION = "compaction"
    COMPACTION_SUMMARY = "compaction_summary"
    COMPACTION_UNDONE = "compaction_undone"  # CTX-51: who undid which compaction, and when
    # CTX-50: a pin or an unpin of a main-line message (who, which seq); metadata that never
    # becomes a chat message (context.records projects only the message kinds).
    PIN = "pin"


class SessionMessage(models.Model):
    """A source record: append-only, encrypted, ordered by ``(session, seq)``.

    ``(run, instance, entry_key)`` is unique so saving the same checkpoint twice inserts
    nothing. No code path updates or deletes a record's content.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="records", db_index=False)
    seq = models.BigIntegerField()
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="records", db_index=False)
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="records", db_index=False)
    # Denormalised from the instance so "main-instance records after seq N" is one index scan.
    in_main = models.BooleanField(default=True)
    kind = models.CharField(max_length=32, choices=MessageKind.choices)
    entry_key = models.CharField(max_length=200)
    message = encrypt(models.JSONField())
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session_id", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="record_unique_seq"),
            models.UniqueConstraint(fields=["run", "instance", "entry_key"], name="record_unique_entry_key"),
        ]
        indexes = [
            models.Index(fields=["session", "in_main", "seq"], name="record_session_main_seq"),
            models.Index(fields=["instance", "seq"], name="record_instance_seq"),
            models.Index(fields=["run", "seq"], name="record_run_seq"),
            models.Index(fields=["session", "kind"], name="record_session_kind"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.kind}"


class CompactionSnapshot(models.Model):
    """An instance's compacted view at one revision, with the figures of its compaction (CTX-41)."""

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="snapshots")
    revision = models.PositiveIntegerField()
    covered_seq = models.BigIntegerField()
    inherited_watermark = models.BigIntegerField(default=0)
    messages = encrypt(models.JSONField(default=list))
    baseline_user_turns = models.PositiveIntegerField(default=0)
    baseline_model_steps = models.PositiveIntegerField(default=0)
    estimator_id = models.CharField(max_length=64)
    metrics = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["instance_id", "revision"]
        constraints = [
            models.UniqueConstraint(fields=["instance", "revision"], name="snapshot_unique_revision")
        ]


class PreparedCompaction(models.Model):
    """CTX-45: a summary of a session's main view, prepared in the background.

    ``snapshot`` (encrypted) is what the preparation summarizes: the system message, the
    tool schemas and the view's messages with their record ranges, as the step that asked
    for it saw them; it is emptied once the preparation ends. A ready row holds the
    ``summary`` (encrypted) and the ``prefix`` of the snapshot it covers, fingerprinted
    (``digest``), with the ``policy`` and estimator it was made under; the trigger commits
    it onto a view that still starts with that prefix, else it is discarded. At most one
    preparation per session is under way (a conditional unique constraint); one whose
    worker went away is known by its lapsed ``lease_until``.
    """

    class Status(models.TextChoices):
        PREPARING = "preparing", "Preparing"
        READY = "ready", "Ready"
        USED = "used", "Used"
        DISCARDED = "discarded", "Discarded"
        FAILED = "failed", "Failed"

    OPEN_STATUSES = (Status.PREPARING, Status.READY)

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="prepared_compactions")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="prepared_compactions")
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="prepared_compactions")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PREPARING)
    snapshot = encrypt(models.JSONField(default=dict))
    tokens = models.PositiveIntegerField(default=0, help_text="The calibrated figure of the snapshot's request.")
    policy = models.JSONField(default=dict)
    estimator_id = models.CharField(max_length=64)
    summary = encrypt(models.TextField(blank=True, default=""))
    prefix = models.PositiveIntegerField(null=True, blank=True)
    digest = models.CharField(max_length=64, blank=True)
    metrics = models.JSONField(default=dict)
    reason = models.CharField(max_length=64, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    ready_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["session_id", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["session"], condition=Q(status="preparing"),
                                    name="prepared_one_preparing_per_session"),
        ]
        indexes = [models.Index(fields=["session", "status"], name="prepared_session_status")]

    def __str__(self) -> str:
        return f"prepared summary #{self.pk} ({self.status})"


class SessionView(models.Model):
    """A reusable compacted main-instance view covering a contiguous prefix of records (RUN-7)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="views")
    watermark = models.BigIntegerField()
    messages = encrypt(models.JSONField(default=list))
    user_turns = models.PositiveIntegerField(default=0)
    model_steps = models.PositiveIntegerField(default=0)
    baseline_user_turns = models.PositiveIntegerField(default=0)
    baseline_model_steps = models.PositiveIntegerField(default=0)
    estimator_id = models.CharField(max_length=64)
    # False for imported transcripts: what the old system discarded is not original text (RUN-12).
    raw_complete = models.BooleanField(default=True)
    source_run = models.ForeignKey(Run, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session_id", "-watermark"]
        indexes = [models.Index(fields=["session", "-watermark"], name="view_session_watermark")]
