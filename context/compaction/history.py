"""CTX-48: the facts a summary written by code is made of, read from the records.

:func:`history_facts` reads an instance's records (SPEC §3 format, as the projector reads
them) -- never the view, which earlier compactions may have summarized -- and returns
``HistoryFacts``: every real user message in order, the tool calls with their statuses,
and the last assistant answer.

A *real user message* is what the person wrote: a question (``user``) and a supplement
sent while a run was working (``supplement``: a standing instruction often arrives that
way, and losing it is what CTX-48 is for). Not a command's output, a late tool result, an
earlier summary or a runtime-state block: those are not the person's words. A question's
attached files are named by the ledger and the runtime-state block, not here.

A call's status is its result's, in the ledger's words (CTX-49): ``done`` (ok),
``failed`` (error, timeout, cancelled), ``denied``, ``unknown`` (recorded so, or no result
and its run ended: CTX-3), ``pending`` (no result yet in a run still open).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from context import records as rec
from context.projector import tool_call_states

from .types import HistoryFacts

STATUSES = {"ok": "done", "error": "failed", "timeout": "failed", "cancelled": "failed", "denied": "denied",
            "unknown": "unknown"}


def history_facts(records: Iterable[Mapping[str, Any]], *, open_runs: Collection[Any] | None = None) -> HistoryFacts:
    """The records' facts for a summary written by code (see the module docstring).
    ``open_runs``: the runs still working, as ``tool_call_states`` takes them (a call
    without a result in one of them is pending, elsewhere unknown)."""
    records = list(records)
    users: list[str] = []
    calls: dict[str, dict[str, Any]] = {}
    answer: str | None = None
    for record in records:
        kind, message = record.get("kind"), record.get("message")
        if not isinstance(message, Mapping):
            continue
        if kind in (rec.USER, rec.SUPPLEMENT):
            text = rec.content_text(message.get("content"), image="")
            if text.strip():
                users.append(text)
        elif kind == rec.ASSISTANT:
            text = rec.content_text(message.get("content"), image="")
            if text.strip() and not message.get("partial"):
                answer = text
            if message.get("partial"):
                continue  # the calls of a cut stream never ran (CTX-6)
            for call in message.get("tool_calls") or ():
                if not isinstance(call, Mapping):
                    continue
                found = call.get("function")
                function: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
                call_id = str(call.get("id") or "")
                calls[call_id] = {"id": call_id, "name": str(function.get("name") or "?"),
                                  "arguments": str(function.get("arguments") or ""), "status": None}
        elif kind in rec.RESULT_KINDS:
            known = calls.get(str(message.get("tool_call_id") or ""))
            if known is not None:
                known["status"] = STATUSES.get(str(message.get("status") or "ok"), "done")
    states = tool_call_states(records, open_runs=open_runs)
    pending = {call["id"] for call in states.pending}
    unknown = {call["id"] for call in states.unknown}
    for call_id, call in calls.items():
        if call_id in unknown:
            call["status"] = "unknown"
        elif call["status"] is None:
            call["status"] = "pending" if call_id in pending else "unknown"
    return HistoryFacts(user_messages=tuple(users), calls=tuple(calls.values()), last_answer=answer)
