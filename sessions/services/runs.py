"""Creating runs and moving them through their states (RUN-1, RUN_TRANSITIONS)."""
from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from agents.models import AgentVersion
from core.db_rows import concrete_field, models_from_row, row_insert_unless_conflict, rows_insert, select_list
from core.errors import ActiveRunConflict
from memory.selectors import memory_for_run
from models_catalog.models import ModelConnection
from sessions.frames import RunBudget
from sessions.models import RUN_TRANSITIONS, Instance, Run, Session
from sessions.run_errors import NOT_A_MEMBER, QUEUE_UNAVAILABLE, RunError
from sessions.selectors.sessions import creator_is_member_sql, session_creator_is_member
from sessions.services import dispatch, run_slots
from sessions.services.events import event_emit, events_write
from sessions.services.records import NewRecord, record_append, records_append_new

logger = logging.getLogger("agentloom.dispatch")


def budget_freeze(*, version: AgentVersion) -> RunBudget:
    """The figures a run keeps for its whole life, resumes included (RUN-4)."""
    return RunBudget(provider=version.provider, model=version.model, context_window=version.context_window,
                     max_output_tokens=version.max_output_tokens,
                     safety_margin_tokens=version.safety_margin_tokens, context_policy=version.context_policy,
                     limits=dict(version.limits or {}))


def run_create(*, session: Session) -> Run:
    """Create a queued run with its main instance, bound to the session's version.

    Raises ``ActiveRunConflict`` (409) when the session already has a queued or running
    run. The database's conditional unique constraint decides, so two concurrent callers
    can never both succeed; the refused one writes nothing, inside a transaction or not.
    """
    return run_create_with_main(session=session)[0]


def run_create_with_main(*, session: Session, main: dict[str, Any] | None = None,
                         inherited_watermark: int | None = None) -> tuple[Run, Instance]:
    """``run_create``, returning the main instance too, inserted whole with the fields
    ``main`` gives (counters, frame). ``inherited_watermark``: the session's last seq as
    the caller just read it, with the session row locked (else read here)."""
    version = session.version
    # No savepoint inside the caller's transaction (two round trips on every question): a
    # run the one-active-run constraint refuses is simply not inserted, and nothing else
    # is; the refusal is raised once out of the block, which leaves the caller's
    # transaction usable.
    with transaction.atomic(savepoint=False):
        run = Run(
            session=session,
            user_id=session.user_id,  # whose runs the claim counts (run_slots)
            space_id=session.space_id,
            version=version,
            status=Run.Status.QUEUED,
            budget=budget_freeze(version=version),
            memory=memory_for_run(version=version, user_id=session.user_id, space_id=session.space_id),
            inherited_watermark=inherited_watermark if inherited_watermark is not None
            else Session.objects.values_list("last_seq", flat=True).get(pk=session.pk),
        )
        # Every question makes these two: no INSERT composed for them.
        inserted = row_insert_unless_conflict(run, target=_ONE_ACTIVE_RUN)
        if inserted:
            instance = Instance(run=run, key=Instance.MAIN, **(main or {}))
            rows_insert([instance])
    if not inserted:
        raise ActiveRunConflict(
            "This session already has a run in progress; wait for it, stop it, or add a supplement.")
    return run, instance


# The one-active-run constraint's index (``run_one_active_per_session``), as ON CONFLICT names it.
_ONE_ACTIVE_RUN = ('("session_id") WHERE "status" IN ('
                   + ", ".join(f"'{status}'" for status in Run.ACTIVE_STATUSES) + ")")


def run_transition(*, run: Run, to: str, expected_from: tuple[str, ...] | None = None,
                   where: Q | None = None, of_attempt: int | None = None, **changes) -> bool:
    """Move a run to ``to`` if that is legal from its current status (RUN_TRANSITIONS).

    A conditional UPDATE: two workers racing for the same transition cannot both win.
    ``expected_from`` narrows the legal sources to what the caller saw (a Stop of a
    *queued* run must not end a run a worker has just claimed); ``where`` adds a condition
    checked in the same statement, and so does ``of_attempt`` (the run's attempt must be
    this one). Returns False when the run did not match.
    """
    return _transition(run=run, to=to, expected_from=expected_from, where=where, of_attempt=of_attempt,
                       changes=changes)[0]


