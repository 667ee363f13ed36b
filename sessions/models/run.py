"""A run, its instances and its event log (SPEC §6, RUN_TRANSITIONS): the run row is the
status record; its counters and frames are encrypted, what is filtered on stays plain."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.crypto import encrypt
from sessions.models.session import Session


class Run(models.Model):
    """One question, or the resumption of one. The run row is its status record.

    Legal transitions (``RUN_TRANSITIONS``)::

        queued      -> running | cancelled | failed
        running     -> completed | failed | cancelled | interrupted | waiting
                       | queued (the model's server asked to wait: ``not_before``)
        waiting     -> queued (every call it waits on is decided) | cancelled | failed
        interrupted -> queued (resume) | failed
        cancelled   -> queued (resume)
        failed      -> queued (resume, when the error is resumable)
        completed   -> (terminal)

    ``waiting`` (TOOL-8): a call needs a person's approval; no worker holds the run, no
    heartbeat is kept, the reaper leaves it. Its approvals are ``ToolApproval`` rows.

    At most one run per session is active (queued, running or waiting): a conditional unique
    constraint in the database enforces it (RUN-1), not a read-then-write check.
    ``error`` is structured: ``{"code": ..., "message": ..., "retryable": bool}``.

    A queued run a worker could not claim because its person (or its space) already has as
    many runs running as allowed stays ``queued`` with a ``waiting_reason`` until one of
    them ends (``sessions.services.run_slots``).
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"
        INTERRUPTED = "interrupted", "Interrupted"
        WAITING = "waiting", "Waiting for a person"

    ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING, Status.WAITING)

    class Waiting(models.TextChoices):
        """Why a queued run waits while workers have threads for it."""

        USER_LIMIT = "user_limit", "Its person's earlier runs are still running"
        SPACE_LIMIT = "space_limit", "Its space's runs are at their bound"
        # LOOP-3: the model's server asked for a wait (``Retry-After``) longer than a worker
        # thread is held for: the run went back to the queue until ``not_before``.
        MODEL_SERVER = "model_server", "The model's server asked to wait"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="runs", db_index=False)
    # The session's person and space, copied when the run is made (they never change): the
    # claim counts running runs by them in indexes of running runs alone (issue #44). No
    # constraint of their own: the session's cascade removes the run with either.
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.DO_NOTHING, db_constraint=False, null=True,
                             blank=True, related_name="+", db_index=False)
    space = models.ForeignKey("spaces.Space", on_delete=models.DO_NOTHING, db_constraint=False, null=True,
                              blank=True, related_name="+", db_index=False)
    waiting_reason = models.CharField(max_length=16, choices=Waiting.choices, blank=True, default="")
    # Not claimed before this time: set with ``Waiting.MODEL_SERVER`` (a long ``Retry-After``),
    # cleared by the claim. The reaper's sweep wakes the run once it is due.
    not_before = models.DateTimeField(null=True, blank=True)
    version = models.ForeignKey("agents.AgentVersion", on_delete=models.PROTECT, related_name="runs")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    # Frozen at creation (RUN-4): window figures, policy, limits. Editing the connection
    # or the draft later never moves an old run's budget.
    budget = models.JSONField(default=dict)
    # Encrypted: besides figures it holds a completion check's verdict, whose reason is the
    # model's own words (LOOP-9).
    counters = encrypt(models.JSONField(default=dict))
    # MEM-3: the person's memory as this run carries it after the system instructions,
    # frozen when the run is made (resumes and waits included, so the cached prefix holds);
    # null when the run has no memory (the version has none, or the person turned it off).
    memory = encrypt(models.TextField(null=True, blank=True))
    error = models.JSONField(null=True, blank=True)
    # The session seq this run inherited up to (the records before its question).
    inherited_watermark = models.BigIntegerField(default=0)
    cancel_requested = models.BooleanField(default=False)
    # What the API asked of the worker since it last looked (``RunAttention`` bits): set
    # in the same transaction as the request, read back by the worker with every write it
    # makes, so a step costs no extra read to learn of a supplement or a manual compaction.
    attention = models.PositiveSmallIntegerField(default=0)
    # The last event seq allocated (LOOP-5): producers take the next ones with one UPDATE.
    event_seq = models.PositiveIntegerField(default=0)
    attempt = models.PositiveIntegerField(default=0, help_text="Increments on every resume.")
    # In no index, as no column a step writes, so a step's UPDATE is HOT (issue #29); the reaper finds
    # running runs by ``run_one_active_per_session``, and the table leaves room in its pages (migration 0011).
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["session"],
                condition=Q(status__in=["queued", "running", "waiting"]),
                name="run_one_active_per_session",
            )
        ]
        indexes = [
            # A session's latest run, found in the index whatever the table holds (issue #29):
            # with the session's index alone, PostgreSQL may walk every run back from the newest.
            models.Index(fields=["session", "id"], name="run_session_latest"),
            # The claim's counts of a person's and a space's running runs, and the runs waiting
            # for one of them to end (issue #44): each index holds only those rows.
            models.Index(fields=["user"], condition=Q(status="running"), name="run_running_user"),
            models.Index(fields=["space"], condition=Q(status="running"), name="run_running_space"),
            models.Index(fields=["id"], condition=Q(status="queued") & ~Q(waiting_reason=""), name="run_waiting"),
            # TOOL-8: a person's sessions that wait for their decision (the chat's sidebar).
            models.Index(fields=["user"], condition=Q(status="waiting"), name="run_waiting_for_user"),
        ]

    def __str__(self) -> str:
        return f"Run {self.pk} ({self.status})"


