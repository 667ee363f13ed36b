"""The access audit's row (SPEC §10): who opened which decrypted content of whose session."""
from __future__ import annotations

from django.conf import settings
from django.db import models

from sessions.models.run import Run
from sessions.models.session import Session


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
