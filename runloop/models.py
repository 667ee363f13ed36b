"""What workers leave in the database so every process of every deployment shape can see
them: a heartbeat per worker process (for ``/healthz``) and named leases (one reaper at a
time across any number of workers and hosts)."""
from __future__ import annotations

from django.db import models


class WorkerHeartbeat(models.Model):
    """One row per worker process, rewritten every beat while it lives.

    ``runs`` lists the runs it is executing. A worker that shuts down deletes its row; a
    killed one leaves it to age, and the reaper prunes rows silent for a day.
    """

    name = models.CharField(max_length=255, unique=True, help_text="host:pid")
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    beat_at = models.DateTimeField(db_index=True)
    runs = models.JSONField(default=list)

    class Meta:
        ordering = ["-beat_at"]

    def __str__(self) -> str:
        return self.name


class Lease(models.Model):
    """A named lease held by one worker until ``expires_at``.

    Taken or renewed with one conditional UPDATE (free, expired, or already ours), so it
    behaves the same on SQLite and PostgreSQL and needs no lock held across statements.
    """

    name = models.CharField(max_length=64, primary_key=True)
    holder = models.CharField(max_length=255)
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} ({self.holder})"
