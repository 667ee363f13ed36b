"""The projector's second pass: pairing, ids, placeholders, late results, screenshots.

It reads the items the first pass (``reader.Reader``) collected and writes the
message list. It can start part-way: a *settled* prefix of the items — one whose output
no record appended later can change — is kept with its output (``Settled``), and the
next pass reads only the items after it. That is what keeps a step's cost proportional
to what is new rather than to the session's length (LOOP-1).

When is a prefix settled? Its output depends on later records only through calls: a
call still waiting for its result may yet be answered (and every call id after it is
numbered by position, CTX-5), or be dropped or get a placeholder depending on whether
its run goes on (CTX-2, CTX-3). So a prefix is settled when every call in it either has
its in-time or late result inside the prefix too, or belongs to a run that has ended:
such a call shows a placeholder (or, cut by a Stop, nothing) whatever comes later, and a
result that arrives for it is its late result, shown where it arrives (CTX-4) — the pass
hands these calls to the next one (``Settled.ended``) for that. Results only ever answer
earlier calls and run closures are read between two positions, so nothing appended can
change such a prefix, with three exceptions: a run that is resumed (a ``resumed``
status) makes its ended calls pending again, so the settled prefix is dropped; a
checkpoint record replaces everything read before it, and with it the settled prefix; a
newer screenshot strips the images of older ones (CTX-8), and that one message is
replaced (never changed in place) in the kept output.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from context import records as rec
from context.ids import IdAllocator, is_portable_id
from context.media import trim_screenshots
from context.pairing import Call, Closures, Result, call_outcome, pair
from context.traces import Trace

# One item of the first pass (``reader.Reader.items``): (tag, a, b, run, seq, origin): origin a record's
# seq, or the trace of a checkpoint's or starting view's message (CTX-41).
Item = tuple[int, Any, Any, Any, Any, Any]

# What the first pass makes of a record: a plain message, an assistant message (with its
# calls), a result.
ITEM_MESSAGE, ITEM_ASSISTANT, ITEM_RESULT = 0, 1, 2
_OPEN = float("inf")  # the closing position of a call nothing has answered yet


def note(kind: str, reason: str, seq: Any, **extra: Any) -> dict[str, Any]:
    """One repair: what the read changed, why, and the record it came from."""
    return {"kind": kind, "reason": reason, "seq": seq if isinstance(seq, int) else None, **extra}


@dataclass
class Settled:
    """The output of a settled prefix of the first pass's items, kept between passes.

    ``generation`` is the reader's (checkpoints applied, runs resumed): a change makes the
    prefix void.
    """

    generation: tuple[int, int] = (-1, -1)
    items: int = 0
    out: list[dict[str, Any]] = field(default_factory=list)
    sources: list[tuple[int, int] | None] = field(default_factory=list)
    traces: list[Trace] = field(default_factory=list)
    repairs: list[dict[str, Any]] = field(default_factory=list)  # screenshot trims are never kept
    imaged: list[int] = field(default_factory=list)  # screen observations that had images
    ids: int = 0
    seen_ids: set[Any] = field(default_factory=set)
    ended: list[Call] = field(default_factory=list)  # unanswered calls of ended runs, in read order


def _late_content(call: Call, result: Result) -> str | list[dict[str, Any]]:
    header = rec.LATE_RESULT_HEADER.format(
        call_id=call.new_id, name=call.name, seq=result.seq, status=result.status)
    return rec.prefix_content(result.content, header + "\n")


def _source(seq: Any) -> tuple[int, int] | None:
    # Only a real record seq is a source; junk seqs and view/checkpoint messages are None.
    return (seq, seq) if isinstance(seq, int) and not isinstance(seq, bool) else None


def _result_source(result: Result) -> tuple[int, int] | None:
    return _source(result.seq) if result.scope[0] == "records" else None


def _trace(origin: Any) -> Trace:
    # CTX-41: a record's seq stands for that record; a checkpoint's or a starting view's
    # message carries the trace it was stored with (empty: not known).
    if isinstance(origin, tuple):
        return origin
    return ((origin, origin),) if isinstance(origin, int) and not isinstance(origin, bool) else ()


def _pair_tail(items: list[Item], closures: Closures, ended: list[Call], once: bool) -> dict[int, int]:
    """Pair the calls and results of ``items`` afresh, after the ``ended`` calls of the
    settled prefix; returns each result's position (nothing when ``once``)."""
    for call in ended:
        call.late = None  # a pass before this one may have found its late result
    entries: list[Call | Result] = []
    positions: dict[int, int] = {}
    for position, (tag, a, b, _, _, _) in enumerate(items):
        if tag == ITEM_ASSISTANT:
            if not once:
                for call in b:
                    call.answer = call.late = None  # a pass before this one may have paired it
            entries.extend(b)
        elif tag == ITEM_RESULT:
            entries.append(a)
            if not once:
                a.call = None
                positions[id(a)] = position
    pair(entries, closures, ended)
    return positions