def _transition(*, run: Run, to: str, expected_from: tuple[str, ...] | None, where: Q | None,
                of_attempt: int | None, changes: dict[str, Any], probe: bool = False) -> tuple[bool, bool]:
    """``run_transition``; with ``probe``, also whether a run of its person or space may be
    waiting for the slot it frees (``run_slots``): asked in the same UPDATE (an index of
    waiting runs alone), or taken as yes when the transition is the ORM's (the reaper's)."""
    sources = [status for status, targets in RUN_TRANSITIONS.items() if to in targets]
    if expected_from is not None:
        sources = [status for status in sources if status in expected_from]
    probe = probe and Run.Status.RUNNING in sources and run_slots.bounded()
    if where is None:
        updated, waiting = _transition_written_out(run_id=run.pk, sources=sources, attempt=of_attempt, to=to,
                                                   changes=changes, probe=probe)
    else:
        query = Run.objects.filter(pk=run.pk, status__in=sources)
        if of_attempt is not None:
            query = query.filter(attempt=of_attempt)
        updated = query.filter(where).update(status=to, **changes)
        waiting = probe
    if updated:
        run.status = to
        for name, value in changes.items():
            setattr(run, name, value)
    return bool(updated), bool(updated) and waiting


def _transition_written_out(*, run_id: int, sources: list[str], attempt: int | None, to: str,
                            changes: dict[str, Any], probe: bool = False) -> tuple[int, bool]:
    """``run_transition``'s UPDATE without a ``where``, written out (every run ends through
    it). Each value prepared as ``save`` prepares it (the error is JSON). Returns the rows moved
    and, with ``probe``, what ``run_slots.WAITING_PROBE`` says of the moved run."""
    if not sources:
        return 0, False
    fields = [concrete_field(Run, name) for name in ("status", *changes)]
    values = [field.get_db_prep_save(value, connection) for field, value in zip(fields, (to, *changes.values()))]
    assignments = ", ".join(f'"{field.column}" = %s' for field in fields)
    condition = f'"id" = %s AND "status" IN ({", ".join(["%s"] * len(sources))})'
    params = [*values, run_id, *sources]
    if attempt is not None:
        condition += ' AND "attempt" = %s'
        params.append(attempt)
    returning = f" RETURNING {run_slots.WAITING_PROBE}" if probe else ""
    with connection.cursor() as cursor:
        cursor.execute(f'UPDATE "{Run._meta.db_table}" SET {assignments} WHERE {condition}{returning}', params)
        if not probe:
            return cursor.rowcount, False
        row = cursor.fetchone()
    return (1, bool(row[0])) if row is not None else (0, False)


def run_claim(*, run_id: int) -> Run | None:
    """Claim a queued run for this worker (LOOP-1). None when someone else has it, or it is gone.

    A run whose session's creator has left the space since it was queued is not claimed
    but ends failed, for good: nobody spends a space's key after leaving it (RUN-11).

    The claim writes the attempt's ``run_started`` event in its own transaction: the
    event says a worker has the run.

    A run whose person (or space) has as many runs running as allowed is not claimed
    either: it stays queued, marked waiting, until one of them ends (``run_slots``).
    """
    for _ in range(2):  # once more when a slot freed as the run was being marked waiting
        with transaction.atomic():
            claimed = _claim_if_creator_is_member(run_id=run_id)
            if claimed is not None:
                attempt, last_seq = claimed
                events_write(run_id=run_id, events=[("run_started", {"attempt": attempt})], last_seq=last_seq)
        if claimed is not None:
            run = _claimed(run_id=run_id)
            # The worker is the writer of the attempt it claimed, whatever the row says by
            # the time it is read back (every write checks it, sessions.services.ownership).
            run.attempt = claimed[0]
            return run
        if not _not_claimed(run_id=run_id):
            return None
    return None


