"""What the context inspector adds to each call's messages: the whole body's top-level
fields as sent, what the call answered, the diff to the previous call of its instance and
purpose, the repairs the projector made, the provider's usage.

Plain Python, like ``display``: a call's pairing in (``sessions.selectors.inspector``: the
previous call and the diff, computed once for the API and the console), frozen rows out
for the template. The view (``pages.context_view``) decides what is read and audits it.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from context.request_diff import ADDED, KEPT, REMOVED, REWRITTEN
from sessions.admin.display import MessageView, SentMessage, Text, as_json, message_view, sent_messages, text
from sessions.selectors.inspector import CallPairing

# How people read each repair kind the projector reports (SPEC §3: pairing, unknown
# outcomes, late results, call ids, interrupted streams, tool output size, screenshots).
REPAIR_LABELS = {
    "truncated": "Tool output cut to fit",
    "unknown_outcome": "Unknown outcome: result written in",
    "late_result": "Late result placed after its call",
    "id_rewritten": "Call id renumbered",
    "call_dropped": "Unanswered call left out",
    "orphan_result_dropped": "Result without its call left out",
    "screenshot_trimmed": "Old screenshot replaced by a note",
    "interrupted_text": "Interrupted answer kept, marked",
    "arguments_wrapped": "Malformed arguments wrapped",
    "image_left_out": "Older image left out (provider's image limits)",
}

STATUS_LABELS = {KEPT: "kept", REWRITTEN: "rewritten", ADDED: "new", REMOVED: "removed"}

# Body fields shown in their own tables below the field list rather than as JSON.
LISTED_BELOW = {"messages": "the messages, listed below", "tools": "the tools, listed below",
                "system": "the system text, listed below as the first message"}


@dataclass(frozen=True)
class BodyField:
    """One top-level field of the body a call sent, in the order it was sent: its JSON
    (``value``), or where on the page it is listed instead (``listed``)."""

    name: str
    value: Text | None
    listed: str


def body_fields(request: Any) -> list[BodyField] | None:
    """Every top-level field of the body the call sent, in order — ``model``,
    ``max_tokens``, ``stream``, ``stream_options`` and the rest as well as the messages.
    The body holds no key (keys travel in headers). None when the call was logged before
    bodies were stored by reference, or its copy was dropped (retention)."""
    stored = request if isinstance(request, dict) else {}
    if stored.get("v") != 2 or stored.get("pruned"):
        return None
    fields = stored.get("fields")
    fields = fields if isinstance(fields, dict) else {}
    shown = []
    for name in stored.get("order") or []:
        name = str(name)
        if name in LISTED_BELOW:
            shown.append(BodyField(name=name, value=None, listed=LISTED_BELOW[name]))
        elif name in fields:
            shown.append(BodyField(name=name, value=text(as_json(fields[name]), mono=True, head_chars=400), listed=""))
    return shown


@dataclass(frozen=True)
class CallOutput:
    """What the call answered (redacted like its record), and why the answer ended."""

    finish_reason: str
    message: MessageView


def call_output(request: Any) -> CallOutput | None:
    """The call's answer: its text, reasoning and tool calls, and the finish reason. None
    for a call that got no answer (it failed) or was logged before answers were kept."""
    stored = request if isinstance(request, dict) else {}
    output = stored.get("output")
    if not isinstance(output, dict) or not isinstance(output.get("message"), dict):
        return None
    return CallOutput(finish_reason=str(output.get("finish_reason") or ""), message=message_view(output["message"]))


@dataclass(frozen=True)
class RepairView:
    kind: str
    label: str
    reason: str
    seq: int | None
    position: int | None
    call_id: str
    record_url: str | None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def repair_views(repairs: Sequence[Any], *, record_url: Callable[[int], str]) -> list[RepairView]:
    """The call's repairs for people, in the order the projector reported them; a repair
    that names a record links to it on the (audited) records page."""
    views = []
    for repair in repairs:
        repair = repair if isinstance(repair, dict) else {"kind": str(repair)}
        kind = str(repair.get("kind") or "?")
        seq = _int(repair.get("seq"))
        views.append(RepairView(kind=kind, label=REPAIR_LABELS.get(kind, kind.replace("_", " ")),
                                reason=str(repair.get("reason") or ""), seq=seq, position=_int(repair.get("position")),
                                call_id=str(repair.get("call_id") or ""),
                                record_url=record_url(seq) if seq is not None and seq > 0 else None))
    return views


@dataclass(frozen=True)
class SentLine:
    """One row of a call's message table: a message this call sent (``message``) or one the
    previous call sent that this one no longer does (``removed``)."""

    status: str  # kept, rewritten, added, removed; "" for an instance's first call
    message: SentMessage | None
    before_index: int | None
    previous: MessageView | None  # what stood here in the previous call (rewritten, removed)
    first_change: bool
    repairs: tuple[RepairView, ...]

    @property
    def status_label(self) -> str:
        return STATUS_LABELS.get(self.status, "")


@dataclass(frozen=True)
class CallChange:
    """The call against the previous call of its instance and purpose."""

    previous_id: int | None
    previous_url: str | None  # set when the previous call belongs to an earlier run (another page)
    pruned: int | None  # the call (this one or the previous) whose copy retention dropped: no diff
    first_changed: int | None
    counts: dict[str, int]
    tools_changed: bool
    sent: int

    @property
    def compared(self) -> bool:
        return self.previous_id is not None and self.pruned is None

    @property
    def reusable(self) -> int:
        """Messages at the start a prompt cache could still match (the first changed position)."""
        return self.sent if self.first_changed is None else min(self.first_changed, self.sent)


def sent_lines(pairing: CallPairing, *, repairs: Sequence[RepairView],
               previous_url: str | None = None) -> tuple[CallChange, list[SentLine]]:
    """The call's messages in order, each with its status since the previous call and its
    repairs; the removed ones stand where they were. Nothing is marked when the pairing
    compared nothing (a sub-instance's first call of a purpose, a session's first, a copy
    the retention period dropped)."""
    entries, previous, diff = pairing.entries, pairing.previous_entries, pairing.diff
    previous_id = pairing.previous.pk if pairing.previous is not None else None
    sent = sent_messages(entries)
    by_position: dict[int, list[RepairView]] = {}
    for repair in repairs:
        if repair.position is not None:
            by_position.setdefault(repair.position, []).append(repair)

    def line(status: str, index: int | None, before: int | None, first: bool) -> SentLine:
        old = message_view(previous[before].message) if previous is not None and before is not None and \
            status in (REWRITTEN, REMOVED) else None
        return SentLine(status=status, message=sent[index] if index is not None else None, before_index=before,
                        previous=old, first_change=first,
                        repairs=tuple(by_position.get(index, ())) if index is not None else ())

    if diff is None:
        change = CallChange(previous_id=previous_id, previous_url=previous_url, pruned=pairing.pruned,
                            first_changed=None, counts={}, tools_changed=False, sent=len(sent))
        return change, [line("", i, None, False) for i in range(len(sent))]
    first = pairing.first_changed
    lines: list[SentLine] = []
    marked = False
    for span in diff.spans:
        for k in range(max(span.before_end - span.before_start, span.after_end - span.after_start)):
            before = span.before_start + k if span.status != ADDED else None
            index = span.after_start + k if span.status != REMOVED else None
            # The first line at the first changed position; a removal there counts, since
            # the cache stops where the removed message stood.
            at_first = not marked and first == (span.after_start if index is None else index)
            marked = marked or at_first
            lines.append(line(span.status, index, before, at_first))
    change = CallChange(previous_id=previous_id, previous_url=previous_url, pruned=None, first_changed=first,
                        counts=diff.counts, tools_changed=pairing.tools_changed, sent=len(sent))
    return change, lines
