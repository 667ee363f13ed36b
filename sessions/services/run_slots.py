"""Bounds on the runs one person, and one space, may have running at once (issue #44).

A worker thread is held by a run for as long as it runs — minutes, for a long one — so one
account asking in many sessions at once could hold every thread of every worker while
everyone else's questions wait behind it. A person may have at most
``AGENTLOOM_MAX_RUNNING_RUNS_PER_USER`` runs *running* (3 by default), and the people of a
space together ``AGENTLOOM_MAX_RUNNING_RUNS_PER_SPACE`` (no bound by default). Further
questions are not refused: each is accepted, its run waits ``queued``, and it starts as
soon as one of the earlier ones ends. A waiting run holds no thread, so another person's
question is claimed by the next free thread, whatever the first person has asked.

- **The claim** (``runs.run_claim``) moves a run to ``running`` in one conditional UPDATE;
  :func:`room_sql` adds its conditions: fewer running runs of the person (and the space)
  than the bound, counted in indexes that hold running runs alone. On PostgreSQL the claim
  first locks the person's row (and the space's) for the rest of its transaction
  (:func:`room_lock`), so two workers claiming runs of one person take turns and each
  counts what the other claimed: the bound holds across workers and machines. SQLite's
  transactions take the write lock as they begin, which serializes claims already.
- **Waiting.** A run refused for that reason stays ``queued`` and is marked with why
  (``Run.waiting_reason``, and a ``run_waiting`` event that the chat puts in words), once:
  :func:`run_wait`.
- **Waking.** A run that ends while it held a slot asks, in the UPDATE that ends it, whether
  a run of its person or space waits (:data:`WAITING_PROBE`: an index of waiting runs
  alone, usually empty); only then does :func:`runs_wake` look for the oldest waiting run of
  each that has room now, clear its mark (one conditional UPDATE: two wakers never both
  send it) and hand it to a worker once the end commits.
- **Waiting for the model's server** (LOOP-3): a run whose model's server asked for a long
  wait (``Retry-After`` over ``AGENTLOOM_PROVIDER_RETRY_MAX_DELAY``) is back ``queued``,
  marked ``model_server`` with a ``not_before``; the sweep below sends it once due.
- **The safety net.** A run may begin to wait at the moment a slot frees, unseen by the end
  that freed it, and a broker may refuse a woken run: the reaper's schedule wakes every
  waiting run that has room (:func:`runs_wake_waiting`), so none waits longer than one
  beat past its turn.

On the path every question takes this costs one statement on PostgreSQL (the lock), two
counts inside the claim's UPDATE and one probe inside the finish's, and nothing else while
nobody waits. A person's own waiting runs start oldest first when their runs end; a
question the person asks meanwhile may take a slot first (their own order is theirs).
"""
from __future__ import annotations

import logging
from functools import partial
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.utils import timezone

from core.spaces.models import Space
from sessions.models import Run
from sessions.services import dispatch
from sessions.services.events import event_emit

logger = logging.getLogger("agentloom.dispatch")

_RUNS = Run._meta.db_table
_WAITING = f"w.\"status\" = '{Run.Status.QUEUED}' AND NOT (w.\"waiting_reason\" = '')"
# In the RETURNING of the UPDATE that ends a run: does a run of its person or space wait?
WAITING_PROBE = (f'EXISTS (SELECT 1 FROM "{_RUNS}" w WHERE {_WAITING} AND (w."user_id" = "{_RUNS}"."user_id" '
                 f'OR w."space_id" = "{_RUNS}"."space_id"))')
# A waiting run is sent to a worker only once due: at once when it waits for room, at its
# ``not_before`` when it waits for the model's server (a long ``Retry-After``, LOOP-3).
_DUE = ' AND (w."not_before" IS NULL OR w."not_before" <= %s)'
SWEEP_LIMIT = 100  # waiting runs woken per beat at most: the next beat takes the rest


def bounds() -> tuple[int, int]:
    """The bounds in force: (per person, per space); 0 is none."""
    return settings.AGENTLOOM_MAX_RUNNING_RUNS_PER_USER, settings.AGENTLOOM_MAX_RUNNING_RUNS_PER_SPACE


def bounded() -> bool:
    return any(bounds())


def room_sql(row: str) -> tuple[str, list[Any]]:
    """Conditions (each starting with ``AND``) that the run in ``row`` (a table name or alias)
    has room to run: its person's, and its space's, running runs under their bounds."""
    per_user, per_space = bounds()
    sql, params = "", []
    for column, bound in (("user_id", per_user), ("space_id", per_space)):
        if bound:
            sql += (f' AND (SELECT COUNT(*) FROM "{_RUNS}" o WHERE o."{column}" = {row}."{column}" '
                    f'AND o."status" = %s) < %s')
            params += [Run.Status.RUNNING, bound]
    return sql, params


