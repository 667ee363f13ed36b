"""Where an instance's context starts and what it is built from: its latest snapshot, the
session's best reusable view (RUN-8) or the records, read for the pure engine
(``context.project_records``). Nothing here writes."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from context import DEFAULT_TOOL_RESULT_LIMIT, InstanceContext, Start
from sessions.models import CompactionSnapshot, Instance, Run, SessionView
from sessions.selectors.instances import snapshot_latest
from sessions.selectors.records import view_best_for_run, visible_records_for_engine


def context_start(*, run: Run, instance: Instance, snapshots: bool = True) -> Start:
    """Where an instance's context starts: its latest snapshot, else — for a main
    instance — the best reusable view of the session (RUN-8), else the records.
    ``snapshots=False``: the caller knows the instance has none (not looked for).

    A view made with another estimator is used for its messages only: token figures are
    always computed afresh by the caller's estimator, never read from the view (CTX-24).
    """
    snapshot = snapshot_latest(instance=instance) if snapshots else None
    if snapshot is not None:
        return Start("snapshot", ("snapshot", snapshot.pk), snapshot.covered_seq, snapshot.messages,
                     snapshot.estimator_id, _view_traces(snapshot.metrics))
    if instance.parent_id is None:
        view = view_best_for_run(run=run)
        if view is not None:
            return Start("view", ("view", view.pk), view.watermark, view.messages, view.estimator_id,
                         _traces_of_view(view))
    return Start()


# CTX-41: where a checkpoint's traces are kept -- in its snapshot's metrics, beside the
# ranges its summary consumed. A view is written with a snapshot, from the same messages.
VIEW_TRACES = "view_traces"


def _view_traces(metrics: Any) -> Any:
    return metrics.get(VIEW_TRACES) if isinstance(metrics, dict) else None


def _traces_of_view(view: SessionView) -> Any:
    """The traces of a reusable view: those of the snapshot saved with it (the run's main
    instance, the same watermark); None for a view no compaction made (an import) or whose
    run is gone, and then the projector knows nothing of what its messages stood for."""
    if view.source_run_id is None:
        return None
    metrics = (CompactionSnapshot.objects
               .filter(instance__run_id=view.source_run_id, instance__parent__isnull=True,
                       covered_seq=view.watermark)
               .order_by("-revision").values_list("metrics", flat=True).first())
    return _view_traces(metrics)


def context_load(*, run: Run, instance: Instance, snapshots: bool = True) -> tuple[Start, list[dict[str, Any]]]:
    """An instance's starting point and every visible record after it, as the engine
    reads them: what a run's ``InstanceContext`` loads once (then the loop feeds it what
    it writes). ``snapshots`` as for ``context_start``."""
    start = context_start(run=run, instance=instance, snapshots=snapshots)
    return start, list(visible_records_for_engine(run=run, instance=instance, after_seq=start.watermark))


@dataclass(frozen=True)
class PreparedContext:
    """An instance's context as the next request would read it, and where it started."""

    messages: list[dict[str, Any]]
    start: str  # "snapshot", "view" or "records"
    start_watermark: int
    records_read: int
    estimator_id: str | None  # of the snapshot or view it started from


def context_project(*, run: Run, instance: Instance, screen_tools: Sequence[str] = (),
                    tool_result_limit: int = DEFAULT_TOOL_RESULT_LIMIT) -> PreparedContext:
    """Read and project an instance's context once, through the pure engine (for readers
    of a session: the run loop keeps an ``InstanceContext`` per instance instead)."""
    start, records = context_load(run=run, instance=instance)
    context = InstanceContext(open_runs={run.pk}, screen_tools=screen_tools, tool_result_limit=tool_result_limit)
    context.load(start, records)
    return PreparedContext(messages=context.projected().messages, start=start.kind, start_watermark=start.watermark,
                           records_read=len(records), estimator_id=start.estimator_id)
