"""What changed between two requests of one conversation: the context inspector's diff.

Providers cache prompts by prefix: a request reuses the cached work of an earlier one up
to the first message that differs, and pays for everything after it. So the figure that
matters is the **first changed position**; the rest of the diff says why it moved there —
messages appended by a step, a history summarized away by a compaction, a tool result
cut to fit, call ids renumbered.

Pure: two lists of sent messages in (any JSON values — OpenAI chat messages, Anthropic
Messages-API turns with content blocks), a ``RequestDiff`` out. Two messages are the same
when their JSON is, keys in any order, ignoring ``cache_control`` marks (a breakpoint moves
to the newest message every step; providers do not count it when matching a prefix).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

KEPT = "kept"
REWRITTEN = "rewritten"
ADDED = "added"
REMOVED = "removed"
STATUSES = (KEPT, REWRITTEN, ADDED, REMOVED)

# Keys that mark a request for the provider without being part of what it caches.
IGNORED_KEYS = frozenset({"cache_control"})


@dataclass(frozen=True)
class DiffSpan:
    """A run of positions with one status: ``[before_start, before_end)`` of the previous
    request and ``[after_start, after_end)`` of this one (an empty range for added or
    removed messages). Rewritten spans pair their positions one to one."""

    status: str
    before_start: int
    before_end: int
    after_start: int
    after_end: int

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "before": [self.before_start, self.before_end],
                "after": [self.after_start, self.after_end]}


@dataclass(frozen=True)
class DiffRow:
    """One position of the diff: an index of this request (kept, rewritten, added) and/or
    of the previous one (kept, rewritten, removed)."""

    status: str
    before: int | None
    after: int | None


@dataclass(frozen=True)
class RequestDiff:
    """``first_changed`` is the index of this request's first message that is not the
    previous request's message at the same place — where a prompt cache stops matching;
    the length of this request when it only dropped messages at the end; None when the
    two requests send the same messages. ``spans`` cover both requests in order."""

    first_changed: int | None
    spans: tuple[DiffSpan, ...]

    @property
    def rows(self) -> tuple[DiffRow, ...]:
        """Every position in order; a rewritten or replaced stretch lists what was removed
        before what was added."""
        rows: list[DiffRow] = []
        for span in self.spans:
            if span.status in (KEPT, REWRITTEN):
                rows.extend(DiffRow(span.status, span.before_start + k, span.after_start + k)
                            for k in range(span.after_end - span.after_start))
            elif span.status == REMOVED:
                rows.extend(DiffRow(REMOVED, i, None) for i in range(span.before_start, span.before_end))
            else:
                rows.extend(DiffRow(ADDED, None, j) for j in range(span.after_start, span.after_end))
        return tuple(rows)

    @property
    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATUSES, 0)
        for span in self.spans:
            size = span.before_end - span.before_start if span.status == REMOVED else span.after_end - span.after_start
            counts[span.status] += size
        return counts

    def as_dict(self) -> dict[str, Any]:
        return {"first_changed": self.first_changed, "counts": self.counts,
                "spans": [span.as_dict() for span in self.spans]}


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items() if key not in IGNORED_KEYS}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def message_key(message: Any) -> str:
    """The message as compared: canonical JSON without the ignored keys (odd values by ``repr``)."""
    return json.dumps(_plain(message), sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr)


def message_shape(message: Any) -> str:
    """What kind of message it is, for pairing a rewritten message with the one it replaced:
    the role, whether it calls tools, and the types of its content blocks."""
    if not isinstance(message, dict):
        return type(message).__name__
    content = message.get("content")
    blocks = sorted({str(b.get("type")) for b in content if isinstance(b, dict)}) if isinstance(content, list) else []
    calls = "+calls" if message.get("tool_calls") else ""
    return f"{message.get('role')}{calls}:{','.join(blocks)}"


def tools_changed(before: Sequence[Any], after: Sequence[Any]) -> bool:
    """Whether two requests sent different tools (compared like messages). The tools come
    before every message in a prompt, so a change there leaves a cache nothing to match."""
    return [message_key(t) for t in before] != [message_key(t) for t in after]


def _spans_of_replacement(before: Sequence[Any], after: Sequence[Any], i: int, j: int) -> list[DiffSpan]:
    """A stretch that differs entirely: messages of the same shape in the same order are
    the same messages rewritten (a truncated result, renumbered call ids); the rest were
    removed or added (a compaction's summary standing for many turns)."""
    spans: list[DiffSpan] = []
    shapes = SequenceMatcher(None, [message_shape(m) for m in before], [message_shape(m) for m in after],
                             autojunk=False)
    for tag, b1, b2, a1, a2 in shapes.get_opcodes():
        if tag == "equal":
            spans.append(DiffSpan(REWRITTEN, i + b1, i + b2, j + a1, j + a2))
            continue
        if b2 > b1:
            spans.append(DiffSpan(REMOVED, i + b1, i + b2, j + a1, j + a1))
        if a2 > a1:
            spans.append(DiffSpan(ADDED, i + b2, i + b2, j + a1, j + a2))
    return spans


def _merged(spans: list[DiffSpan]) -> tuple[DiffSpan, ...]:
    out: list[DiffSpan] = []
    for span in spans:
        last = out[-1] if out else None
        if (last is not None and last.status == span.status and last.before_end == span.before_start
                and last.after_end == span.after_start):
            out[-1] = DiffSpan(span.status, last.before_start, span.before_end, last.after_start, span.after_end)
        elif span.before_end > span.before_start or span.after_end > span.after_start:
            out.append(span)
    return tuple(out)


def request_diff(before: Sequence[Any], after: Sequence[Any]) -> RequestDiff:
    """The diff of ``after`` (this request's messages) against ``before`` (the previous
    request's), in their order. Cost: linear when one extends the other, which is what a
    step does; a sequence alignment of the differing middle otherwise."""
    old = [message_key(m) for m in before]
    new = [message_key(m) for m in after]
    prefix = 0
    for x, y in zip(old, new):
        if x != y:
            break
        prefix += 1
    suffix = 0
    while suffix < min(len(old), len(new)) - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    first_changed = None if old == new else prefix
    spans = [DiffSpan(KEPT, 0, prefix, 0, prefix)]
    middle_old, middle_new = old[prefix:len(old) - suffix], new[prefix:len(new) - suffix]
    matcher = SequenceMatcher(None, middle_old, middle_new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        i1, i2, j1, j2 = i1 + prefix, i2 + prefix, j1 + prefix, j2 + prefix
        if tag == "equal":
            spans.append(DiffSpan(KEPT, i1, i2, j1, j2))
        elif tag == "delete":
            spans.append(DiffSpan(REMOVED, i1, i2, j1, j1))
        elif tag == "insert":
            spans.append(DiffSpan(ADDED, i1, i1, j1, j2))
        else:
            spans.extend(_spans_of_replacement(before[i1:i2], after[j1:j2], i1, j1))
    spans.append(DiffSpan(KEPT, len(old) - suffix, len(old), len(new) - suffix, len(new)))
    return RequestDiff(first_changed=first_changed, spans=_merged(spans))
