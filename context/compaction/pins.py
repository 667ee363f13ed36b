"""CTX-50: pinned messages, kept verbatim through every compaction.

A pin names a record of the main line by its seq (``CompactionRequest.pinned``). A message
of the view is pinned when it was read from that record alone (source ``(s, s)``) or stands
for exactly that record through earlier checkpoints (trace ``((s, s),)``).

A pinned message that stays in a retained group is already verbatim. One that falls in the
summarized part is *placed*: quoted whole in a plain user message of its own, after the task
anchor and before the runtime-state block (``assemble_view``). A quote, never the message
itself: an assistant message with calls would need its results beside it, a tool result its
call, and a bare user message would read as a new question. The quote opens with fixed words
that say what it is and which record it is (``read_record {"seq": N}`` reads the original),
so the model tells it from a new question and the next compaction recognises it -- by those
words and by coming from no record, as the continuation summary and the runtime-state block
are -- and places it again while it is pinned, never twice.

Room: the placed pins together cost at most ``PIN_SHARE`` of the effective input. The newest
are kept; the oldest beyond that room are summarized like any other message, and so is a pin
larger than the whole room on its own (metrics ``pins_kept``, ``pins_summarized``). A pinned
message is also given to the summarizer when it is first summarized: the summary stays a
whole account (section 6 lists every user message) and an unpin later loses nothing. A placed
pin that is no longer pinned, or no longer fits, goes to the summarizer as the quote it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from context.records import content_text
from context.traces import Trace

from .state import is_runtime_state_message
from .types import Source
from .view import is_continuation_message

PIN_SHARE = 0.1  # CTX-50: the most the placed pins may cost, as a share of the effective input
PIN_OPENING = "[Pinned message, record seq "
_PIN_HEAD = (PIN_OPENING + "{seq}: an earlier message of this conversation, quoted verbatim by the platform because "
             "it was pinned. It is not a new message and asks nothing new; {who}:]\n")
_PIN_RE = re.compile(r"^\[Pinned message, record seq (\d+): ")


def is_pin_message(message: Any) -> bool:
    """True for a message made by ``pin_message`` (its fixed opening words)."""
    return (isinstance(message, Mapping) and message.get("role") == "user"
            and isinstance(message.get("content"), str) and _PIN_RE.match(message["content"]) is not None)


def pin_seq_of(message: Mapping[str, Any]) -> int:
    """The record seq a placed pin quotes (``is_pin_message`` must hold)."""
    match = _PIN_RE.match(message["content"])
    assert match is not None
    return int(match.group(1))


def _who(message: Mapping[str, Any]) -> str:
    role = message.get("role")
    if role == "assistant":
        return "you (the assistant) wrote"
    if role == "tool":
        return f"the result of tool call {message.get('tool_call_id') or '?'}"
    return "the user wrote"


def pin_message(seq: int, message: Mapping[str, Any]) -> dict[str, Any]:
    """The placed form of pinned record ``seq``'s message: a plain user message quoting it.

    Its text whole (images as ``[image]``, reasoning left out) and, for an assistant
    message, the calls it made, by name and arguments."""
    text = content_text(message.get("content"))
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            calls.append(f"[called {function.get('name') or '?'} with arguments {function.get('arguments') or ''}]")
    body = "\n".join(part for part in [text, *calls] if part)
    return {"role": "user", "content": _PIN_HEAD.format(seq=seq, who=_who(message)) + body}


def pinned_seq(source: Source, trace: Trace, pinned: frozenset[int]) -> int | None:
    """The pinned record a view's message was read from (or stands for), else None."""
    if source is not None and source[0] == source[1] and source[0] in pinned:
        return source[0]
    if len(trace) == 1 and trace[0][0] == trace[0][1] and trace[0][0] in pinned:
        return trace[0][0]
    return None


@dataclass(frozen=True)
class Pin:
    """A pinned message that may need placing: its record, where it is in the view, and its
    placed form with that form's cost."""

    seq: int
    index: int
    placed: dict[str, Any]
    cost: int