def assemble(items: list[Item], closures: Closures, notes: dict[int, list[dict[str, Any]]],
             open_runs: Collection[Any], screen_tools: Collection[str], settled: Settled,
             repairs: list[dict[str, Any]] | None, once: bool = False,
             track: bool = True) -> tuple[list[dict[str, Any]], list[tuple[int, int] | None], list[Trace]]:
    """Write the output for ``items``, starting after ``settled`` (which is moved forward
    to the longest settled prefix). Returns the messages, and one source and one trace per
    message (none unless ``track``); ``repairs`` (when a list) receives every repair, each with its
    ``position``. ``once``: no pass comes after this one (``project_records``), so nothing
    is kept and the items' own dicts may become the output."""
    start = settled.items
    tail = items[start:]
    positions = _pair_tail(tail, closures, settled.ended, once)
    ended: list[Call] = []  # this pass's calls that settle unanswered (their run has ended)
    ids = IdAllocator(start=settled.ids)
    seen_ids = settled.seen_ids
    tail_seen: list[Any] = []  # raw ids of this pass's kept calls, in order (a set beside it for lookups)
    tail_seen_set: set[Any] = set()
    out = list(settled.out)
    sources = list(settled.sources)
    traces = list(settled.traces)
    found: list[dict[str, Any]] = list(settled.repairs) if repairs is not None else []
    screens: list[int] = []  # this pass's screen observations
    closes = -1.0  # the last position a call read so far waits for
    mark: tuple[int, ...] | None = None  # (items, out, repairs, ids, seen, ended) at the last settled boundary

    def repaired(position: int, new: list[dict[str, Any]]) -> None:
        if repairs is not None:
            found.extend({**item, "position": position} for item in new)

    for offset, (tag, a, b, _, _, origin) in enumerate(tail):
        if tag == ITEM_MESSAGE:
            out.append(a)
            if track:
                sources.append(_source(origin))
                traces.append(_trace(origin))
        elif tag == ITEM_ASSISTANT:
            # Only an assistant message opens calls, so the last settled boundary is before
            # one of them or at the end: marks are taken there alone.
            if closes < offset and not once:
                mark = (start + offset, len(out), len(found), ids.count, len(tail_seen), len(ended))
            for call in b if not once else ():
                answer = call.answer or call.late
                if answer is not None:
                    closes = max(closes, positions.get(id(answer), _OPEN))
                elif closures.closed_between(call.run, call.index):
                    ended.append(call)  # settled unanswered: whatever comes, its view stays
                else:
                    closes = _OPEN  # pending: it may yet be answered, or dropped
            kept = [c for c in b if c.answer is not None or call_outcome(c, closures, open_runs) != "drop"]
            if repairs is not None:
                repaired(len(out), notes.get(id(a), []) + [
                    note("call_dropped", f"{c.name}: no result in a run still going, or cut by a Stop (CTX-2)", origin,
                         call_id=c.raw_id) for c in b if c not in kept and not c.from_partial])
            if not kept and a["content"] is None:
                continue
            message = a if once else dict(a)  # a later pass reads the item again: never changed
            if kept:
                calls = []
                for call in kept:
                    call.new_id = ids.allocate()
                    calls.append({"id": call.new_id, "type": "function",
                                  "function": {"name": call.name, "arguments": call.arguments}})
                    # Every id is renumbered; only one the provider would have refused
                    # or confused (missing, outside the portable pattern, reused) is news.
                    if repairs is not None:
                        if not is_portable_id(call.raw_id) or call.raw_id in seen_ids or call.raw_id in tail_seen_set:
                            repaired(len(out), [note("id_rewritten", f"{call.raw_id!r} is missing, reused or not "
                                                                     f"accepted by every provider; sent as "
                                                                     f"{call.new_id!r} (CTX-5)", origin,
                                                     call_id=call.new_id)])
                        tail_seen.append(call.raw_id)
                        tail_seen_set.add(call.raw_id)
                message["tool_calls"] = calls
            out.append(message)
            if track:
                sources.append(_source(origin))
                traces.append(_trace(origin))
            for call in kept:
                answer = call.answer
                content = answer.content if answer is not None else rec.UNKNOWN_OUTCOME_TEXT
                if repairs is not None:
                    repaired(len(out), notes.get(id(answer), []) if answer is not None else [note(
                        "unknown_outcome", f"{call.name}: its run ended without a result; a placeholder says it may "
                                           "or may not have happened (CTX-3)", origin, call_id=call.new_id)])
                out.append({"role": "tool", "tool_call_id": call.new_id, "content": content})
                if track:  # a placeholder comes from no record
                    sources.append(_result_source(answer) if answer is not None else None)
                    traces.append(_trace(answer.origin) if answer is not None else ())
                if answer is not None and (answer.screen or call.name in screen_tools):
                    screens.append(len(out) - 1)
        else:
            call = a.call
            if call is None and repairs is not None:
                repaired(len(out), [note("orphan_result_dropped", "a result that answers no earlier call, or "
                                                                  "answers one a second time (CTX-2, CTX-6)", a.seq)])
            if call is not None and call.late is a and call.new_id:
                if repairs is not None:
                    repaired(len(out), [note("late_result", f"the result of {call.name} arrived after its run had "
                                                            "ended; shown where it arrived (CTX-4)", a.seq,
                                             call_id=call.new_id)])
                out.append({"role": "user", "content": _late_content(call, a)})
                if track:
                    sources.append(_result_source(a))
                    traces.append(_trace(a.origin))
                if a.screen or call.name in screen_tools:
                    screens.append(len(out) - 1)
    if closes < len(tail) and not once:
        mark = (start + len(tail), len(out), len(found), ids.count, len(tail_seen), len(ended))
    imaged = list(settled.imaged)
    trimmed = trim_screenshots(out, imaged, screens)
    if mark is not None:
        items_settled, length, found_length, settled.ids, seen_length, ended_length = mark
        # An ended call whose late result is now settled too waits for nothing any more.
        boundary = items_settled - start
        settled.ended = [c for c in settled.ended if c.late is None or positions.get(id(c.late), _OPEN) >= boundary]
        settled.ended += ended[:ended_length]
        settled.items = items_settled
        settled.out, settled.sources = out[:length], sources[:length] if track else []
        settled.traces = traces[:length] if track else []
        settled.repairs = found[:found_length] if repairs is not None else []
        settled.imaged = imaged[:bisect_left(imaged, length)]
        seen_ids.update(tail_seen[:seen_length])
    if repairs is not None:
        repairs[:] = found
        for position in trimmed:
            repairs.append(note("screenshot_trimmed", "an older screen observation: only the newest keeps its "
                                                      "images (CTX-8)", None, position=position))
    return out, sources, traces