def _not_claimed(*, run_id: int) -> bool:
    """Why the claim took nothing, acted on: a queued run of someone who left its space
    fails; one without room waits, marked. True when it has room after all (claim again)."""
    queued = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).select_related("session").first()
    if queued is None:  # another delivery has it, or it ended
        return False
    if queued.not_before is not None and queued.not_before > timezone.now():
        return False  # waits for the model's server; the sweep sends it when it is due
    if not session_creator_is_member(session=queued.session):
        run_finish(run=queued, status=Run.Status.FAILED, expected_from=(Run.Status.QUEUED,), error=NOT_A_MEMBER)
        return False
    reason = run_slots.waiting_reason_now(run=queued)
    if reason is None:
        return True
    run_slots.run_wait(run=queued, reason=reason)
    # A slot freed between the count and the mark was freed by an end that saw no run
    # waiting: look once more (the reaper's sweep is the net under what is left).
    return run_slots.waiting_reason_now(run=queued) is None


_CLAIMED_LAYOUT = ((Run, "r"), (Session, "s"), (AgentVersion, "v"), (ModelConnection, "c"), (Instance, "i"))


def _claimed(*, run_id: int) -> Run:
    """The claimed run with its session, version, the version's connection and the run's
    main instance (as ``main_as_claimed``), read at once (the worker reads them all): the
    ``select_related`` read plus the loop's first read of its main line, in one statement
    written out."""
    run, session, version = Run._meta.db_table, Session._meta.db_table, AgentVersion._meta.db_table
    select = select_list(_CLAIMED_LAYOUT)
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT {select} FROM "{run}" r JOIN "{session}" s ON s."id" = r."session_id" '
                       f'JOIN "{version}" v ON v."id" = r."version_id" '
                       f'LEFT JOIN "{ModelConnection._meta.db_table}" c ON c."id" = v."model_connection_id" '
                       f'LEFT JOIN "{Instance._meta.db_table}" i ON i."run_id" = r."id" AND i."key" = %s '
                       f'WHERE r."id" = %s', [Instance.MAIN, run_id])
        row = cursor.fetchone()
    if row is None:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    claimed, claimed_session, claimed_version, claimed_connection, main = models_from_row(row, _CLAIMED_LAYOUT)
    claimed_version.model_connection = claimed_connection
    claimed.session, claimed.version = claimed_session, claimed_version
    if main is not None:
        main.run = claimed
    claimed.main_as_claimed = main
    return claimed


def _claim_if_creator_is_member(*, run_id: int) -> tuple[int, int] | None:
    """``queued`` → ``running`` in one statement that checks the session's creator is still
    a member of its space, and takes the seq of the attempt's ``run_started`` event: every
    question comes here, and the ORM's form of this UPDATE (an EXISTS over two joins,
    rewritten as a subquery) cost more CPU to compose than the rest of the claim. Returns
    the attempt and the seq taken, or None when the run was not claimed.

    It also checks that the run's person and space have room for one more running run
    (``run_slots.room_sql``), having locked them first (``run_slots.room_lock``: claims of
    one person take turns, so each counts the other's)."""
    now = timezone.now()
    runs, sessions = Run._meta.db_table, Session._meta.db_table
    run_slots.room_lock(run_id=run_id)
    room, room_params = run_slots.room_sql(f'"{runs}"')
    with connection.cursor() as cursor:
        cursor.execute(
            f'UPDATE "{runs}" SET "status" = %s, "started_at" = %s, "heartbeat_at" = %s, "waiting_reason" = %s, '
            f'"not_before" = NULL, "event_seq" = "event_seq" + 1 '
            f'WHERE "id" = %s AND "status" = %s AND ("not_before" IS NULL OR "not_before" <= %s) '
            f'AND EXISTS (SELECT 1 FROM "{sessions}" s '
            f'WHERE s."id" = "{runs}"."session_id" AND {creator_is_member_sql("s")}){room} '
            'RETURNING "attempt", "event_seq"',
            [Run.Status.RUNNING, now, now, "", run_id, Run.Status.QUEUED, now, *room_params])
        row = cursor.fetchone()
    return (row[0], row[1]) if row is not None else None


