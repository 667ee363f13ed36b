"""A tool server's question to the person during a call (SPEC §7b, TOOL-10: MCP
elicitation), and the person's answer: a record, kept like a call's arguments (encrypted,
credentials redacted).

Unlike an approval the question is asked *inside* the call: the worker's thread waits in
it, so the row lives no longer than ``AGENTLOOM_INPUT_WAIT_SECONDS`` in ``awaiting``.
``delivery`` carries the answer as the person gave it from the API to that thread, which
empties it once it handed it to the server; ``content`` is the answer as the records keep it.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.crypto import encrypt
from sessions.models.run import Instance, Run
from sessions.models.session import Session


class ToolInput(models.Model):
    class Status(models.TextChoices):
        AWAITING = "awaiting", "Waiting for the person"
        ACCEPTED = "accepted", "Accepted"
        DECLINED = "declined", "Declined"
        CANCELLED = "cancelled", "Cancelled"
        EXPIRED = "expired", "Expired (nobody answered in time)"
        STOPPED = "stopped", "Stopped with its run"

    class Mode(models.TextChoices):
        FORM = "form", "A form"
        URL = "url", "A URL to open"

    # The person's three answers, and the status each leaves.
    ACTIONS = {"accept": Status.ACCEPTED, "decline": Status.DECLINED, "cancel": Status.CANCELLED}

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="inputs", db_index=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+", db_index=False)
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="+")
    # The attempt of the run whose thread waits: an answer after a restart finds nobody.
    attempt = models.PositiveIntegerField(default=0)
    call_id = models.CharField(max_length=200)
    server = models.CharField(max_length=200)
    mode = models.CharField(max_length=8, choices=Mode.choices)
    message = encrypt(models.TextField(blank=True, default=""))
    schema = encrypt(models.JSONField(default=dict))
    url = encrypt(models.TextField(blank=True, default=""))
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.AWAITING)
    content = encrypt(models.JSONField(null=True, blank=True))
    delivery = encrypt(models.JSONField(null=True, blank=True))
    answered_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                    related_name="+")
    answered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run_id", "id"]
        indexes = [
            models.Index(fields=["run", "status"], name="input_run_status"),
            models.Index(fields=["created_at"], condition=Q(status="awaiting"), name="input_awaiting"),
        ]

    def __str__(self) -> str:
        return f"{self.server} asks in run {self.run_id} ({self.status})"
