"""What changed between two listings of a server's tools, and between a published tool and
the server now (TOOL-1 refresh, TOOL-3 drift). Pure: plain dicts in, plain dicts out.

One home for the comparison: the refresh response, the console's drift per version and the
run loop's refusal to call a tool whose schema moved all read it from here.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

COMPARED = ("description", "input_schema", "annotations")


def listing_changes(old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{added: [name], removed: [name], changed: [{name, fields}]}`` from ``old`` to ``new``."""
    before = {tool["name"]: tool for tool in old}
    after = {tool["name"]: tool for tool in new}
    changed = []
    for name, tool in after.items():
        if name in before:
            fields = [f for f in COMPARED if before[name].get(f) != tool.get(f)]
            if fields:
                changed.append({"name": name, "fields": fields})
    return {"added": [name for name in after if name not in before],
            "removed": [name for name in before if name not in after],
            "changed": changed}


def changes_text(changes: Mapping[str, Any]) -> str:
    """The changes in one sentence for the console ("No change." when there is none)."""
    parts = []
    if changes["added"]:
        parts.append("added " + ", ".join(changes["added"]))
    if changes["removed"]:
        parts.append("removed " + ", ".join(changes["removed"]))
    for item in changes["changed"]:
        parts.append(f"{item['name']}: {', '.join(f.replace('_', ' ') for f in item['fields'])} changed")
    text = "; ".join(parts)
    return (text[0].upper() + text[1:] + ".") if parts else "No change."


def tool_drift(frozen: Mapping[str, Any], live: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """How a published tool differs from what the server offers now, or None.

    ``{"state": "missing"}`` when the server no longer lists it; ``{"state": "changed",
    "fields": [...]}`` when its description, schema or annotations moved. Only a missing tool
    or a changed input schema stops a call (the arguments were written for the published
    schema); the others are shown to the admin.
    """
    if live is None:
        return {"state": "missing", "fields": []}
    fields = [f for f in COMPARED if frozen.get(f) != live.get(f)]
    return {"state": "changed", "fields": fields} if fields else None


def drift_blocks_call(drift: Mapping[str, Any] | None) -> bool:
    return drift is not None and (drift["state"] == "missing" or "input_schema" in drift["fields"])


def drift_text(drift: Mapping[str, Any] | None) -> str:
    if drift is None:
        return "as published"
    if drift["state"] == "missing":
        return "no longer offered by the server"
    return ", ".join(f.replace("_", " ") for f in drift["fields"]) + " changed on the server"
