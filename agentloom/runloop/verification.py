"""LOOP-9: the optional completion check before a run completes.

The candidate answer is checked against the evidence in a separately trimmed context:
the task and the plan always stay; the evidence (this run's tool results, newest first)
is trimmed to fit. The hard limit applies. If the check cannot fit or fails, the run
still completes with the candidate kept and the check marked ``not_done`` — a skipped
check is never reported as a completed one. It does not count as a model step.
"""
from __future__ import annotations

from typing import Any

from context import build_request_body, get_estimator
from models_catalog.client import StreamEnd, call_with_retries, collect, get_chat_client
from models_catalog.errors import ProviderError

VERIFY_SYSTEM = ("You check a candidate answer against the evidence gathered while answering. Reply with the "
                 "first line exactly VERIFIED or NOT VERIFIED, then one short sentence saying why.")
EVIDENCE_CHARS = 2_000


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(p.get("text", "[image]") for p in content if isinstance(p, dict))
    return content or ""


def verification_messages(*, task: str, plan: str | None, evidence: list[str], candidate: str,
                          fits: "callable") -> list[dict[str, Any]] | None:
    """The check's request: task and plan verbatim, as much evidence as fits (newest first).

    ``fits(messages)`` says whether a request is under the hard limit. None when even the
    task and the candidate alone do not fit.
    """
    def build(items: list[str]) -> list[dict[str, Any]]:
        parts = [f"## Task\n{task}"]
        if plan:
            parts.append(f"## Plan\n{plan}")
        parts.append("## Evidence\n" + ("\n\n".join(items) if items else "(no tool results)"))
        parts.append(f"## Candidate answer\n{candidate}")
        return [{"role": "system", "content": VERIFY_SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]

    if not fits(build([])):
        return None
    kept: list[str] = []
    for item in evidence:  # newest first
        trial = [item[:EVIDENCE_CHARS], *kept]
        if not fits(build(trial)):
            break
        kept = trial
    return build(kept)


def parse_verdict(text: str) -> dict[str, str]:
    first, _, rest = (text or "").strip().partition("\n")
    verdict = first.strip().upper().rstrip(".")
    if verdict == "VERIFIED":
        return {"status": "passed", "reason": rest.strip()[:500]}
    if verdict == "NOT VERIFIED":
        return {"status": "failed", "reason": rest.strip()[:500]}
    return {"status": "not_done", "reason": "the check gave no clear verdict"}


def verify_candidate(*, provider: str, adapter_provider: str, model: str, base_url: str | None, api_key: str | None,
                     allow_private: bool, context_window: int, max_output_tokens: int, safety_margin_tokens: int,
                     task: str, plan: str | None, evidence: list[str], candidate: str,
                     base_delay: float, log_call) -> dict[str, Any]:
    """Run the check; always returns a verdict dict, ``not_done`` when it could not run."""
    estimator = get_estimator(model, provider)
    hard_limit = context_window - safety_margin_tokens

    def fits(messages: list[dict[str, Any]]) -> bool:
        return estimator.request(messages) + max_output_tokens <= hard_limit

    messages = verification_messages(task=task, plan=plan, evidence=evidence, candidate=candidate, fits=fits)
    if messages is None:
        return {"status": "not_done", "reason": "the check does not fit the model's context window"}
    body = build_request_body(messages, provider=adapter_provider, model=model, max_output_tokens=max_output_tokens)
    finish = log_call(body, estimator.id, estimator.request(messages))

    def attempt() -> StreamEnd:
        with get_chat_client(provider=provider, base_url=base_url, api_key=api_key, allow_private=allow_private) as client:
            return collect(client.stream_chat(body)).raise_if_cut()

    try:
        end = call_with_retries(attempt, max_attempts=2, base_delay=base_delay, max_delay=5.0)
    except ProviderError as exc:
        finish("failed", None)
        return {"status": "not_done", "reason": f"the check could not run ({exc.code})"}
    finish("ok", end.usage.raw if end.usage else None)
    return parse_verdict(end.text)


def evidence_from_records(records) -> list[str]:
    """This run's tool results as short texts, newest first."""
    items = []
    for record in records:
        message = record.message
        items.append(f"[{message.get('name', 'tool')} → {message.get('status', 'ok')}] {_text(message.get('content'))}")
    return list(reversed(items))
