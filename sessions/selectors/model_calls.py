"""Reads of the model-call log: exactly what a call sent, rebuilt from its references, with
our estimate per message (the context inspector). Nothing here writes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sessions.models import ModelCall, SentBlob


@dataclass(frozen=True)
class SentEntry:
    """One message of a model call as it was sent, with our estimate (None when not kept,
    e.g. summary and verification calls)."""

    message: dict[str, Any]
    estimated_tokens: int | None


def _request_chain(call: ModelCall) -> list[dict[str, Any]]:
    """The requests of ``call``'s delta chain, oldest first (one query, bounded length)."""
    request = call.request if isinstance(call.request, dict) else {}
    if request.get("base") is None:
        return [request]
    rows = dict(ModelCall.objects.filter(instance_id=call.instance_id, pk__gte=request.get("root") or call.pk,
                                         pk__lte=call.pk).values_list("pk", "request"))
    chain = []
    pk: int | None = call.pk
    while pk is not None:
        current = rows.get(pk) or {}
        chain.append(current)
        pk = current.get("base")
    return list(reversed(chain))


def _resolved(call: ModelCall) -> tuple[dict[str, Any], list[int], list[int | None]]:
    """A stored request (format 2): its own fields, and its message refs and estimates."""
    refs: list[int] = []
    estimates: list[int | None] = []
    chain = _request_chain(call)
    for request in chain:
        keep = request.get("keep", 0)
        refs = refs[:keep] + list(request.get("add") or [])
        estimates = estimates[:keep] + list(request.get("estimates") or [])
    return chain[-1], refs, estimates


def model_call_body(*, call: ModelCall) -> dict[str, Any]:
    """Exactly the body the call sent (its fields in their order), rebuilt from its references."""
    stored = call.request if isinstance(call.request, dict) else {}
    if stored.get("v") != 2:  # logged before requests were stored by reference
        return {"messages": stored.get("messages", []), **({"tools": stored["tools"]} if stored.get("tools") else {})}
    request, refs, _ = _resolved(call)
    named = request.get("blobs", {})
    blobs = dict(SentBlob.objects.filter(session_id=call.run.session_id, pk__in={*refs, *named.values()})
                 .values_list("pk", "content"))
    body: dict[str, Any] = {}
    for key in request.get("order", []):
        if key == "messages":
            body[key] = [blobs[ref] for ref in refs]
        elif key in named:
            body[key] = blobs[named[key]]
        else:
            body[key] = request["fields"][key]
    return body


def model_call_entries(*, call: ModelCall) -> list[SentEntry]:
    """The messages a call sent, in order, each with its estimate. A native Anthropic
    body's top-level system text comes first, as a system message."""
    stored = call.request if isinstance(call.request, dict) else {}
    if stored.get("v") != 2:
        estimates = stored.get("estimates") or []
        return [SentEntry(message=m, estimated_tokens=estimates[i] if i < len(estimates)
                          and isinstance(estimates[i], int) else None)
                for i, m in enumerate(stored.get("messages") or []) if isinstance(m, dict)]
    body = model_call_body(call=call)
    _, _, estimates = _resolved(call)
    entries = [SentEntry(message=m, estimated_tokens=e if isinstance(e, int) else None)
               for m, e in zip(body.get("messages", []), estimates)]
    system = body.get("system")
    if system is not None:
        text = system if isinstance(system, str) else "\n\n".join(
            b.get("text", "") for b in system if isinstance(b, dict))
        entries.insert(0, SentEntry(message={"role": "system", "content": text}, estimated_tokens=None))
    return entries


def model_call_repairs(*, call: ModelCall) -> list[dict[str, Any]]:
    """What the projector changed to make this call's request valid, each with its kind,
    reason, record ``seq`` and ``position`` among the sent messages (None when the body's
    shape does not follow the projection, e.g. a native Anthropic body). Calls logged
    before repairs were kept, and summary and verification calls, have none."""
    stored = call.request if isinstance(call.request, dict) else {}
    return [r for r in stored.get("repairs") or [] if isinstance(r, dict)]


def model_call_tools(*, call: ModelCall) -> list[dict[str, Any]]:
    """The tool schemas a call sent."""
    stored = call.request if isinstance(call.request, dict) else {}
    tools = model_call_body(call=call).get("tools") if stored.get("v") == 2 else stored.get("tools")
    return [tool for tool in tools or [] if isinstance(tool, dict)]
