"""LOOP-9: the optional completion check before a run completes.

The candidate answer is checked against the evidence in a separately trimmed context:
the task and the plan always stay; the evidence (this run's tool results, newest first)
is trimmed to fit. The hard limit applies. If the check cannot fit or fails, the run
still completes with the candidate kept and the check marked ``not_done`` — a skipped
check is never reported as a completed one. It does not count as a model step.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from context import build_body, within_window
from context.records import content_text
from models_catalog.errors import ProviderError
from runloop.calls import collected_call
from runloop.state import RunState
from sessions.frames import plan_text
from sessions.models import Instance, ModelCall
from sessions.selectors.steps import instance_frame, last_question, tool_results

VERIFY_SYSTEM = ("You check a candidate answer against the evidence gathered while answering. Reply with the "
                 "first line exactly VERIFIED or NOT VERIFIED, then one short sentence saying why.")
EVIDENCE_CHARS = 2_000


def verification_messages(*, task: str, plan: str | None, evidence: list[str], candidate: str,
                          fits: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]] | None:
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


def run_verify(state: RunState, instance: Instance, answer: str) -> dict[str, Any]:
    """Check the candidate ``answer`` of ``instance``; the verdict is recorded in the run's
    counters and as a ``context`` record, and returned. Always a verdict: ``not_done``
    when the check could not run. Not a model step (it is logged as a verification call)."""
    task = last_question(instance=instance)
    evidence = evidence_from_records(tool_results(instance=instance))
    verdict = _verdict(state, instance, task=content_text((task.message.get("content") if task else "") or ""),
                       plan=plan_text(instance_frame(instance=instance).get("plan")),
                       evidence=evidence, candidate=answer)
    verdict = state.redactor.content(verdict)  # LOOP-8: the reason is the model's own words (and an error's)
    # The verdict's counters and its record in one commit, which checks that the run is
    # still this attempt's: a worker that lost the run meanwhile writes neither.
    state.journal.verdict(instance, verdict)
    return verdict


def _verdict(state: RunState, instance: Instance, *, task: str, plan: str | None, evidence: list[str],
             candidate: str) -> dict[str, Any]:
    figures = state.figures

    def fits(messages: list[dict[str, Any]]) -> bool:  # the hard limit applies (CTX-39), calibrated
        return figures.fits(figures.estimates.request(messages))

    messages = verification_messages(task=task, plan=plan, evidence=evidence, candidate=candidate, fits=fits)
    if messages is None:
        return {"status": "not_done", "reason": "the check does not fit the model's context window"}
    body = build_body(state.shape, messages, max_output_tokens=figures.budget.max_output_tokens)
    room = figures.budget.output_room(figures.figure(figures.estimates.request(messages)))
    body = within_window(body, shape=state.shape, room=room)  # CAT-12
    try:
        end = collected_call(state, instance, purpose=ModelCall.Purpose.VERIFICATION, body=body,
                             estimator_id=figures.estimator_id, estimate=figures.estimates.request(messages),
                             counts_as_model_call=False)
    except ProviderError as exc:
        return {"status": "not_done", "reason": f"the check could not run ({exc.code})"}
    return parse_verdict(state.redactor.text(end.text or ""))  # LOOP-8: before the reason is cut to length


def evidence_from_records(records) -> list[str]:
    """This run's tool results as short texts, newest first."""
    items = []
    for record in records:
        message = record.message
        items.append(f"[{message.get('name', 'tool')} → {message.get('status', 'ok')}] "
                     f"{content_text(message.get('content'))}")
    return list(reversed(items))
