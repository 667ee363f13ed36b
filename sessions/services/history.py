"""The history service: questions, supplements, context preparation, checkpoints, views.

Turns append-only encrypted records into each run's context through the pure engine
(``context.project_records``), and keeps that cheap with snapshots and reusable views.
"""
from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from context import DEFAULT_TOOL_RESULT_LIMIT, InstanceContext, Start
from context.surrogates import replace_lone_surrogates
from core.errors import Conflict, NotFound, ValidationFailed
from sessions.frames import QueuedSupplement, frame_initial
from sessions.models import CompactionSnapshot, Instance, Run, RunAttention, Session, SessionMessage, SessionView
from sessions.selectors import (
    calls_pending,
    main_instance,
    session_creator_is_member,
    snapshot_latest,
    view_best_for_run,
    visible_records_for_engine,
)
from sessions.services.files import attachment_of, attachments_mark, attachments_take, file_ids_clean
from sessions.services.frames import frame_locked
from sessions.services.manual_compaction import compaction_request as compaction_request  # its old home
from sessions.services.manual_compaction import session_lock_to_ask
from sessions.services.pasted import pasted_redactor
from sessions.services.prepared import preparations_discard
from sessions.services.records import NewRecord, record_append, records_append, records_append_new
from sessions.services.runs import run_create_with_main, run_dispatch_on_commit

MAX_QUESTION_CHARS = 100_000

def _clean_content(content: Any, field: str = "content") -> str:
    if not isinstance(content, str) or not content.strip():
        raise ValidationFailed("Write something first.", fields={field: "must be a non-empty string"})
    if len(content) > MAX_QUESTION_CHARS:
        raise ValidationFailed("That is too long.", fields={field: f"at most {MAX_QUESTION_CHARS} characters"})
    # A question (and the title made of it) or a supplement, from any caller (the API's
    # parser replaces them already; a service called directly must not store one either).
    return replace_lone_surrogates(content)


def _creator_still_member(session: Session) -> None:
    if not session_creator_is_member(session=session):
        raise NotFound("Session not found.")


def main_counts(*, session_id: int, up_to_seq: int) -> tuple[int, int]:
    """(user_turns, model_steps) from the session's main-instance records up to a seq (CTX-23)."""
    counts = SessionMessage.objects.filter(session_id=session_id, in_main=True, seq__lte=up_to_seq).aggregate(
        turns=Count("pk", filter=Q(kind="user")),
        # cut answers are no steps
        steps=Count("pk", filter=Q(kind="assistant") & ~Q(entry_key__startswith=PARTIAL_PREFIX)))
    return counts["turns"], counts["steps"]


def question_ask(*, session: Session, content: Any, files: Any = None) -> Run:
    """A new question: a run with its main instance, the user record, counters (RUN-1, RUN-2).

    ``files``: ids of the session's uploaded files not yet sent with a question; the
    record carries them as ``attachments`` (RUN-13), else ValidationFailed (400) and
    nothing changes. One transaction; the run is queued for a worker only once it commits.
    Raises ActiveRunConflict (409) while another run of the session is queued or running,
    CompactionRunning (409) while a manual compaction holds the session, and
    NotFound once the session's creator has left its space (RUN-11).
    """
    content = pasted_redactor(version=session.version).text(_clean_content(content))  # LOOP-8; the title too
    file_ids = file_ids_clean(files)
    with transaction.atomic():
        # One thing at a time per session: not while a manual compaction holds it.
        session_lock_to_ask(session_id=session.pk)
        attached = attachments_take(session=session, ids=file_ids)
        run, instance = _run_open(session=session, new_turn=True)
        message: dict[str, Any] = {"role": "user", "content": content}
        if attached:
            message["attachments"] = [attachment_of(file) for file in attached]
        # A new run's first record is always new: no de-duplicating read (two round trips).
        record = records_append_new(session=session, run=run, instance=instance,
                                    records=[NewRecord("user", message, "question")])[0]
        if attached:
            attachments_mark(files=attached, question_seq=record.seq)
        named = {} if session.title else {"title": content.strip()[:80]}
        Session.objects.filter(pk=session.pk).update(updated_at=timezone.now(), **named)
        session.title = session.title or named["title"]
        run_dispatch_on_commit(run.pk)
    return run


