"""CTX-48 in the chat: a summary the platform wrote from the records, not the model, says so.

The record of a compaction's summary (``compaction_summary``) carries the compaction's
metrics; ``summary_source`` is ``code`` when the model's summary failed the check and the
platform wrote it (``context/compaction/code_summary.py``), ``model`` otherwise.
"""
from __future__ import annotations

from typing import Any

COMPACTED_BY_CODE_NOTICE = ("Earlier messages were summarized to fit the model's context window. The model's "
                            "summary did not pass the platform's check, so the platform wrote it from the records "
                            "instead: your messages, the tool calls and the last answer. The full history is still "
                            "kept.")


def summary_by_code(message: dict[str, Any]) -> bool:
    """Whether a ``compaction_summary`` record's summary was written by the platform."""
    metrics = message.get("metrics")
    return isinstance(metrics, dict) and metrics.get("summary_source") == "code"
