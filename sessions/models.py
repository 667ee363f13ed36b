"""Sessions, runs, instances and the encrypted, append-only source records (SPEC §2, §6).

Content (records, frames, snapshots, views, events, model requests, session titles, run counters) is encrypted; what
we filter and sort on (ids, seq, run, instance, kind, time) stays in plain indexed columns.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.crypto import encrypt
from sessions.models_call_log import ModelCall as ModelCall  # the call log lives beside the run's tables
from sessions.models_call_log import SentBlob as SentBlob


class Session(models.Model):
    """A conversation of one user with one published agent version."""

    space = models.ForeignKey("spaces.Space", on_delete=models.CASCADE, related_name="sessions")
    # Indexed by ``session_user_recent``, as is every key here a composite index leads with (issue #29).
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_sessions",
                             db_index=False)
    agent = models.ForeignKey("agents.Agent", on_delete=models.PROTECT, related_name="sessions")
    version = models.ForeignKey("agents.AgentVersion", on_delete=models.PROTECT, related_name="sessions")
    # The first words of the first question, or an import's title: user text, so encrypted
    # like the records (SPEC §11); never searched or shown outside the owner's chat.
    title = encrypt(models.CharField(max_length=200, blank=True))
    # The last allocated record seq. Appenders bump it with an UPDATE inside their
    # transaction, which row-locks the session: seqs are gap-free and strictly increasing.
    last_seq = models.BigIntegerField(default=0)
    # Where its action calls went (``action_model_key``; "" before the first, ``MIXED_MODELS`` once two
    # differed), noted before a run's first one: did an earlier call go to another model (CTX-11, issue #29).
    action_model = models.CharField(max_length=240, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    MIXED_MODELS = "*"  # never a key: a key holds a colon

    @staticmethod
    def action_model_key(provider: str, model: str) -> str:
        return f"{provider}:{model}"

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["user", "-updated_at"], name="session_user_recent")]

    def __str__(self) -> str:
        # Not the title: this name lands in console lists, breadcrumbs and the admin log.
        return f"Session {self.pk}"


class Run(models.Model):
    """One question, or the resumption of one. The run row is its status record.

    Legal transitions (``RUN_TRANSITIONS``)::

        queued      -> running | cancelled | failed
        running     -> completed | failed | cancelled | interrupted
                       | queued (the model's server asked to wait: ``not_before``)
        interrupted -> queued (resume) | failed
        cancelled   -> queued (resume)
        failed      -> queued (resume, when the error is resumable)
        completed   -> (terminal)

    At most one run per session is active (queued or running): a conditional unique
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

    ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING)

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
                condition=Q(status__in=["queued", "running"]),
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
        {Run.Status.COMPLETED, Run.Status.FAILED, Run.Status.CANCELLED, Run.Status.INTERRUPTED, str(Run.Status.QUEUED)}
    ),
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


class AccessAudit(models.Model):
    """Written every time a staff user opens decrypted session content (SPEC §10)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    session = models.ForeignKey(Session, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    run = models.ForeignKey(Run, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    what = models.CharField(max_length=64)
    detail = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-at"]


class SessionFile(models.Model):
    """A file attached to a question (RUN-13): its bytes and extracted text encrypted like
    the records, its type sniffed from the bytes (``sessions.sniff``). ``question_seq`` is
    the seq of the user record that carries it, set once, when a question uses it."""

    class Kind(models.TextChoices):
        TEXT = "text"
        PDF = "pdf"
        IMAGE = "image"

    # The key-rotation command re-encrypts this many rows per transaction (each up to
    # AGENTLOOM_FILE_MAX_BYTES twice over), not its default batch.
    ROTATION_BATCH = 4

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="files")
    uploaded_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                                    related_name="+")
    name = encrypt(models.CharField(max_length=255))  # the person's words, like a title
    content_type = models.CharField(max_length=64)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    size = models.PositiveBigIntegerField()
    sha256 = encrypt(models.CharField(max_length=64))  # a plain digest would confirm a guessed file
    encoding = models.CharField(max_length=16, blank=True)
    pages = models.PositiveIntegerField(null=True, blank=True)
    pages_read = models.PositiveIntegerField(null=True, blank=True)
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    data = encrypt(models.BinaryField())
    text = encrypt(models.TextField(blank=True, default=""))
    question_seq = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session_id", "id"]
        indexes = [models.Index(fields=["session", "id"], name="sessionfile_session")]

    def __str__(self) -> str:
        return f"File {self.pk}"  # not the name: it lands in console lists and the admin log