def run_dispatch_on_commit(run_id: int) -> None:
    """Queue the run for a worker once the current transaction commits (at once outside one)."""
    dispatcher = dispatch.dispatcher_get()
    if dispatcher is not None:
        transaction.on_commit(lambda: _dispatch_or_fail(dispatcher, run_id))


def _dispatch_or_fail(dispatcher: dispatch.Dispatcher, run_id: int) -> None:
    """When the broker cannot take the run, fail it at once with a retryable error rather
    than leave it queued forever, blocking the session (a resume queues it again)."""
    try:
        dispatcher(run_id)
    except Exception:  # the broker boundary: any transport error means "not queued"
        logger.exception("run %s could not be queued", run_id)
        run = Run.objects.filter(pk=run_id).select_related("session").first()
        if run is not None:
            run_finish(run=run, status=Run.Status.FAILED, expected_from=(Run.Status.QUEUED,), error=QUEUE_UNAVAILABLE)


class SupplementsPending(Exception):
    """A supplement arrived before the run could complete: the loop must take it (RUN-5)."""


def run_finish(*, run: Run, status: str, error: RunError | None = None, reason: str = "",
               event_data: dict | None = None, expected_from: tuple[str, ...] | None = None,
               where: Q | None = None, of_attempt: int | None = None, main_steps: int | None = None) -> bool:
    """Record a run's terminal state once: the status row, a ``run_status`` record, and the
    ``run_finished`` event every stream waits for (whoever ends the run: the loop, a Stop
    of a queued run, the reaper).

    Idempotent (RUN-10): only the guarded transition out of the attempt's working state
    writes the record (its entry key names the attempt) and the event, so finishing the
    same attempt twice writes them once; a run already finished is left as it is.

    ``main_steps``: the model steps the loop counted for the main instance, saved in the
    same transaction (not a commit of its own before it). ``where`` and ``of_attempt`` as for
    ``run_transition``.

    A run that ends frees its slot: once the end commits, a run of the same person or space
    that waits for one is woken (``run_slots.runs_wake``), when the UPDATE said one waits.
    """
    stored = error.to_dict() if error is not None else None
    with transaction.atomic():
        moved, waiting = _transition(run=run, to=status, expected_from=expected_from, where=where,
                                     of_attempt=of_attempt, probe=True,
                                     changes={"error": stored, "finished_at": timezone.now(), "waiting_reason": ""})
        if not moved:
            return False
        if waiting:  # robust: a wake that fails is logged, the end stands, and the reaper's round wakes it
            transaction.on_commit(lambda: run_slots.runs_wake(user_id=run.user_id, space_id=run.space_id),
                                  robust=True)
        main = _main_instance_for_finish(run=run, main_steps=main_steps)
        if status == Run.Status.COMPLETED:
            # supplement_add locks the run row before queueing, and the UPDATE above holds
            # that lock now: a supplement is either seen here or refused with 409 (RUN-5).
            if (main.frame or {}).get("supplements"):
                raise SupplementsPending()
        message: dict = {"status": status}
        if reason:
            message["reason"] = reason
        if error is not None:
            message["error"] = {"code": error.code, "message": error.message}
        # The transition above moved this attempt out of its working state, once: its status
        # record is new, and goes in without a de-duplicating read.
        records_append_new(session=run.session, run=run, instance=main,
                           records=[NewRecord("run_status", message, f"status-{run.attempt}")])
        event_emit(run_id=run.pk, type="run_finished", data={"status": status, "error": stored, **(event_data or {})})
    return True


