"""A session and the files attached to it (SPEC §2, RUN-13): a conversation of one user
with one published agent version. The title and the files' bytes and text are encrypted."""
from __future__ import annotations

from django.conf import settings
from django.db import models

from core.crypto import encrypt


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