def pin_candidates(
    messages: Sequence[Mapping[str, Any]],
    sources: Sequence[Source],
    traces: Sequence[Trace],
    pinned: frozenset[int],
    *,
    cost_of: Callable[[Mapping[str, Any]], int],
    anchor: Mapping[str, Any] | None,
) -> list[Pin]:
    """Every pinned message of the view, once per record (its newest copy), oldest first: a
    message read from a pinned record, or an earlier placed pin whose record is still
    pinned. A message equal to the task anchor is left out: the anchor already keeps it
    verbatim, once."""
    found: dict[int, Pin] = {}
    if not pinned:
        return []
    for index, message in enumerate(messages):
        if sources[index] is None and is_pin_message(message):
            seq: int | None = pin_seq_of(message)
            placed = dict(message)
            if seq not in pinned:
                continue
        elif sources[index] is None and (is_continuation_message(message) or is_runtime_state_message(message)):
            continue  # a summary that consumed one pinned record stands for it, and is no pin
        else:
            seq = pinned_seq(sources[index], traces[index], pinned)
            if seq is None or message.get("role") not in ("user", "assistant", "tool"):
                continue
            if anchor is not None and message == anchor:
                continue
            placed = pin_message(seq, message)
        if seq is not None:  # the newest copy: one a retained group holds is never placed too
            found[seq] = Pin(seq, index, placed, cost_of(placed))
    return [found[seq] for seq in sorted(found)]


def choose_pins(candidates: Sequence[Pin], room: int) -> tuple[list[Pin], list[Pin]]:
    """Newest first while their total fits ``room``; the first that does not, and every
    older one, are left out (CTX-50: the oldest go). A pin that alone is larger than the
    whole room is left out first: it could never be kept, and it must not push out the
    older pins that fit. Returns (kept, left out), oldest first."""
    fitting = [pin for pin in candidates if pin.cost <= room]
    kept: list[Pin] = []
    used = 0
    for pin in reversed(fitting):
        if used + pin.cost > room:
            break
        used += pin.cost
        kept.append(pin)
    kept.reverse()
    chosen = {pin.seq for pin in kept}
    return kept, [pin for pin in candidates if pin.seq not in chosen]


def pin_room(effective: int, free: float) -> int:
    """What placed pins may cost: a tenth of the effective input, never more than ``free``
    (what is left below the threshold beside the rest of the view and the smallest summary)."""
    return max(0, min(int(effective * PIN_SHARE), int(free)))


@dataclass(frozen=True)
class PlacedPins:
    """What one compaction does with the pins (CTX-50): ``placed`` go into the view, oldest
    first; ``left_out`` are summarized for lack of room; ``retained`` are already verbatim in
    the retained groups; ``anchor_seq`` is the pinned record the task anchor quotes, if any
    (its restatement stands for that record, so a later compaction still finds it)."""

    placed: tuple[Pin, ...] = ()
    left_out: tuple[Pin, ...] = ()
    retained: int = 0
    anchor_seq: int | None = None
    room: int = 0

    @property
    def cost(self) -> int:
        return sum(pin.cost for pin in self.placed)

    def metrics(self) -> dict[str, Any]:
        return {"pins_kept": len(self.placed), "pins_summarized": len(self.left_out),
                "pins_summarized_seqs": [pin.seq for pin in self.left_out], "pins_retained": self.retained,
                "pins_room": self.room}


def place_pins(candidates: Sequence[Pin], *, start: int, room: int, anchor_seq: int | None) -> PlacedPins:
    """Choose the pins to place once the retained groups start at view index ``start``:
    those before it, newest first within ``room`` (``choose_pins``)."""
    placeable = [pin for pin in candidates if pin.index < start]
    placed, left_out = choose_pins(placeable, room)
    return PlacedPins(tuple(placed), tuple(left_out), len(candidates) - len(placeable), anchor_seq,
                      room if placeable else 0)


def anchor_pin_seq(messages: Sequence[Mapping[str, Any]], sources: Sequence[Source], traces: Sequence[Trace],
                   pinned: frozenset[int], anchor: Mapping[str, Any] | None) -> int | None:
    """The pinned record the task anchor is a copy of (the first question, pinned by
    default, is often the anchor of the first run), else None."""
    if anchor is None or not pinned:
        return None
    for index, message in enumerate(messages):
        if message == anchor:
            seq = pinned_seq(sources[index], traces[index], pinned)
            if seq is not None:
                return seq
    return None


EMPTY_PIN_METRICS = PlacedPins().metrics()
