"""CTX-50: which messages of a session's main line are pinned, read from its pin records.

A pin and an unpin are records of kind ``pin`` (``{"action": "pin"|"unpin", "seq", "by"}``,
``by`` the person's user id or ``"agent"``; the record's own time says when). The session's
first question is pinned by default -- the goal -- until a record unpins it; after that the
records win in their order. Nothing here writes.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sessions.models import MessageKind, SessionMessage

# The main-line records whose message can be pinned: what the person asked or added, what
# the agent answered, what a tool or a sub-agent returned.
PINNABLE_KINDS = frozenset({MessageKind.USER, MessageKind.SUPPLEMENT, MessageKind.ASSISTANT,
                            MessageKind.TOOL_RESULT, MessageKind.DELEGATION_RESULT})


@dataclass(frozen=True)
class PinState:
    """One pinned message: its record, who pinned it (a user id, ``"agent"``, or ``None``
    for the first question's default pin) and when (None for the default)."""

    seq: int
    by: int | str | None
    at: datetime | None
    default: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "by": self.by, "at": self.at.isoformat() if self.at else None,
                "default": self.default}


def first_question_seq(*, session_id: int) -> int | None:
    """The seq of the session's first question (its first main-line ``user`` record)."""
    return (SessionMessage.objects.filter(session_id=session_id, in_main=True, kind=MessageKind.USER)
            .order_by("seq").values_list("seq", flat=True).first())


def pins_of_session(*, session_id: int) -> list[PinState]:
    """The session's pinned messages, oldest record first."""
    state: dict[int, PinState] = {}
    first = first_question_seq(session_id=session_id)
    if first is not None:
        state[first] = PinState(first, None, None, default=True)
    for record in (SessionMessage.objects.filter(session_id=session_id, in_main=True, kind=MessageKind.PIN)
                   .only("seq", "message", "created_at").order_by("seq")):
        message = record.message if isinstance(record.message, dict) else {}
        seq = message.get("seq")
        if not isinstance(seq, int):
            continue
        if message.get("action") == "pin":
            state.setdefault(seq, PinState(seq, message.get("by"), record.created_at))
        elif message.get("action") == "unpin":
            state.pop(seq, None)
    return [state[seq] for seq in sorted(state)]


def pinned_seqs(*, session_id: int) -> frozenset[int]:
    """The seqs of the session's pinned records, as the compaction engine takes them
    (``CompactionRequest.pinned``)."""
    return frozenset(pin.seq for pin in pins_of_session(session_id=session_id))
