"""What a person does to a run once it exists: Stop (LOOP-7) and Resume (RUN-4, CAT-9).
Both are transitions of ``sessions.services.runs``; the rules of who may press them are
the API's."""
from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import Q

from core.errors import ActiveRunConflict, Conflict, NotFound
from models_catalog.learning import window_since_proven
from sessions.frames import run_budget
from sessions.models import Run
from sessions.selectors.sessions import session_creator_is_member
from sessions.services.approvals import approvals_stop
from sessions.services.manual_compaction import compaction_hold_check, session_lock
from sessions.services.prepared import preparations_discard
from sessions.services.runs import orphan_cutoff, run_dispatch_on_commit, run_finish, run_transition


def run_cancel(*, run: Run) -> Run:
    """Stop a run (LOOP-7). A queued run ends now; a running one is asked to stop and the
    loop ends it at the next safe point (mid-stream, between tools, inside a tool).

    Stop always wins (LOOP-1): a running run that missed two heartbeats has no worker to
    read the request, so it ends here, ``cancelled`` and resumable. If its worker was only
    slow, that worker finds the run no longer its own and stops without writing. A run
    whose worker dies after this is ended by the reaper, also as ``cancelled``.
    """
    if run.status == Run.Status.WAITING and approvals_stop(run=run):  # TOOL-9: its waiting calls are denied
        run.refresh_from_db()
        return run
    if run.status == Run.Status.QUEUED and run_finish(run=run, status=Run.Status.CANCELLED, reason="stopped by user",
                                                      expected_from=(Run.Status.QUEUED,)):
        return run
    Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(cancel_requested=True)
    run_finish(run=run, status=Run.Status.CANCELLED, reason="stopped by user", expected_from=(Run.Status.RUNNING,),
               where=Q(heartbeat_at__lt=orphan_cutoff()))
    run.refresh_from_db()
    return run


RESUMABLE = (Run.Status.CANCELLED, Run.Status.INTERRUPTED, Run.Status.FAILED)


def _window_since_proven(run: Run) -> bool:
    """CAT-9: a run that failed on the window is resumable once the server proved a window
    that gives it other figures than it froze (``models_catalog.learning.window_since_proven``)."""
    frozen = run_budget(run.budget, version=run.version)
    return window_since_proven(code=(run.error or {}).get("code"), connection=run.version.model_connection,
                               frozen=(frozen["context_window"], frozen["max_output_tokens"],
                                       frozen["safety_margin_tokens"]))


def run_resume(*, run: Run) -> Run:
    """Continue a stopped, interrupted or failed run with its frozen version, budget and
    inherited history (RUN-4). 409 while another run of the session is active."""
    if not session_creator_is_member(session=run.session):
        raise NotFound("Run not found.")
    if run.status not in RESUMABLE:
        raise Conflict(f"A {run.status} run cannot be resumed.", code="not_resumable")
    if (run.status == Run.Status.FAILED and run.error and run.error.get("retryable") is False
            and not _window_since_proven(run)):
        raise Conflict("This run failed for a reason a resume cannot fix.", code="not_resumable")
    try:
        with transaction.atomic():
            session_lock(session_id=run.session_id)  # not while a manual compaction holds the session
            compaction_hold_check(session_id=run.session_id)
            # From a stopped run only: ``running -> queued`` is the wait for the model's server.
            moved = run_transition(run=run, to=Run.Status.QUEUED, expected_from=tuple(map(str, RESUMABLE)),
                                   cancel_requested=False,
                                   attempt=run.attempt + 1, error=None, finished_at=None, waiting_reason="",
                                   not_before=None)
    except IntegrityError:
        raise ActiveRunConflict("Another run of this session is in progress.") from None
    if not moved:
        raise Conflict("The run changed state; reload and try again.", code="state_changed")
    # CTX-45: a resume re-reads its records after an interruption; a summary prepared of
    # the view before it is not trusted for the view after it.
    preparations_discard(session_id=run.session_id, reason="resumed")
    run_dispatch_on_commit(run.pk)
    return run
