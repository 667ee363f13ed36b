"""The §5a inputs of a compaction request, as the worker gives them, and which of the §5a
features this tree has (the continuity benchmark measures whatever is there).

Feature detection reads the engine's package: the policy field of CTX-47, the use of
``CompactionRequest.history`` (CTX-48) and ``.pinned`` (CTX-50) outside the types module,
and the ledger module of CTX-49. Where the product has a pure function for an input it is
used; otherwise the input is built here from the records the same way the worker reads
them (every real user message in order, the calls and their statuses, the last answer).
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# The built-in tools the registry declares idempotent (``Tool.idempotent``): every other
# call has side effects and is listed in the ledger with its outcome (CTX-49), as the
# worker's ``_idempotent_tools`` does; a transcript's own tools are unknown, so side effects.
IDEMPOTENT = frozenset({"calculator", "clock", "http_fetch", "update_plan", "read_file", "read_record"})


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def features() -> dict[str, bool]:
    from context.policy import POLICY_DEFAULTS

    return {"masking (CTX-47)": "mask_tool_results" in POLICY_DEFAULTS,
            "checked summaries + code-written fallback (CTX-48)": _has("context.compaction.check"),
            "artifact ledger (CTX-49)": _has("context.compaction.ledger"),
            "pins (CTX-50)": _has("context.compaction.pins")}


def ledger(records: list[dict[str, Any]], open_runs: set[Any]) -> tuple[dict[str, Any], ...]:
    """CTX-49's ledger from the records, when this tree computes one; else nothing."""
    if not _has("context.compaction.ledger"):
        return ()
    from context.compaction.ledger import artifact_ledger

    return tuple(artifact_ledger(records, idempotent=IDEMPOTENT, open_runs=open_runs))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def history_facts(records: list[dict[str, Any]], open_runs: set[Any]) -> Any:
    """CTX-48's ``HistoryFacts`` from the records (the product's ``history_facts`` when this
    tree has it): every real user message in order, the calls with their statuses
    (``unknown`` for a call of an ended run without a result), the last assistant answer."""
    from context.compaction.types import HistoryFacts

    if _has("context.compaction.history"):
        from context.compaction.history import history_facts as product

        return product(records, open_runs=open_runs)

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
