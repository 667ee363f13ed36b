"""CTX-47 in the chat: which tool results a compaction folded to notes for the model.

The records are untouched (the chat shows each result as recorded); what the model sees
folded is said by the ``compaction_summary`` records' metrics (``masked_seqs``,
``masked_results``), read here.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sessions.models import SessionMessage

# A compaction that folded older tool results (no summary, or before one).
FOLDED_NOTICE = ("Older tool results folded to save room; open one to read it whole. The agent now sees each "
                 "as a short note and reads it back whole when it needs it. The full history is still kept.")


def _metrics(message: Any) -> Mapping[str, Any]:
    metrics = message.get("metrics") if isinstance(message, Mapping) else None
    return metrics if isinstance(metrics, Mapping) else {}


def folded_count(message: Any) -> int:
    """How many results the compaction of a ``compaction_summary`` record's ``message`` folded."""
    count = _metrics(message).get("masked_results")
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 0


def folded_seqs(records: Iterable[SessionMessage]) -> set[int]:
    """The record seqs of the tool results the compactions among ``records`` folded."""
    seqs: set[int] = set()
    for record in records:
        listed = _metrics(record.message).get("masked_seqs") if record.kind == "compaction_summary" else None
        if isinstance(listed, list):
            seqs.update(seq for seq in listed if isinstance(seq, int))
    return seqs
