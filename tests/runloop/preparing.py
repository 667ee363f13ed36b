"""Summaries prepared in the background (CTX-45) the way a worker makes them: each queued
preparation runs ``compaction_prepare`` in a thread of its own, beside the run."""
from __future__ import annotations

import threading

from django.db import connection

from runloop.preparation import compaction_prepare
from sessions.models import PreparedCompaction


class Preparations:
    """A dispatcher (``preparation_dispatcher_set(preparations)``) that runs each queued
    preparation in a thread; ``wait()`` joins them, ``outcomes`` says how each ended."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.outcomes: list[str] = []

    def __call__(self, prepared_id: int) -> None:
        thread = threading.Thread(target=self._run, args=(prepared_id,), daemon=True)
        self.threads.append(thread)
        thread.start()

    def _run(self, prepared_id: int) -> None:
        try:
            self.outcomes.append(compaction_prepare(prepared_id=prepared_id))
        finally:
            connection.close()

    def wait(self, timeout: float = 120.0) -> None:
        for thread in self.threads:
            thread.join(timeout=timeout)
            assert not thread.is_alive(), "a preparation never ended"


def ready(session) -> PreparedCompaction | None:
    return PreparedCompaction.objects.filter(session=session, status=PreparedCompaction.Status.READY).first()
