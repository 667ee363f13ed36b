"""Undo on the chat's summary markers (CTX-51): which marker offers it, which says "summary
undone". A page-level fact: it reads the run's ``compaction_undone`` records and the one
compaction the session's creator may undo now (``sessions.selectors.compactions``)."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

from sessions.models import SessionMessage
from sessions.selectors.compactions import UndoTarget
from web.transcript import Summary


@dataclass
class SummaryMarker(Summary):
    """A summary marker that was undone (the model reads the earlier messages in full again),
    or that offers Undo: ``undo_compaction`` is the compaction it undoes."""

    undone: bool = False
    undo_compaction: int | None = None


def summaries_marked(items: list[Any], records: Iterable[SessionMessage], target: UndoTarget | None) -> None:
    """Mark, in place, the summaries of a run's ``items``: undone when a ``compaction_undone``
    record names its summary record; offering Undo when it is the summary of ``target`` —
    the newest compaction of the main line, while no run works (the chat is its creator's
    own page: nobody else sees the offer)."""
    undone = {(record.message or {}).get("summary_seq") for record in records if record.kind == "compaction_undone"}
    for index, item in enumerate(items):
        if not isinstance(item, Summary) or not item.seq:
            continue
        is_undone = item.seq in undone
        offer = target.snapshot_id if target is not None and not is_undone and target.summary_seq == item.seq else None
        if is_undone or offer:
            plain = {field.name: getattr(item, field.name) for field in fields(Summary)}
            items[index] = SummaryMarker(**plain, undone=is_undone, undo_compaction=offer)
