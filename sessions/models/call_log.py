"""The log of what each model call of a run received and cost: the context inspector's source.

A module of its own because it is a record *about* the runs, written by
``sessions.services.model_calls`` and read by the inspector, not a part of the run's own
state; its rows name their run, instance and session by reference.
"""
from __future__ import annotations

from django.db import models

from core.crypto import encrypt


class SentBlob(models.Model):
    """One distinct piece of what was sent to a model — a message, the system text, the
    tool schemas — stored once per session (encrypted), so logging every call costs only
    what is new in it (O(new), not a copy of the whole history per call).

    ``digest`` is a keyed hash (HMAC with a key derived from the encryption key) of the
    piece's canonical JSON: it finds an identical piece without decrypting anything, and
    reveals nothing to someone who can read the column but not the key.
    """

    session = models.ForeignKey("Session", on_delete=models.CASCADE, related_name="sent_blobs", db_index=False)
    digest = models.CharField(max_length=64)
    content = encrypt(models.JSONField())
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "digest"], name="sentblob_unique_digest")]


class ModelCall(models.Model):
    """What one model call received and what it cost — the context inspector's source.

    ``request`` (encrypted) says exactly what was sent, by reference: the body's fields in
    order, the system text and tool schemas as ``SentBlob`` ids, and the messages as a
    list of blob ids written as a delta of an earlier call's list (``base``, ``keep``,
    ``add``), with our estimate per message the same way, and ``output``: what the call
    answered (redacted like the records). ``usage`` is the provider's own count when it
    came back (CTX-25). Written by ``sessions.services.model_calls``; read
    back, byte for byte, through ``sessions.selectors.model_calls`` (``model_call_body``,
    ``model_call_entries``).
    """

    class Purpose(models.TextChoices):
        ACTION = "action"
        COMPACTION = "compaction"
        VERIFICATION = "verification"

    run = models.ForeignKey("Run", on_delete=models.CASCADE, related_name="model_calls", db_index=False)
    instance = models.ForeignKey("Instance", on_delete=models.CASCADE, related_name="model_calls")
    purpose = models.CharField(max_length=16, choices=Purpose.choices, default=Purpose.ACTION)
    provider = models.CharField(max_length=32)
    model = models.CharField(max_length=200)
    request = encrypt(models.JSONField(default=dict))
    estimator_id = models.CharField(max_length=64)
    estimated_tokens = models.PositiveIntegerField(default=0)
    # Our estimate of the answer (None for calls logged before it was kept, or that got no
    # answer): with ``estimated_tokens``, what the usage page counts for a call whose
    # provider reported no usage, marked estimated.
    estimated_output_tokens = models.PositiveIntegerField(null=True, blank=True)
    usage = models.JSONField(null=True, blank=True)
    outcome = models.CharField(max_length=32, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Set when retention dropped the copy of what was sent (``request`` is encrypted, so
    # the hourly prune finds what is left to drop by this column alone).
    pruned_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run_id", "id"]
        indexes = [models.Index(fields=["run", "id"], name="modelcall_run")]
