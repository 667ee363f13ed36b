"""Drop the context inspector's copies of model calls older than each agent's retention."""
from __future__ import annotations

from django.core.management.base import BaseCommand

from sessions.services.retention import call_logs_prune


class Command(BaseCommand):
    help = "Drop copies of model-call requests older than each agent's call_log_retention_days (records stay)."

    def handle(self, *args, **options) -> None:
        done = call_logs_prune()
        self.stdout.write(f"Dropped {done['calls']} call copies and {done['blobs']} stored request pieces.")
