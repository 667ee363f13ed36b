"""CTX-2, CTX-3, CTX-4, CTX-6: which results answer which calls.

Pairing never trusts ids to be unique. Real transcripts reuse them (a quarter of the
tau-bench conversations do), parallel calls can share one, and an id may come back in a
later run. So a result answers the *earliest unanswered earlier call with its id, in the
same scope* -- a scope being one instance's records, or one checkpoint's own messages --
preferring a call whose run is still going over one whose run has since ended.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Collection, Hashable, Sequence
from typing import Any

# Where a call or result was read: ("records", instance) or ("checkpoint", seq, index).
Scope = tuple[Hashable, ...]


class Call:
    """One tool call as read from an assistant message."""

    __slots__ = (
        "raw_id", "scope", "run", "index", "name", "arguments", "from_partial",
        "answer", "late", "new_id",
    )

    def __init__(self, raw_id: Any, scope: Scope, run: Any, index: int, name: str,
                 arguments: str, from_partial: bool) -> None:
        self.raw_id = raw_id
        self.scope = scope
        self.run = run
        self.index = index  # position in the read, used to order it against run closures
        self.name = name
        self.arguments = arguments
        self.from_partial = from_partial
        self.answer: Result | None = None  # the in-time result (CTX-2)
        self.late: Result | None = None  # a result that came after the run ended (CTX-4)
        self.new_id = ""


class Result:
    """One stored tool result (or delegation result), not yet paired."""

    __slots__ = ("raw_id", "scope", "index", "seq", "status", "content", "screen", "origin", "call")

    def __init__(self, raw_id: Any, scope: Scope, index: int, seq: Any, status: str,
                 content: Any, screen: bool, origin: Any = None) -> None:
        self.raw_id = raw_id
        self.scope = scope
        self.index = index
        self.seq = seq
        self.status = status
        self.content = content
        self.screen = screen  # flagged observes_screen by the record itself
        self.origin = origin  # its record's seq, or the trace of a checkpoint's message (CTX-41)
        self.call: Call | None = None


class Closures:
    """When runs ended — and were reopened — as positions in the read.

    A run ends at its ``run_status`` record, and every run ends when a run never seen
    before starts: only one run of a session is active at a time, so a new run's first
    record means the earlier ones are over, even if a worker died before writing a status.
    A ``run_status`` record saying the run was resumed reopens it: from there on it is
    going again, so its pending calls are pending, not of a closed run. Any other record
    that merely carries an older run's id (a late result) starts nothing and ends nothing.
    """

    def __init__(self) -> None:
        self._ends: dict[Any, list[int]] = {}
        self._reopens: dict[Any, list[int]] = {}
        self._starts: list[int] = []
        self._seen: set[Any] = set()
        self.latest_run: Any = None

    def see(self, run: Any, index: int, is_status: bool, reopens: bool = False) -> None:
        """Note a record of ``run`` at ``index``; ``is_status`` for a run_status record,
        ``reopens`` for one that says the run was resumed."""
        if run not in self._seen:
            self._seen.add(run)
            self._starts.append(index)
            self.latest_run = run
        if reopens:
            self._reopens.setdefault(run, []).append(index)
        elif is_status:
            self._ends.setdefault(run, []).append(index)

    @staticmethod
    def _last_between(marks: list[int] | None, start: int, end: int | None) -> int | None:
        """The last mark strictly between ``start`` and ``end`` (None: no end)."""
        if not marks:
            return None
        i = bisect_right(marks, start)
        j = len(marks) if end is None else bisect_right(marks, end - 1)
        return marks[j - 1] if j > i else None

    def closed_between(self, run: Any, start: int, end: int | None = None) -> bool:
        """True when ``run`` ended after position ``start`` and was not reopened since, as
        seen at ``end`` (or at the end of the read)."""
        ended = [mark for mark in (self._last_between(self._starts, start, end),
                                   self._last_between(self._ends.get(run), start, end)) if mark is not None]
        if not ended:
            return False
        reopened = self._last_between(self._reopens.get(run), start, end)
        return reopened is None or reopened < max(ended)


class _Waiting:
    """Unanswered calls of one (scope, id), in read order.

    ``open`` holds calls whose run had not ended when last looked at; ``closed`` those
    whose run had. A run that has ended stays ended, so a call moves from open to closed
    once and is never scanned again: pairing stays linear even when one id is reused
    thousands of times and many of its calls never get an answer.
    """

    __slots__ = ("open", "closed")

    def __init__(self) -> None:
        self.open: deque[Call] = deque()
        self.closed: deque[Call] = deque()


def pair(calls_and_results: list[Call | Result], closures: Closures, ended: Sequence[Call] = ()) -> None:
    """Annotate calls with their answer or late result, in read order.

    A result answers the earliest unanswered earlier call with its id whose run is still
    going — or going again, resumed since it ended; if every such call's run has ended, it
    is the late result of the earliest one (CTX-4). A result with no id, or with no
    unanswered earlier call of that id, stays unpaired: an orphan or a second answer, both
    left out of the view (CTX-2, CTX-6).

    ``ended`` are unanswered calls read before these entries whose run has ended, in read
    order: a pass that starts part-way (``output_pass``) hands them over, so that a result
    arriving now is still their late result.
    """
    waiting: dict[tuple[Hashable, Any], _Waiting] = {}
    for call in ended:  # few: set up the plain way
        if call.raw_id is not None:
            waiting.setdefault((call.scope, call.raw_id), _Waiting()).closed.append(call)
    for entry in calls_and_results:
        if isinstance(entry, Call):
            if entry.raw_id is not None:
                key = (entry.scope, entry.raw_id)
                queue = waiting.get(key)
                if queue is None:
                    queue = waiting[key] = _Waiting()
                queue.open.append(entry)
            continue
        if entry.raw_id is None:
            continue
        queue = waiting.get((entry.scope, entry.raw_id))
        if queue is None:
            continue
        while queue.open and closures.closed_between(queue.open[0].run, queue.open[0].index, entry.index):
            queue.closed.append(queue.open.popleft())
        if queue.open:
            call = queue.open.popleft()
            call.answer = entry
            entry.call = call
            continue
        # A call whose run ended and was then resumed is pending again: its re-run result
        # is its answer, not a late one (RUN-6).
        for position, call in enumerate(queue.closed):
            if not call.from_partial and not closures.closed_between(call.run, call.index, entry.index):
                del queue.closed[position]
                call.answer = entry
                entry.call = call
                break
        else:
            # Calls from a cut stream were never run (LOOP-7): a result cannot be late for one.
            while queue.closed and queue.closed[0].from_partial:
                queue.closed.popleft()
            if queue.closed:
                call = queue.closed.popleft()
                call.late = entry
                entry.call = call


def call_outcome(call: Call, closures: Closures, open_runs: Collection[Any]) -> str:
    """Decide what the view shows for a call: ``paired``, ``unknown`` or ``drop``.

    - paired: it has an in-time result.
    - unknown: its run has ended and no in-time result exists (CTX-3); a late result, if
      any, is shown where it arrived (CTX-4).
    - drop: it is still pending in an open run, or it came from a cut stream and so was
      never executed (CTX-2, CTX-6).
    """
    if call.answer is not None:
        return "paired"
    if call.from_partial:
        return "drop"
    if call.late is not None:
        return "unknown"
    if call.run in open_runs and not closures.closed_between(call.run, call.index):
        return "drop"
    return "unknown"