def _run_open(*, session: Session, new_turn: bool) -> tuple[Run, Instance]:
    """A queued run of ``session`` and its main instance, counters and frame carried on
    from the session's main line. Inside the caller's transaction, session row locked."""
    watermark, carried = main_line_carried(session_id=session.pk)
    fields = {**carried, "user_turns": carried["user_turns"] + (1 if new_turn else 0)}
    return run_create_with_main(session=session, main=fields, inherited_watermark=watermark)


def main_line_carried(*, session_id: int) -> tuple[int, dict[str, Any]]:
    """What a new run of the session starts from, read in one statement (issue #29: it was
    four, on every question): the watermark it inherits (the session's last seq), and its
    main instance's fields — the counts up to that watermark (``main_counts``), the
    baselines of the best view under it (``view_best_for_run``), and the plan (LOOP-4) and
    summary back-off (CTX-44) of the session's latest main frame, which the new question
    carries on. ``tests/sessions/test_main_line_carried.py`` holds it to those readers.

    Read with the session row locked: nothing moves the watermark meanwhile.
    """
    message, view, instance = SessionMessage._meta.db_table, SessionView._meta.db_table, Instance._meta.db_table
    run, session = Run._meta.db_table, Session._meta.db_table
    main_up_to = f'FROM "{message}" m WHERE m."session_id" = s."id" AND m."in_main" AND m."seq" <= s."last_seq"'
    best_view = (f'FROM "{view}" v WHERE v."session_id" = s."id" AND v."watermark" <= s."last_seq" '
                 'ORDER BY v."watermark" DESC, v."id" DESC LIMIT 1')
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT s."last_seq", (SELECT COUNT(*) {main_up_to} AND m."kind" = %s), '
            f'(SELECT COUNT(*) {main_up_to} AND m."kind" = %s AND substr(m."entry_key", 1, %s) <> %s), '
            f'(SELECT v."baseline_user_turns" {best_view}), (SELECT v."baseline_model_steps" {best_view}), '
            # The latest run's main instance: found from the run's index, not by ordering
            # every main instance of the table (issue #29: that grew with all runs ever made).
            f'(SELECT i."frame" FROM "{instance}" i WHERE i."parent_id" IS NULL AND i."run_id" = '
            f'(SELECT r."id" FROM "{run}" r WHERE r."session_id" = s."id" ORDER BY r."id" DESC LIMIT 1)) '
            f'FROM "{session}" s WHERE s."id" = %s',
            ["user", "assistant", len(PARTIAL_PREFIX), PARTIAL_PREFIX, session_id])
        watermark, turns, steps, baseline_turns, baseline_steps, frame = cursor.fetchone()
    frame_field = Instance._meta.get_field("frame")
    previous = frame_field.from_db_value(frame, frame_field.cached_col, connection) or {} if frame else {}
    return watermark, {
        "user_turns": turns, "model_steps": steps,
        "baseline_user_turns": baseline_turns or 0, "baseline_model_steps": baseline_steps or 0,
        "frame": frame_initial(compaction_failure=previous.get("compaction_failure"), plan=previous.get("plan"))}


def answer_was_cut(*, run: Run) -> bool:
    """Whether ``run`` completed with a main answer its output limit cut (finish reason
    ``length``) and no tool call to go on with: an answer Continue can carry on."""
    if run.status != Run.Status.COMPLETED:
        return False
    last = (SessionMessage.objects.filter(run=run, in_main=True, kind="assistant").order_by("-seq").first())
    message = last.message if last is not None and isinstance(last.message, dict) else {}
    return message.get("finish_reason") == "length" and not message.get("tool_calls")


def answer_continue(*, run: Run) -> Run:
    """Continue an answer its output limit cut: a new run of the session with no question
    of its own. Its history ends on the cut answer, so the model reads that as the last
    assistant message, then the engine's note asking it to go on
    (``context.adapters.CONTINUE_NOTE``), and writes the rest.

    Only the session's latest run, completed with a cut answer: else Conflict
    ``not_continuable`` (409); ActiveRunConflict and CompactionRunning as ``question_ask``.
    """
    session = run.session
    with transaction.atomic():
        session_lock_to_ask(session_id=session.pk)
        latest = Run.objects.filter(session=session).order_by("-pk").values_list("pk", flat=True).first()
        if latest != run.pk or not answer_was_cut(run=run):
            raise Conflict("Only the latest answer of a session, cut at its output limit, can be continued.",
                           code="not_continuable")
        continued, _ = _run_open(session=session, new_turn=False)
        Session.objects.filter(pk=session.pk).update(updated_at=timezone.now())
        run_dispatch_on_commit(continued.pk)
    return continued


