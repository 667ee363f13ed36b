"""Cheap, throttled checks the loop makes while it works: Stop requests and heartbeats."""
from __future__ import annotations

import logging
import threading
import time

from django.db import DatabaseError, connections

from runloop.workers import executing_add, executing_remove
from sessions.models import Run
from sessions.services.ownership import RunNotOwned, attempt_touch
from sessions.services.runs import heartbeat_period

logger = logging.getLogger("runloop")


class RunWatch:
    """Reads ``cancel_requested`` at most every ``interval`` seconds; writes heartbeats
    (by default every heartbeat period: four per ``AGENTLOOM_HEARTBEAT_STALE_SECONDS``).

    Safe to call from tool threads: each thread closes its own connection when done.
    """

    def __init__(self, run_id: int, *, attempt: int = 0, interval: float = 0.3,
                 heartbeat_every: float | None = None) -> None:
        self.run_id = run_id
        self.attempt = attempt
        self.lost = False  # the run is no longer ours: reaped, stopped elsewhere, resumed by another
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.interval = interval
        self.heartbeat_every = heartbeat_period() if heartbeat_every is None else heartbeat_every
        self._checked_at = 0.0
        self._beat_at = 0.0
        self._cancelled = False

    def cancel_requested(self, *, fresh: bool = False) -> bool:
        """Whether Stop was pressed; ``fresh`` skips the throttle (used at safe points).
        True too once the run is not ours (a beat found it taken over): what is streaming or
        running for it stops, and the next write says why (RunLost)."""
        if self._cancelled or self.lost:
            return True
        now = time.monotonic()
        if fresh or now - self._checked_at >= self.interval:
            self._checked_at = now
            self._cancelled = Run.objects.filter(pk=self.run_id, cancel_requested=True).exists()
        return self._cancelled

    def stop_flag_read(self, cancelled: bool) -> None:
        """A write just read the Stop flag from the run row: the next read can wait."""
        if cancelled:  # only ever set: a False read meanwhile must not undo another thread's True
            self._cancelled = True
        self._checked_at = time.monotonic()

    def noted(self, *, cancelled: bool) -> None:
        """A write just read the Stop flag back and wrote the heartbeat: both can wait."""
        self.stop_flag_read(cancelled)
        self._beat_at = self._checked_at

    def beat(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._beat_at >= self.heartbeat_every:
            self._beat_at = now
            try:
                signals, _ = attempt_touch(run_id=self.run_id, attempt=self.attempt)
            except RunNotOwned:
                self.lost = True
                return
            # The beat's UPDATE read the Stop flag back: no second query for it now.
            self.noted(cancelled=signals.cancel_requested)

    def start_background(self) -> None:
        """Beat from a thread too, so long waits (a slow first token, summary and
        verification calls, back-off sleeps) never look like a vanished worker.

        Called once the run is claimed: from here until ``stop_background`` this process
        counts the run as its own, and ends it as interrupted if it shuts down meanwhile."""
        executing_add(run_id=self.run_id, attempt=self.attempt)

        def run() -> None:
            try:
                while not self._stop.wait(self.heartbeat_every):
                    try:
                        self.beat(force=True)
                    except DatabaseError:  # no connection in time, a restart: the next beat tries again
                        logger.warning("run %s: heartbeat not written", self.run_id, exc_info=True)
                    finally:
                        connections.close_all()  # back to the pool between beats, not held for the run
            finally:
                connections.close_all()

        self._thread = threading.Thread(target=run, name=f"heartbeat-{self.run_id}", daemon=True)
        self._thread.start()

    def stop_background(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.heartbeat_every + 5)
        executing_remove(run_id=self.run_id, attempt=self.attempt)

    def cancel_requested_from_thread(self) -> bool:
        try:
            return self.cancel_requested()
        finally:
            connections.close_all()
