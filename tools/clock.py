"""``current_time``: the current UTC time (or in an IANA time zone)."""
from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agents.tool_registry import Tool, ToolError, register


def _run(arguments: dict, context) -> str:
    zone_name = arguments.get("timezone") or "UTC"
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(f"Unknown time zone {zone_name!r}; use an IANA name like Europe/Paris.") from None
    return datetime.now(UTC).astimezone(zone).isoformat(timespec="seconds")


current_time = register(Tool(
    name="current_time",
    description="The current date and time, in UTC or the given IANA time zone.",
    parameters={"type": "object", "properties": {"timezone": {"type": "string"}}, "additionalProperties": False},
    run=_run,
    idempotent=True,
    read_only=True,
    timeout_seconds=5,
))
