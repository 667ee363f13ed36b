"""Loads what the transcript needs for a set of runs and hands it to ``transcript``."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from runloop.meter import meter_shown
from sessions.models import Run, SessionMessage
from sessions.selectors.compactions import UndoTarget, undo_target
from web.approval_cards import approval_cards, decision_notes, steps_with_decisions
from web.folded import folded_seqs
from web.markdown import RenderBudget
from web.selectors import (
    compacted_run_ids,
    last_event_seqs,
    main_records_of_runs,
    queued_supplements,
    run_plans,
    tool_durations,
    tool_labels_of_versions,
)
from web.transcript import (
    COMPACTED_NOTICE,
    CONTINUED_NOTICE,
    Notice,
    RunView,
    items_from_records,
    items_written,
    plan_steps,
    run_is_continuable,
    run_is_resumable,
    steps_labelled,
    supplements_written,
)
from web.undone import summaries_marked


def run_views(*, runs: list[Run], latest_run_id: int | None) -> list[RunView]:
    """One view per run, in the given order. A working run shows only what the person
    wrote (the browser streams the rest); only the session's latest run offers Resume."""
    ids = [run.pk for run in runs]
    shared = RunsShared.load(run_ids=ids, session_id=runs[0].session_id if runs else None,
                             version_ids={run.version_id for run in runs})
    records = main_records_of_runs(run_ids=ids)
    budget = RenderBudget()  # one per page, spent from the newest run back (markdown.py)
    # CTX-47: a later run's compaction may fold an earlier run's results: marked on every run.
    folded = folded_seqs(record for run_records in records.values() for record in run_records)
    views = [run_view(run=run, records=records.get(run.pk, []), shared=shared, latest_run_id=latest_run_id,
                      budget=budget, folded=folded) for run in reversed(runs)]
    return views[::-1]


@dataclass(frozen=True)
class RunsShared:
    """What a page reads of its runs' events at once (a few rows a run, none decrypted in
    bulk): the last event seq, the tools' durations, compactions and plans."""

    last_seqs: dict[int, int]
    durations: dict[tuple[int, str], int]
    compacted: set[int]
    plans: dict[int, list[dict]]
    undo: UndoTarget | None = None  # CTX-51: the compaction the session's creator may undo now
    tool_labels: dict[int, dict[str, str]] = field(default_factory=dict)  # by version (web.tool_labels)
    decisions: dict[int, dict[str, tuple[str, str]]] = field(default_factory=dict)  # TOOL-9: by run, by call

    @classmethod
    def load(cls, *, run_ids: list[int], session_id: int | None = None,
             version_ids: Iterable[int] = ()) -> RunsShared:
        return cls(last_seqs=last_event_seqs(run_ids=run_ids), durations=tool_durations(run_ids=run_ids),
                   compacted=compacted_run_ids(run_ids=run_ids), plans=run_plans(run_ids=run_ids),
                   undo=undo_target(session_id=session_id) if session_id is not None else None,
                   tool_labels=tool_labels_of_versions(version_ids=version_ids),
                   decisions=decision_notes(run_ids=run_ids))

    def undo_in(self, run: Run) -> int:
        """The compaction an Undo on this run's summary marker undoes (0: none of its markers)."""
        return self.undo.snapshot_id if self.undo is not None and self.undo.run_id == run.pk else 0


def run_view(*, run: Run, records: list[SessionMessage], shared: RunsShared, latest_run_id: int | None,
             budget: RenderBudget, folded: set[int] | None = None) -> RunView:
    """One run's view from its main-instance ``records``; a finished run's texts spend
    ``budget`` (the page's, from the newest run back). ``folded``: the seqs of results a
    compaction folded for the model (CTX-47), by default those this run's compactions folded."""
    view = RunView(run=run, last_seq=shared.last_seqs.get(run.pk, 0), plan=plan_steps(shared.plans.get(run.pk, [])))
    if run.status in Run.ACTIVE_STATUSES:
        view.live = True
        view.items = items_written(records)
        view.supplements = supplements_written(records, queued=queued_supplements(run=run))
        view.approvals = approval_cards(run=run)  # TOOL-8: a page opened while the run waits
        return view
    own = {call_id: ms for (run_id, call_id), ms in shared.durations.items() if run_id == run.pk}
    view.items = items_from_records(records, durations=own, budget=budget, folded=folded)
    if records and records[0].kind == "assistant":  # no question: a Continue
        view.items.insert(0, Notice(CONTINUED_NOTICE))
    if run.pk in shared.compacted and not any(r.kind in ("compaction", "compaction_summary") for r in records):
        # The run's context was compacted (a `compacted` event) but no checkpoint
        # record says where: say it once, after the question.
        view.items.insert(1 if view.items else 0, Notice(COMPACTED_NOTICE))
    summaries_marked(view.items, records, shared.undo)  # CTX-51
    steps_labelled(view.items, shared.tool_labels.get(run.version_id, {}))
    steps_with_decisions(view.items, shared.decisions.get(run.pk, {}))
    view.resumable = run.pk == latest_run_id and run_is_resumable(run)
    view.continuable = run.pk == latest_run_id and run_is_continuable(run, view.items)
    return view


def meter_label(meter: dict) -> str:
    """The context meter's words (the browser words its updates the same way, chat.js).

    The figure is the next request's size, which may be past the trigger or past the
    maximum between two requests (``runloop.meter.meter_shown``): then the words say what
    happens before the next answer rather than read "3,857 of 3,456"."""
    tokens, room = meter.get("tokens") or 0, meter.get("effective_input_tokens") or 0
    shown = meter_shown(tokens, room, meter.get("trigger_tokens"))
    about = "about " if meter.get("measured_by") == "estimate" else ""
    failed = " in the request that failed" if meter.get("failed_request") else ""
    if shown.past_maximum:
        text = f"{about}{tokens:,} tokens{failed}, more than the {room:,} one request may hold"
    else:
        text = f"{about}{tokens:,} of {room:,} tokens{failed}"
    if meter.get("trigger_tokens"):
        text += f" · summarized at {meter['trigger_tokens']:,}"  # what it aims for: the legend (_meter_legend.html)
        if shown.past_trigger and not failed:
            text += f" · {PAST_TRIGGER_WORDS}"
    return text


def meter_page(meter: dict) -> dict:
    """The meter as the page renders it: the bar's value (never above its maximum) and the
    legend's figures, worded as ``meter_label`` words them."""
    shown = meter_shown(meter.get("tokens"), meter.get("effective_input_tokens"), meter.get("trigger_tokens"))
    legend = {name: f"{meter.get(key) or 0:,}" for name, key in (
        ("prepare", "prepare_tokens"), ("trigger", "trigger_tokens"), ("target", "target_tokens"),
        ("maximum", "effective_input_tokens"))}
    return {"value": shown.value, "legend": legend, "marked": bool(meter.get("trigger_tokens"))}


# Said when the next request is past the trigger: the loop summarizes before it is sent.
PAST_TRIGGER_WORDS = "earlier messages will be summarized before the next answer"
