"""CTX-41: which records a message of a view stands for, exactly.

A message read from a record stands for that record: ``((seq, seq),)``. A message of a
compacted view stands for what it stood for before the compaction -- a retained message
for its record, the continuation summary for every record its summary consumed, through
every earlier checkpoint -- so a later compaction can say exactly which records each of its
summaries replaced (records 7-16, 18, 21 and 22, not "21-22" because the rest came through
a checkpoint). A *trace* is that set of record seqs as sorted, disjoint ranges of
consecutive seqs; the empty trace means "from no record" (a placeholder, the runtime-state
block) or "not known" (a view saved before traces were kept).

Traces are stored as JSON (``[[first, last], ...]``) with a checkpoint's messages; what
comes back from storage is checked, and anything malformed is read as not known.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

Trace = tuple[tuple[int, int], ...]


def _is_seq(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def trace_union(traces: Iterable[Trace]) -> Trace:
    """The records of all ``traces``, as sorted ranges; ranges that touch (7-9 and 10-12)
    or overlap are one range."""
    ranges = sorted(r for trace in traces for r in trace)
    out: list[tuple[int, int]] = []
    for first, last in ranges:
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return tuple(out)


def trace_of_source(source: tuple[int, int] | None) -> Trace:
    """The trace of a projector source ``(first_seq, last_seq)``; empty for None."""
    return ((source[0], source[1]),) if source else ()


def trace_span(trace: Trace) -> tuple[int, int] | None:
    """The smallest ``(first, last)`` range holding ``trace``; None when it is empty."""
    return (trace[0][0], trace[-1][1]) if trace else None


def trace_json(trace: Trace) -> list[list[int]]:
    """``trace`` as JSON: ``[[first, last], ...]``."""
    return [[first, last] for first, last in trace]


def trace_from_json(value: Any) -> Trace:
    """A stored trace read back; empty (not known) when it is not a list of
    ``[first, last]`` pairs of record seqs."""
    if not isinstance(value, (list, tuple)):
        return ()
    ranges: list[tuple[int, int]] = []
    for pair in value:
        if (not isinstance(pair, (list, tuple)) or len(pair) != 2 or not all(_is_seq(v) for v in pair)
                or pair[0] > pair[1]):
            return ()
        ranges.append((pair[0], pair[1]))
    return trace_union([tuple(ranges)])


def traces_from_json(value: Any, count: int) -> list[Trace] | None:
    """The stored traces of ``count`` messages read back, one per message; None when they
    are missing or not one per message (then nothing is known of any of them)."""
    if not isinstance(value, (list, tuple)) or len(value) != count:
        return None
    return [trace_from_json(item) for item in value]


def traces_json(traces: Sequence[Trace]) -> list[list[list[int]]]:
    """``traces`` (one per message) as JSON."""
    return [trace_json(trace) for trace in traces]