def _main_instance_for_finish(*, run: Run, main_steps: int | None) -> Instance:
    """The run's main instance as it is now (its frame may hold a supplement the API just
    added), with the loop's step count saved: one UPDATE that returns the row."""
    if main_steps is None:
        return Instance.objects.get(run=run, key=Instance.MAIN)
    table = Instance._meta.db_table
    rows = list(Instance.objects.raw(f'UPDATE "{table}" SET "model_steps" = %s WHERE "run_id" = %s AND "key" = %s '
                                     f'RETURNING *', [main_steps, run.pk, Instance.MAIN]))
    if not rows:  # as the read it replaces would say
        raise Instance.DoesNotExist(f"run {run.pk} has no main instance")
    return rows[0]


def run_wait_for_server(*, run: Run, attempt: int, seconds: float, error: RunError) -> bool:
    """LOOP-3: the model's server asked for a wait longer than a worker thread is held for
    (a long ``Retry-After``): the run goes back to ``queued`` until then, marked waiting for
    the model server, and frees its worker. A new attempt, as a resume is: what it did is
    saved step by step, so it goes on where it stopped. The reaper's sweep of every worker
    (``run_slots.runs_wake_waiting``) sends it to a worker once due, whichever workers are
    alive then. Only from this attempt's ``running``; False when the run was not ours."""
    until = timezone.now() + timedelta(seconds=seconds)
    with transaction.atomic():
        moved, waiting = _transition(run=run, to=str(Run.Status.QUEUED), expected_from=(str(Run.Status.RUNNING),),
                                     where=None,
                                     of_attempt=attempt, probe=True, changes={
                                         "attempt": attempt + 1, "waiting_reason": Run.Waiting.MODEL_SERVER,
                                         "not_before": until, "heartbeat_at": None})
        if not moved:
            return False
        event_emit(run_id=run.pk, type="run_waiting", data=server_wait_event(until=until, error=error))
        if waiting:  # it held a slot of its person or space: a run waiting for one may go now
            run_slots.runs_wake(user_id=run.user_id, space_id=run.space_id)
    return True


def server_wait_event(*, until: datetime, error: RunError) -> dict[str, Any]:
    """The ``run_waiting`` event of a run waiting for its model's server: when it goes on,
    and the words the chat shows (the browser puts the time in the reader's own zone)."""
    text = (f"Waiting for the model server until {until:%H:%M} UTC: it asked us to wait before asking again. "
            "Nothing is lost; the answer goes on by itself then.")
    return {"reason": Run.Waiting.MODEL_SERVER, "until": until.isoformat(), "code": error.code, "text": text}


def run_reopen_record(*, run: Run) -> None:
    """A resumed attempt starts again: say so in the records (once per attempt), so the
    projector reads the run as reopened — a call it left pending is pending again, and a
    re-run result answers it, never as a late result of an ended run (RUN-6, CTX-4)."""
    if run.attempt < 1:
        return
    record_append(session=run.session, run=run, instance=Instance.objects.get(run=run, key=Instance.MAIN),
                  kind="run_status", message={"status": "resumed", "attempt": run.attempt},
                  entry_key=f"resumed-{run.attempt}")


def heartbeat_period() -> float:
    """Seconds between two heartbeats of a working run (and of a worker): four fit in
    ``AGENTLOOM_HEARTBEAT_STALE_SECONDS``, and never more than 5 s pass between two."""
    return min(5.0, settings.AGENTLOOM_HEARTBEAT_STALE_SECONDS / 4)


def orphan_cutoff() -> datetime:
    """A running run whose heartbeat is older than this has missed two beats: nobody is
    left to read a Stop request, so Stop ends it without waiting for the stale interval."""
    return timezone.now() - timedelta(seconds=2 * heartbeat_period())