class RunAttention:
    """Bits of ``Run.attention``."""

    SUPPLEMENT = 1  # a supplement is queued in the main instance's frame (RUN-5)
    COMPACT = 2  # a manual compaction was asked for while the run works (CTX-43)


RUN_TRANSITIONS: dict[str, frozenset[str]] = {
    Run.Status.QUEUED: frozenset({Run.Status.RUNNING, Run.Status.CANCELLED, Run.Status.FAILED}),
    Run.Status.RUNNING: frozenset(
        {Run.Status.COMPLETED, Run.Status.FAILED, Run.Status.CANCELLED, Run.Status.INTERRUPTED, str(Run.Status.QUEUED),
         Run.Status.WAITING}
    ),
    Run.Status.WAITING: frozenset({Run.Status.QUEUED, Run.Status.CANCELLED, Run.Status.FAILED}),
    Run.Status.INTERRUPTED: frozenset({Run.Status.QUEUED, Run.Status.FAILED}),
    Run.Status.CANCELLED: frozenset({Run.Status.QUEUED}),
    Run.Status.FAILED: frozenset({Run.Status.QUEUED}),
    Run.Status.COMPLETED: frozenset(),
}


class Instance(models.Model):
    """The main instance of a run, or a delegated sub-instance with its parent.

    ``frame`` (encrypted) holds the execution state — what code must remember between
    steps; its keys are typed in ``sessions.frames.Frame`` and it is written only through
    ``sessions.services.frames``. The model-visible view is not here: it is projected from
    the records and checkpoints at every step.
    """

    MAIN = "main"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="instances", db_index=False)
    parent = models.ForeignKey("self", on_delete=models.CASCADE, null=True, blank=True, related_name="children")
    key = models.CharField(max_length=64, default=MAIN)
    depth = models.PositiveSmallIntegerField(default=0)
    frame = encrypt(models.JSONField(default=dict))
    user_turns = models.PositiveIntegerField(default=0)
    model_steps = models.PositiveIntegerField(default=0)
    baseline_user_turns = models.PositiveIntegerField(default=0)
    baseline_model_steps = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["run", "key"], name="instance_unique_key_per_run")]

    @property
    def is_main(self) -> bool:
        return self.parent_id is None

    def __str__(self) -> str:
        return f"{self.key} of run {self.run_id}"


class RunEvent(models.Model):
    """The persisted event log of a run (LOOP-5); ``seq`` is per run and is the SSE id."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events", db_index=False)
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=40)
    payload = encrypt(models.JSONField(default=dict))
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run_id", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="event_unique_seq")]
