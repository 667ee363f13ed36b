"""A run's event timeline for people: events in, rows out (plain Python, no Django).

Consecutive deltas of one kind and instance fold into one row with their text; each row
has a tone the page colours it by — a ``run_finished`` by how the run ended, so a
cancelled or failed run is never shown as a success — and its time since the start of
the attempt it belongs to: a resumed run starts again at each ``run_started``.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sessions.admin.display import Text, as_json, text

# A value inside an event's one-line summary.
SHORT_VALUE_CHARS = 160
DELTA_TYPES = frozenset({"message_delta", "thinking_delta"})
# A run's error events: ``error`` is the stream's name for them, ``run_error`` the newer
# one; older runs keep the old name in their log, so both are read.
BAD_TYPES = frozenset({"error", "run_error", "compaction_failed"})
# How each ending of a run is coloured (Run.Status); any other ending is a warning.
FINISHED_TONES = {"completed": "run", "failed": "bad", "timeout": "bad", "cancelled": "warn", "interrupted": "warn"}
ATTEMPT_START = "run_started"  # each claim of the run, the first and every resume, logs one


@dataclass(frozen=True)
class EventRow:
    """One line of a run's timeline: an event, or consecutive deltas folded into their text."""

    type: str
    first_seq: int
    last_seq: int
    at: datetime
    count: int = 1
    fields: tuple[tuple[str, str], ...] = ()
    text: Text | None = None
    full_json: str | None = None

    @property
    def status(self) -> str:
        """The ``status`` field of the event (``run_finished``, ``tool_finished``), or ""."""
        return dict(self.fields).get("status", "")

    @property
    def tone(self) -> str:
        if self.type in BAD_TYPES:
            return "bad"
        if self.type == "run_finished":  # its colour is how the run ended
            return FINISHED_TONES.get(self.status, "warn")
        if self.type.startswith("compaction") or self.type == "compacted":
            return "compaction"
        if self.type.startswith("tool_") or self.type.startswith("sub_instance"):
            return "tool"
        if self.type == "run_started":
            return "run"
        return "plain"


def _short(value: Any) -> tuple[str, bool]:
    """A value on one line; True when it was cut."""
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=repr)
    shown = " ".join(shown.split())
    if len(shown) > SHORT_VALUE_CHARS:
        return shown[: SHORT_VALUE_CHARS - 1] + "…", True
    return shown, False


def _event_fields(payload: Any) -> tuple[tuple[tuple[str, str], ...], bool]:
    if not isinstance(payload, dict):
        shown, cut = _short(payload)
        return (("data", shown),), cut
    out, any_cut = [], False
    for key, value in payload.items():
        shown, cut = _short(value)
        out.append((str(key), shown))
        any_cut = any_cut or cut or isinstance(value, (dict, list))
    return tuple(out), any_cut


def timeline(events: Iterable[tuple[int, str, datetime, Any]]) -> list[EventRow]:
    """Events ``(seq, type, at, payload)`` in seq order, consecutive deltas of one kind and
    one instance folded into a single row with their joined text."""
    rows: list[EventRow] = []
    pending: list[tuple[int, str, datetime, dict[str, Any]]] = []

    def flush() -> None:
        if not pending:
            return
        first, kind, at, payload = pending[0]
        joined = "".join(str(p.get("text", "")) for *_, p in pending)
        extra = tuple((k, _short(v)[0]) for k, v in payload.items() if k != "text")
        rows.append(EventRow(type=kind, first_seq=first, last_seq=pending[-1][0], at=at, count=len(pending),
                             fields=extra, text=text(joined, head_chars=600)))
        pending.clear()

    for seq, kind, at, payload in events:
        if kind in DELTA_TYPES and isinstance(payload, dict):
            same = pending and pending[0][1] == kind and pending[0][3].get("instance") == payload.get("instance")
            if not same:
                flush()
            pending.append((seq, kind, at, payload))
            continue
        flush()
        fields, cut = _event_fields(payload)
        rows.append(EventRow(type=kind, first_seq=seq, last_seq=seq, at=at, fields=fields,
                             full_json=as_json(payload) if cut else None))
    flush()
    return rows


def offset_text(seconds: float) -> str:
    if seconds < 60:
        return f"+{seconds:.2f} s"
    minutes, rest = divmod(seconds, 60)
    return f"+{int(minutes)} min {rest:04.1f} s"


def attempt_offsets(rows: Sequence[EventRow], *, start: datetime) -> list[str]:
    """Each row's time since the start of its attempt: since ``start`` (when the attempt
    of the first row began — its ``run_started`` may be on an earlier page) until the
    next ``run_started``, then since that one. A resumed run's first attempt is measured
    from its own start, not from the resume."""
    origin, out = start, []
    for row in rows:
        if row.type == ATTEMPT_START:
            origin = row.at
        out.append(offset_text(max(0.0, (row.at - origin).total_seconds())))
    return out
