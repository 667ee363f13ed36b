"""CTX-42: a tool result too large for the request is cut to fit, or omitted with a note.

Order of concern (SPEC §5): keep the request valid, then keep information. So a result
is first cut to fit (head and tail, with the CTX-7 marker naming what was left out and
where the full text is); only when even a minimal cut does not fit is it replaced by an
omission note -- a tool message with the same call id, so the call keeps its answer and
the request stays valid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from context.estimators import Estimator
from context.records import is_text_part
from context.truncation import truncate_content

from .types import Source

MIN_TOOL_OUTPUT_CHARS = 400  # below this a cut result is mostly marker; omit it instead
OMITTED_TOOL_OUTPUT = (
    "[tool output omitted: this result ({size:,} characters{where}) is too large for the context window. "
    "The full result is kept in the records; read_record pages through it.]"
)


def _text_size(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(p["text"]) for p in content if is_text_part(p))
    return 0


def omission_result(message: Mapping[str, Any], seq: int | None = None) -> dict[str, Any]:
    """The tool message that stands in for a result that cannot fit at all."""
    where = f", record seq {seq}" if seq is not None else ""
    text = OMITTED_TOOL_OUTPUT.format(size=_text_size(message.get("content")), where=where)
    return {"role": "tool", "tool_call_id": message.get("tool_call_id"), "content": text}


def fit_tool_outputs(
    messages: Sequence[Mapping[str, Any]],
    *,
    budget_tokens: int,
    estimator: Estimator,
    sources: Sequence[Source] | None = None,
) -> list[dict[str, Any]]:
    """Return ``messages`` with tool results cut so the request fits ``budget_tokens``.

    The size is ``estimator.request(messages)``; pass the request's other messages
    (system, …) along and the tools' cost folded into the budget. The largest results are
    cut first, each no further than needed (never below ``MIN_TOOL_OUTPUT_CHARS``); if
    that is not enough, results are replaced by omission notes, largest first. Nothing
    else changes: roles, order and call ids stay, so pairing stays intact. ``sources``
    (per message) lets the CTX-7 marker name the record. When even omitting every result
    cannot fit, the smallest achievable list is returned and the caller's hard-limit check
    (CTX-39) decides.
    """
    out = [dict(m) for m in messages]
    costs = [estimator.message(m) for m in out]
    total = estimator.request([], None) + sum(costs)
    if total <= budget_tokens:
        return out
    tools = sorted((i for i, m in enumerate(out) if m.get("role") == "tool"), key=lambda i: -costs[i])

    def seq_of(i: int) -> int | None:
        source = sources[i] if sources is not None and i < len(sources) else None
        return source[1] if source else None

    for i in tools:
        if total <= budget_tokens:
            break
        original = out[i].get("content")
        size = _text_size(original)
        if not isinstance(original, (str, list)) or size <= MIN_TOOL_OUTPUT_CHARS:
            continue
        allowed = costs[i] - (total - budget_tokens)  # what this message may cost
        limit = max(MIN_TOOL_OUTPUT_CHARS, int(size * max(allowed, 0) / max(costs[i], 1)))
        best: tuple[Any, int] | None = None
        for _ in range(24):
            content = truncate_content(original, limit, seq_of(i))
            cost = estimator.message({**out[i], "content": content})
            if cost < costs[i]:
                best = (content, cost)
            if cost <= allowed or limit <= MIN_TOOL_OUTPUT_CHARS:
                break
            # Characters and units are not proportional (escapes, multi-byte text): shrink
            # by the observed overshoot, and at least a little, until it fits.
            limit = max(MIN_TOOL_OUTPUT_CHARS, min(limit - 1, int(limit * allowed / cost)))
        if best is not None:
            out[i] = {**out[i], "content": best[0]}
            total += best[1] - costs[i]
            costs[i] = best[1]
    if total > budget_tokens:
        for i in sorted(tools, key=lambda i: -costs[i]):
            if total <= budget_tokens:
                break
            note = omission_result(messages[i], seq_of(i))
            cost = estimator.message(note)
            if cost < costs[i]:
                out[i] = note
                total += cost - costs[i]
                costs[i] = cost
    return out


def newest_results_overflow(messages: Sequence[Mapping[str, Any]], *, estimator: Estimator, threshold: float,
                            tools: Sequence[Mapping[str, Any]] | None = None) -> bool:
    """CTX-42: whether the tool results that just came in push the request over
    ``threshold`` on their own — the request without them would be under it. Such a
    preparation compacts with the trigger ``tool_output_overflow`` (CTX-41)."""
    tail = len(messages)
    while tail > 0 and messages[tail - 1].get("role") == "tool":
        tail -= 1
    if tail == len(messages):
        return False
    return estimator.request(list(messages[:tail]), tools) < threshold <= estimator.request(list(messages), tools)
