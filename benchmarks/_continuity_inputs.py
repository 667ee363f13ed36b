"""The §5a inputs of a compaction request, as the worker gives them, and which of the §5a
features this tree has (the continuity benchmark measures whatever is there).

Feature detection reads the engine's package: the policy field of CTX-47, the use of
``CompactionRequest.history`` (CTX-48) and ``.pinned`` (CTX-50) outside the types module,
and the ledger module of CTX-49. Where the product has a pure function for an input it is
used; otherwise the input is built here from the records the same way the worker reads
them (every real user message in order, the calls and their statuses, the last answer).
"""
from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

ENGINE = REPO / "context" / "compaction"


def _engine_uses(name: str) -> bool:
    return any(f".{name}" in path.read_text(encoding="utf-8") for path in ENGINE.glob("*.py")
               if path.name != "types.py")


def _ledger_function() -> Any:
    try:
        module = importlib.import_module("context.compaction.ledger")
    except ImportError:
        return None
    for name in ("ledger_from_records", "artifact_ledger", "compute_ledger", "build_ledger", "ledger"):
        if callable(getattr(module, name, None)):
            return getattr(module, name)
    return None


def features() -> dict[str, bool]:
    from context.policy import POLICY_DEFAULTS

    return {"masking (CTX-47)": "mask_tool_results" in POLICY_DEFAULTS,
            "checked summaries + code-written fallback (CTX-48)": _engine_uses("history"),
            "artifact ledger (CTX-49)": _ledger_function() is not None,
            "pins (CTX-50)": _engine_uses("pinned")}


def ledger(records: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """CTX-49's ledger from the records, when this tree computes one; else nothing."""
    function = _ledger_function()
    return tuple(function(records)) if function is not None else ()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def history_facts(records: list[dict[str, Any]]) -> Any:
    """CTX-48's ``HistoryFacts`` from the records: every real user message in order, the
    calls with their statuses (``unknown`` for a call of an ended run without a result), the
    last assistant answer."""
    from context.compaction.types import HistoryFacts

    results = {r["message"].get("tool_call_id"): r["message"].get("status") or "ok"
               for r in records if r["kind"] == "tool_result"}
    last_run = records[-1]["run"] if records else None
    calls, answer = [], None
    for record in records:
        message = record["message"]
        if record["kind"] != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            status = results.get(call["id"]) or ("pending" if record["run"] == last_run else "unknown")
            calls.append({"id": call["id"], "name": call["function"]["name"],
                          "arguments": call["function"]["arguments"], "status": status})
        if _text(message.get("content")).strip():
            answer = _text(message.get("content"))
    users = tuple(_text(r["message"].get("content")) for r in records if r["kind"] == "user")
    return HistoryFacts(user_messages=users, calls=tuple(json.loads(json.dumps(calls))), last_answer=answer)
