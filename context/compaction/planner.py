"""CTX-31/32: which groups stay verbatim, and how the rest is cut into summary segments.

A view is read as *groups*: a user message alone, or an assistant message with all of its
tool results (the rule of ``context.legacy.message_groups``). An earlier continuation
summary, an earlier runtime-state block, a restated task anchor and a placed pin (CTX-50)
are groups of their own and never retained: the summary is carried forward through the
summarizer, the others are rebuilt. Groups are retained newest-first while they fit; the rest becomes
summarizer input, in order, one text item per group -- or, for a completed group too
large for one call, ordered fragments -- packed greedily into segments.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from context.traces import Trace, trace_union

from .pins import is_pin_message
from .state import is_runtime_state_message
from .types import Source
from .view import is_continuation_message, restates_anchor

CHAT, SUMMARY, STATE, RESTATED, PINNED = "chat", "summary", "state", "restated", "pinned"
_FRAGMENT_LABEL = "[one interaction, part {k} of {m}{more}]\n"


@dataclass(frozen=True)
class Group:
    """Messages ``start:stop`` of the view, of one kind, with their estimated cost."""

    start: int
    stop: int
    kind: str
    cost: int


@dataclass(frozen=True)
class Item:
    """One piece of summarizer input: a group's text or one fragment of it, and the
    records its group stands for (``trace``, CTX-41)."""

    text: str
    cost: int
    trace: Trace
    group: int
    messages: int


def merge_sources(sources: Sequence[Source]) -> Source:
    """The smallest (first, last) range holding every known source; None if none is known."""
    known = [s for s in sources if s is not None]
    if not known:
        return None
    return (min(s[0] for s in known), max(s[1] for s in known))


def split_groups(messages: Sequence[Mapping[str, Any]], sources: Sequence[Source],
                 costs: Sequence[int]) -> list[Group]:
    """Cut a view into groups (see the module docstring).

    Special messages are recognised only when they come from no record: a user who types
    the continuation preamble into a question is still asking a question.
    """
    groups: list[Group] = []
    start = 0
    kind = CHAT

    def close(stop: int) -> None:
        if stop > start:
            groups.append(Group(start, stop, kind, sum(costs[start:stop])))

    for i, message in enumerate(messages):
        special = None
        if sources[i] is None:
            if is_continuation_message(message):
                special = SUMMARY
            elif is_runtime_state_message(message):
                special = STATE
            elif is_pin_message(message):
                special = PINNED  # CTX-50: placed again from the pins, or summarized (pins.py)
            elif (message.get("role") == "user" and i > 0 and sources[i - 1] is None
                  and restates_anchor(messages[i - 1])):
                special = RESTATED
        if message.get("role") == "tool" and special is None and i > 0 and kind == CHAT:
            continue  # a tool message joins the assistant message before it
        close(i)
        start, kind = i, special or CHAT
    close(len(messages))
    return groups


def select_retained(
    groups: Sequence[Group],
    messages: Sequence[Mapping[str, Any]],
    *,
    budget: int,
    anchor: Mapping[str, Any] | None,
    anchor_cost: int,
    newest_room: int,
    fit_newest: Callable[[Group, int], tuple[list[dict[str, Any]], int] | None],
) -> tuple[int, list[dict[str, Any]] | None]:
    """Choose the retained suffix newest-first under ``budget`` (CTX-31).

    The newest group is what the model is about to continue from -- an answer a Stop cut
    off, a tool group in flight, the question itself -- so it is kept verbatim whenever
    the view can hold it (``newest_room``: what is left below the threshold beside the
    required content and the smallest summary), over ``budget`` if need be; only if it
    is larger still are its tool outputs cut to fit (``fit_newest``, CTX-42). Older groups
    are kept while they fit what is left of ``budget``.

    Returns the index of the first retained group (``len(groups)`` when none is) and,
    when the newest group was kept only after its tool outputs were cut, its new
    messages. The anchor's cost is already reserved in ``budget`` and ``newest_room``; a
    group that holds it gives that reservation back.
    """
    remaining = budget
    first = len(groups)
    fitted: list[dict[str, Any]] | None = None
    reserved = anchor is not None
    for index in range(len(groups) - 1, -1, -1):
        group = groups[index]
        if group.kind != CHAT:
            break  # never retained, and everything before it is older
        cost = group.cost
        holds_anchor = reserved and any(messages[j] == anchor for j in range(group.start, group.stop))
        if holds_anchor:
            cost -= anchor_cost
        newest = index == len(groups) - 1
        if cost <= remaining or (newest and cost <= newest_room):
            remaining -= cost
            first = index
            reserved = reserved and not holds_anchor
            continue
        if newest:
            cut = fit_newest(group, max(remaining, newest_room))
            if cut is not None:
                fitted, first = cut[0], index
        break
    return first, fitted


def fragments(text: str, *, limit: int, cost_of: Callable[[str], int]) -> list[str]:
    """Cut ``text`` into ordered, labelled fragments each costing at most ``limit``.

    Cuts prefer a line break in the last quarter of a piece; nothing is dropped. Each
    fragment says which part of one interaction it is, so the summarizer reads them as
    one continued group.
    """
    label_room = cost_of(_FRAGMENT_LABEL.format(k=9999, m=9999, more="; it continues in the next part"))
    room = limit - label_room
    if room < 16:
        raise ValueError("no room for a fragment")
    pieces: list[str] = []
    position = 0
    while position < len(text):
        # A unit rarely covers more than a few characters, so the piece that fits lies
        # within ``room * 8`` characters; searching only there keeps this linear (and if
        # a unit ever covers more, the piece is merely smaller than it could be).
        rest = text[position:position + max(room * 8, 64)]
        if position + len(rest) == len(text) and cost_of(rest) <= room:
            pieces.append(rest)
            break
        low, high = 1, len(rest)  # the largest prefix that fits
        while low < high:
            middle = (low + high + 1) // 2
            if cost_of(rest[:middle]) <= room:
                low = middle
            else:
                high = middle - 1
        cut = rest.rfind("\n", (3 * low) // 4, low)
        cut = cut + 1 if cut > 0 else low
        pieces.append(rest[:cut])
        position += cut
    total = len(pieces)
    return [_FRAGMENT_LABEL.format(k=k, m=total, more="; it continues in the next part" if k < total else "") + piece
            for k, piece in enumerate(pieces, start=1)]


def build_items(
    groups: Sequence[Group],
    texts: Sequence[str],
    traces: Sequence[Trace],
    *,
    limit: int,
    cost_of: Callable[[str], int],
) -> list[Item]:
    """Summarizer input items for ``groups`` (whose rendered texts are ``texts``; the
    view's messages stand for the records of ``traces``)."""
    items: list[Item] = []
    for index, (group, text) in enumerate(zip(groups, texts)):
        if not text:
            continue
        trace = trace_union(traces[group.start:group.stop])
        count = group.stop - group.start
        cost = cost_of(text)
        if cost <= limit:
            items.append(Item(text, cost, trace, index, count))
            continue
        for piece in fragments(text, limit=limit, cost_of=cost_of):
            items.append(Item(piece, cost_of(piece), trace, index, count))
    return items


def pack(items: Sequence[Item], limit: int) -> list[list[Item]]:
    """Greedy, in order: a segment takes items while their total cost fits ``limit``."""
    segments: list[list[Item]] = []
    used = 0
    for item in items:
        if segments and used + item.cost <= limit:
            segments[-1].append(item)
            used += item.cost
        else:
            segments.append([item])
            used = item.cost
    return segments
