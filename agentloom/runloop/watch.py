"""Cheap, throttled checks the loop makes while it works: Stop requests and heartbeats."""
from __future__ import annotations

import time

from django.db import connections
from django.utils import timezone

from sessions.models import Run


class RunWatch:
    """Reads ``cancel_requested`` at most every ``interval`` seconds; writes heartbeats.

    Safe to call from tool threads: each thread closes its own connection when done.
    """

    def __init__(self, run_id: int, *, interval: float = 0.3, heartbeat_every: float = 5.0) -> None:
        self.run_id = run_id
        self.interval, self.heartbeat_every = interval, heartbeat_every
        self._checked_at = 0.0
        self._beat_at = 0.0
        self._cancelled = False

    def cancel_requested(self, *, fresh: bool = False) -> bool:
        """Whether Stop was pressed; ``fresh`` skips the throttle (used at safe points)."""
        if self._cancelled:
            return True
        now = time.monotonic()
        if fresh or now - self._checked_at >= self.interval:
            self._checked_at = now
            self._cancelled = Run.objects.filter(pk=self.run_id, cancel_requested=True).exists()
        return self._cancelled

    def beat(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._beat_at >= self.heartbeat_every:
            self._beat_at = now
            Run.objects.filter(pk=self.run_id, status=Run.Status.RUNNING).update(heartbeat_at=timezone.now())

    def cancel_requested_from_thread(self) -> bool:
        try:
            return self.cancel_requested()
        finally:
            connections.close_all()
