"""Slow work inside a request, bounded (issue #44 item 5, SPEC §11).

Some requests wait on something other than the database while their person waits: a file
read in a child process (a PDF's text for up to ``AGENTLOOM_PDF_MAX_SECONDS``, an image
decoded), a remote server asked what it offers (registering, changing or refreshing a
tool server; discovering a provider's models, the console's Test connection), an import
that parses and writes thousands of records, a chat page of a long conversation rendered.
Two things go wrong when nothing bounds them:

- **The pool drains.** A request borrows a pooled connection with its first query (the
  authentication) and keeps it until its response is made (``db_pool.GiveBackMiddleware``).
  Thirty slow PDFs uploaded at once held all twenty of the web process's connections; everyone
  else's requests waited ``AGENTLOOM_DB_POOL_TIMEOUT`` and got 503. So :func:`slow_work`
  gives the connection back before the slow part (no transaction may be open then — one
  held across slow work is a bug, refused loudly), and the next query borrows again.
- **One person fills the process.** Each kind has a bound per web process (its child
  processes, threads and memory; a page render only the door's, ``agentloom/admission.py``)
  and a smaller one per person, so one account cannot take every place. Past the
  person's bound the request is refused with 429 ``too_many_at_once``; past the
  process's, 503 ``busy``; both with ``Retry-After``, in the one error shape, before
  anything was done. The chat sends an attachment refused this way again by itself,
  after the time it was told.

Counted in this process: a deployment of several web processes allows a person each
process's bound. The bounds are read from the settings at each use.
"""
from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from core.db_pool import connection_give_back_for_slow_work
from core.errors import TryLater

RETRY_AFTER_SECONDS = 5


@dataclass(frozen=True)
class Kind:
    """One kind of slow work: the settings naming its bounds and how to word a refusal."""

    process_setting: str | None  # None: bounded by the door alone (agentloom/admission.py)
    person_setting: str
    doing: str  # "reading files", "connecting to servers" …: what the person's requests are doing
    refused: str  # what was not done


KINDS: dict[str, Kind] = {
    "extraction": Kind("AGENTLOOM_EXTRACTIONS_MAX", "AGENTLOOM_EXTRACTIONS_PER_PERSON",
                       "files being read", "This file was not attached"),
    "probe": Kind("AGENTLOOM_PROBES_MAX", "AGENTLOOM_PROBES_PER_PERSON",
                  "connections to servers being tried", "Nothing was connected or saved"),
    "import": Kind("AGENTLOOM_IMPORTS_MAX", "AGENTLOOM_IMPORTS_PER_PERSON",
                   "imports running", "This transcript was not imported"),
    "render": Kind(None, "AGENTLOOM_RENDERS_PER_PERSON", "chat pages being rendered", "This page was not shown"),
}


class Gate:
    """A bounded count of one kind's work in this process, and of each person's share."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.by_person: Counter[int] = Counter()

    def enter(self, kind: Kind, *, person: int | None) -> None:
        from django.conf import settings

        process_bound = getattr(settings, kind.process_setting) if kind.process_setting else None
        person_bound = getattr(settings, kind.person_setting)
        with self.lock:
            if person is not None and self.by_person[person] >= person_bound:
                raise TryLater(f"You already have {person_bound} {kind.doing} at once, the most one person may "
                              f"have. {kind.refused}; try again in a few seconds.", status=429,
                              code="too_many_at_once", retry_after=RETRY_AFTER_SECONDS)
            if process_bound is not None and self.running >= process_bound:
                raise TryLater(f"The server has as many {kind.doing} as it takes at once. {kind.refused}; try "
                              "again in a few seconds.", retry_after=RETRY_AFTER_SECONDS)
            self.running += 1
            if person is not None:
                self.by_person[person] += 1

    def leave(self, *, person: int | None) -> None:
        with self.lock:
            self.running -= 1
            if person is not None:
                self.by_person[person] -= 1
                if self.by_person[person] <= 0:
                    del self.by_person[person]

    def count(self, *, person: int | None = None) -> int:
        with self.lock:
            return self.running if person is None else self.by_person[person]


GATES: dict[str, Gate] = {name: Gate() for name in KINDS}


@contextmanager
def slow_work(kind: str, *, person: int | None) -> Iterator[None]:
    """Take one of ``kind``'s places for ``person`` (a user id; None for work on nobody's
    behalf, bounded by the process alone), give the database connection back, and run the
    block; the place is freed however it ends. Raises :class:`~core.errors.TryLater`
    when no place is free, and RuntimeError inside a transaction (see
    ``db_pool.connection_give_back_for_slow_work``)."""
    gate = GATES[kind]
    gate.enter(KINDS[kind], person=person)
    try:
        connection_give_back_for_slow_work()
        yield
    finally:
        gate.leave(person=person)