def supplement_add(*, run: Run, content: Any) -> dict[str, Any]:
    """Queue a supplement for a working run (RUN-5). It enters the context only at a safe
    point — never between a tool call and its result — when the loop takes the queue."""
    content = pasted_redactor(version=run.version).text(_clean_content(content))  # LOOP-8
    _creator_still_member(run.session)
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status not in Run.ACTIVE_STATUSES:
            raise Conflict("This run has finished; ask a new question instead.", code="run_not_active")
        item = QueuedSupplement(id=uuid.uuid4().hex, content=content, at=timezone.now().isoformat())
        with frame_locked(instance=main_instance(run=run)) as frame:
            frame["supplements"] = [*frame.get("supplements", []), item]
        # The worker learns of it from its next write to the run row (no extra read per step).
        Run.objects.filter(pk=run.pk).update(attention=F("attention").bitor(RunAttention.SUPPLEMENT))
    return dict(item)


def supplements_take(*, run: Run, instance: Instance) -> list[SessionMessage]:
    """Move every queued supplement into the records, in one transaction with the frame.

    The caller guarantees no tool group is pending (CTX-30 order: finish the tool group,
    then take supplements, then prepare the context). The run row is locked first, as
    ``supplement_add`` does, and its attention bit cleared: a supplement is either taken
    here or raises the bit again after.
    """
    with transaction.atomic():
        Run.objects.filter(pk=run.pk).update(attention=F("attention").bitand(~RunAttention.SUPPLEMENT & 0xFFFF))
        return _supplements_move(run=run, instance=instance)


def _supplements_move(*, run: Run, instance: Instance) -> list[SessionMessage]:
    with frame_locked(instance=instance) as frame:
        queued = frame.get("supplements") or []
        if not queued:
            return []
        rows = records_append(
            session=run.session, run=run, instance=instance,
            records=[NewRecord("supplement", {"role": "user", "content": s["content"], "supplement": True},
                               f"supplement-{s['id']}") for s in queued],
        )
        frame["supplements"] = []
    return rows


PARTIAL_PREFIX = "partial-"


def instance_steps_save(*, instance: Instance) -> None:
    """Write the model steps the loop counted in memory (at the end of an attempt)."""
    Instance.objects.filter(pk=instance.pk).update(model_steps=instance.model_steps)


def instance_steps_recount(*, run: Run, instance: Instance) -> None:
    """A resumed run's model steps, counted again from the records (CTX-23): what the main
    instance inherited when its question was asked, plus its own received answers. An
    attempt that ended normally saved the same figure; one whose worker died did not."""
    inherited = main_counts(session_id=run.session_id, up_to_seq=run.inherited_watermark)[1] if instance.is_main else 0
    own = (SessionMessage.objects.filter(instance=instance, kind="assistant")
           .exclude(entry_key__startswith=PARTIAL_PREFIX).count())
    instance.model_steps = inherited + own
    instance_steps_save(instance=instance)


def assistant_record(*, message: dict[str, Any], entry_key: str) -> tuple[NewRecord, int]:
    """An action model response as a record, and the model steps it counts (CTX-23): a
    stream cut by a Stop is kept but counts none, under a ``partial-`` key."""
    if message.get("partial"):
        return NewRecord("assistant", message, f"{PARTIAL_PREFIX}{entry_key}"), 0
    return NewRecord("assistant", message, entry_key), 1


