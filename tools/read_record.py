"""``read_record``: page through a stored record of this session (CTX-7).

The model view shows at most 24,000 characters of a tool result; the full text stays in
the records, and this tool reads it on demand by seq, offset and length.
"""
from __future__ import annotations

from typing import Any

from agents.tool_registry import Tool, ToolError, register
from context.records import content_text

MAX_LENGTH = 20_000


def record_text(message: dict[str, Any]) -> str:
    """The readable text of a stored record's message (a command record keeps its output)."""
    return content_text(message.get("content", message.get("output", "")))


def _run(arguments: dict, context) -> str:
    from sessions.models import Instance
    from sessions.selectors.records import visible_records_query

    seq, offset = arguments["seq"], arguments.get("offset", 0)
    length = min(arguments.get("length", 8_000), MAX_LENGTH)
    if seq < 1 or offset < 0 or length < 1:
        raise ToolError("seq must be ≥ 1, offset ≥ 0 and length ≥ 1.")
    # Only what this instance may see (RUN-3, RUN-4): its run's inherited prefix and its
    # own records — never a later question's, never a sub-agent's internals.
    instance = Instance.objects.select_related("run").get(pk=context.instance_id)
    record = visible_records_query(run=instance.run, instance=instance).filter(seq=seq).first()
    if record is None:
        raise ToolError(f"Record {seq} is not part of this conversation's history.")
    text = record_text(record.message)
    chunk = text[offset:offset + length]
    end = offset + len(chunk)
    more = f"; continue with offset {end}" if end < len(text) else "; this is the end"
    return f"[record {seq}, characters {offset}–{end} of {len(text)}{more}]\n{chunk}"


read_record = register(Tool(
    name="read_record",
    description="Read part of a stored record of this conversation (e.g. a tool result that was truncated): "
                "give its seq, an offset and a length in characters.",
    parameters={"type": "object", "properties": {
        "seq": {"type": "integer"}, "offset": {"type": "integer"}, "length": {"type": "integer"}},
        "required": ["seq"], "additionalProperties": False},
    run=_run,
    idempotent=True,
    read_only=True,
    timeout_seconds=10,
))
