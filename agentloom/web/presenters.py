"""Loads what the transcript needs for a set of runs and hands it to ``transcript``."""
from __future__ import annotations

from agentloom.web.markdown import RenderBudget
from agentloom.web.selectors import (
    compacted_run_ids,
    last_event_seqs,
    main_records_of_runs,
    queued_supplements,
    run_plans,
    tool_durations,
)
from agentloom.web.transcript import (
    COMPACTED_NOTICE,
    CONTINUED_NOTICE,
    Notice,
    RunView,
    items_from_records,
    items_written,
    plan_steps,
    run_is_continuable,
    run_is_resumable,
    supplements_written,
)
from sessions.models import Run


def run_views(*, runs: list[Run], latest_run_id: int | None) -> list[RunView]:
    """One view per run, in the given order. A working run shows only what the person
    wrote (the browser streams the rest); only the session's latest run offers Resume."""
    ids = [run.pk for run in runs]
    records = main_records_of_runs(run_ids=ids)
    durations = tool_durations(run_ids=ids)
    last_seqs = last_event_seqs(run_ids=ids)
    compacted = compacted_run_ids(run_ids=ids)
    plans = run_plans(run_ids=ids)
    budget = RenderBudget()  # one per page, spent from the newest run back (markdown.py)
    views = []
    for run in reversed(runs):
        view = RunView(run=run, last_seq=last_seqs.get(run.pk, 0), plan=plan_steps(plans.get(run.pk, [])))
        if run.status in Run.ACTIVE_STATUSES:
            view.live = True
            view.items = items_written(records.get(run.pk, []))
            view.supplements = supplements_written(records.get(run.pk, []), queued=queued_supplements(run=run))
        else:
            own = {call_id: ms for (run_id, call_id), ms in durations.items() if run_id == run.pk}
            view.items = items_from_records(records.get(run.pk, []), durations=own, budget=budget)
            if records.get(run.pk) and records[run.pk][0].kind == "assistant":  # no question: a Continue
                view.items.insert(0, Notice(CONTINUED_NOTICE))
            if run.pk in compacted and not any(r.kind in ("compaction", "compaction_summary")
                                               for r in records.get(run.pk, [])):
                # The run's context was compacted (a `compacted` event) but no checkpoint
                # record says where: say it once, after the question.
                view.items.insert(1 if view.items else 0, Notice(COMPACTED_NOTICE))
            view.resumable = run.pk == latest_run_id and run_is_resumable(run)
            view.continuable = run.pk == latest_run_id and run_is_continuable(run, view.items)
        views.append(view)
    return views[::-1]


def meter_label(meter: dict) -> str:
    """The context meter's words (the browser words its updates the same way, chat.js)."""
    tokens, room = meter.get("tokens") or 0, meter.get("effective_input_tokens") or 0
    about = "about " if meter.get("measured_by") == "estimate" else ""
    text = f"{about}{tokens:,} of {room:,} tokens"
    if meter.get("failed_request"):
        text += " in the request that failed"
    if meter.get("trigger_tokens"):
        text += f" · summarized at {meter['trigger_tokens']:,}, down to about {meter.get('target_tokens') or 0:,}"
    return text