def step_save_assistant(*, run: Run, instance: Instance, message: dict[str, Any],
                        entry_key: str) -> SessionMessage | None:
    """Save an action model response; a received one counts as a model step (CTX-23).

    A stream cut by a Stop (``message["partial"]``) is kept — the model sees what it had
    said — but was not received, so it is no step: its entry key gets the ``partial-``
    prefix, which ``main_counts`` leaves out, as the engine's own counting does (records
    are encrypted; the key is what a query can read). Atomic; saving the same step twice
    (a retried save after a crash) inserts and counts nothing.
    """
    record, counts = assistant_record(message=message, entry_key=entry_key)
    with transaction.atomic():
        row = record_append(session=run.session, run=run, instance=instance, kind="assistant",
                            message=record.message, entry_key=record.entry_key)
        if row is not None and counts:
            Instance.objects.filter(pk=instance.pk).update(model_steps=F("model_steps") + 1)
            instance.model_steps += 1
    return row


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


def view_allowed(*, run: Run, instance: Instance, covered_seq: int) -> bool:
    """RUN-7, the observed-prefix rule: may a checkpoint at ``covered_seq`` become a view?

    Only for a main instance whose inherited prefix plus its own records are *all* the
    session's main-instance records up to ``covered_seq`` (no other run wrote in between),
    with no pending tool group and no queued supplement.
    """
    if instance.parent_id is not None or covered_seq > run.session.last_seq:
        return False
    foreign = SessionMessage.objects.filter(
        session_id=run.session_id, in_main=True, seq__gt=run.inherited_watermark, seq__lte=covered_seq
    ).exclude(instance=instance)
    frame = instance.frame or {}
    return not foreign.exists() and not calls_pending(instance=instance) and not frame.get("supplements")


@dataclass(frozen=True)
class CheckpointResult:
    snapshot: CompactionSnapshot
    view: SessionView | None
    records: list[SessionMessage]


def checkpoint_commit(*, run: Run, instance: Instance, messages: list[dict[str, Any]], covered_seq: int,
                      estimator_id: str, metrics: dict[str, Any] | None = None,
                      records: Sequence[NewRecord] = (), traces: list[Any] | None = None) -> CheckpointResult:
    """Save a compaction checkpoint (RUN-10): record sync, the encrypted snapshot, the moved
    baselines and — when RUN-7 allows — the reusable view, all in one transaction. The
    caller's counts are the current ones (the loop keeps model steps in memory) and are
    saved with it. ``traces`` (JSON, one per message: the record ranges each stands for,
    CTX-41) are kept in the snapshot's metrics as ``view_traces``; the view made with it
    reads them there (``context_start``)."""
    with transaction.atomic():
        appended = records_append(session=run.session, run=run, instance=instance, records=records) if records else []
        locked = Instance.objects.select_for_update().get(pk=instance.pk)
        last = locked.snapshots.order_by("-revision").values_list("revision", flat=True).first() or 0
        locked.model_steps = max(locked.model_steps, instance.model_steps)
        locked.baseline_user_turns = locked.user_turns
        locked.baseline_model_steps = locked.model_steps
        locked.save(update_fields=["model_steps", "baseline_user_turns", "baseline_model_steps"])
        snapshot = CompactionSnapshot.objects.create(
            instance=locked, revision=last + 1, covered_seq=covered_seq,
            inherited_watermark=run.inherited_watermark, messages=messages,
            baseline_user_turns=locked.user_turns, baseline_model_steps=locked.model_steps,
            estimator_id=estimator_id,
            metrics={**(metrics or {}), **({VIEW_TRACES: traces} if traces is not None else {})},
        )
        # CTX-45: every summary prepared of the view before this checkpoint is stale now.
        preparations_discard(session_id=run.session_id, reason="view_changed")
        run.session.refresh_from_db(fields=["last_seq"])
        view = None
        if view_allowed(run=run, instance=locked, covered_seq=covered_seq):
            view = SessionView.objects.create(
                session_id=run.session_id, watermark=covered_seq, messages=messages,
                user_turns=locked.user_turns, model_steps=locked.model_steps,
                baseline_user_turns=locked.user_turns, baseline_model_steps=locked.model_steps,
                estimator_id=estimator_id, source_run=run,
            )
    instance.baseline_user_turns = locked.baseline_user_turns
    instance.baseline_model_steps = locked.baseline_model_steps
    return CheckpointResult(snapshot=snapshot, view=view, records=appended)


def compaction_request_taken(*, run: Run) -> None:
    """The run's worker took a manual compaction request: clear the run's attention bit."""
    Run.objects.filter(pk=run.pk).update(attention=F("attention").bitand(~RunAttention.COMPACT & 0xFFFF))