def room_lock(*, run_id: int) -> None:
    """Inside the claim's transaction, before its UPDATE: lock the run's person's row (and
    its space's, when spaces are bounded) until the transaction ends (PostgreSQL). The next
    statement then counts every run another claim of that person has committed: claims
    take turns per person, and no two of them both see the last free slot. ``NO KEY
    UPDATE``: rows that merely point at the person (a new session) are not held up."""
    per_user, per_space = bounds()
    if connection.vendor != "postgresql" or not (per_user or per_space):
        return
    joins, locked = [], []
    if per_user:
        joins.append(f'JOIN "{get_user_model()._meta.db_table}" u ON u."id" = r."user_id"')
        locked.append("u")
    if per_space:
        joins.append(f'JOIN "{Space._meta.db_table}" s ON s."id" = r."space_id"')
        locked.append("s")
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT 1 FROM "{_RUNS}" r {" ".join(joins)} WHERE r."id" = %s '
                       f'FOR NO KEY UPDATE OF {", ".join(locked)}', [run_id])


def waiting_reason_now(*, run: Run) -> str | None:
    """Why ``run`` could not be claimed for want of room (``Run.Waiting``), or None when it
    has room now."""
    per_user, per_space = bounds()
    running = Run.objects.filter(status=Run.Status.RUNNING)
    if per_user and run.user_id is not None and running.filter(user_id=run.user_id).count() >= per_user:
        return str(Run.Waiting.USER_LIMIT)
    if per_space and run.space_id is not None and running.filter(space_id=run.space_id).count() >= per_space:
        return str(Run.Waiting.SPACE_LIMIT)
    return None


def run_wait(*, run: Run, reason: str) -> bool:
    """Mark a queued run as waiting for ``reason``, and say so in its events, once (not again
    for the same reason). Returns whether it was marked now."""
    per_user, per_space = bounds()
    with transaction.atomic():
        marked = Run.objects.filter(pk=run.pk, status=Run.Status.QUEUED).exclude(waiting_reason=reason).update(
            waiting_reason=reason)
        if marked:
            event_emit(run_id=run.pk, type="run_waiting", data={
                "reason": reason, "limit": per_user if reason == Run.Waiting.USER_LIMIT else per_space})
    if marked:
        run.waiting_reason = reason
    return bool(marked)


def runs_wake(*, user_id: int | None, space_id: int | None) -> list[int]:
    """A run of this person or space ended: wake the oldest waiting run of each that has
    room now. Returns the ids woken (each sent to a worker once the caller commits)."""
    room, params = room_sql("w")
    found: list[int] = []
    with connection.cursor() as cursor:
        for column, value in (("user_id", user_id), ("space_id", space_id)):
            if value is None or (column == "space_id" and not bounds()[1]):
                continue
            cursor.execute(f'SELECT w."id" FROM "{_RUNS}" w WHERE {_WAITING} AND w."{column}" = %s{_DUE}{room} '
                           'ORDER BY w."id" LIMIT 1', [value, timezone.now(), *params])
            found += [row[0] for row in cursor.fetchall() if row[0] not in found]
    return _wake(found)


def runs_wake_waiting(*, limit: int = SWEEP_LIMIT) -> list[int]:
    """The reaper's safety net: wake every waiting run that has room now (the oldest first,
    at most one per person and ``limit`` in all); returns their ids."""
    room, params = room_sql("w")
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT w."id", w."user_id" FROM "{_RUNS}" w WHERE {_WAITING}{_DUE}{room} '
                       'ORDER BY w."id" LIMIT %s', [timezone.now(), *params, limit])
        rows = cursor.fetchall()
    people: set[Any] = set()
    first_of_each = []
    for run_id, user_id in rows:
        if user_id is None or user_id not in people:
            people.add(user_id)
            first_of_each.append(run_id)
    with transaction.atomic():
        return _wake(first_of_each)


def _wake(run_ids: list[int]) -> list[int]:
    """Clear each run's mark (only a waker that clears it sends it) and send it to a worker
    once the current transaction commits (at once outside one)."""
    reasons = dict(Run.objects.filter(pk__in=run_ids).values_list("pk", "waiting_reason"))
    woken = [run_id for run_id in run_ids if reasons.get(run_id) and Run.objects.filter(
        pk=run_id, status=Run.Status.QUEUED, waiting_reason=reasons[run_id]).update(waiting_reason="")]
    sender = dispatch.dispatcher_get()
    if sender is not None:
        for run_id in woken:
            transaction.on_commit(partial(_send, sender, run_id, reasons[run_id]))
    return woken


def _send(sender: dispatch.Dispatcher, run_id: int, reason: str) -> None:
    """A woken run the broker cannot take is marked waiting again, for the next sweep: it
    waited for room, not for the broker, so it is not failed for it."""
    try:
        sender(run_id)
    except Exception:  # the broker boundary: any transport error means "not queued"
        logger.exception("woken run %s could not be queued; the next sweep tries again", run_id)
        Run.objects.filter(pk=run_id, status=Run.Status.QUEUED, waiting_reason="").update(waiting_reason=reason)
