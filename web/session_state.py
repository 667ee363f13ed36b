"""The session's runs as another tab or device of the same person needs to know them: the
run working now, and the runs started after the last one a page shows.

The chat asks this every few seconds while the page is visible and follows no run (and at
once when it becomes visible again, or when a question is refused because a run is
active): a plain request answered from two indexed reads, so an idle tab holds no stream,
no worker thread and no place among the person's open streams, and it works with or
without Redis. A run found working is then followed with its own event stream, as a
reload would (``docs/web.md``, *Other tabs and devices*).
"""
from __future__ import annotations

from typing import Any

from django.views.decorators.http import require_GET

from core.api.errors import error_body
from core.api.fields import id_from_text
from sessions.models import Run, Session, ToolApproval
from sessions.selectors.sessions import session_get_for_user
from web.fragments import json_login_required, json_no_store
from web.selectors import RUNS_PER_PAGE

APPROVALS_SHOWN = 50  # a run's calls that asked, newest first: more than one step ever waits with


def session_runs_state(*, session: Session, after: int) -> dict[str, Any]:
    """``{active_run, runs, approvals}``: the id of the session's queued, running or waiting
    run (or None), the ids of its runs after run ``after``, oldest first — at most a page of
    them — and the active run's calls that wait or waited for the person's approval
    (``run_approvals_state``): a decision made in another tab shows in this one."""
    active = (Run.objects.filter(session=session, status__in=Run.ACTIVE_STATUSES)
              .order_by("-id").values_list("id", flat=True).first())
    newer = list(Run.objects.filter(session=session, pk__gt=after)
                 .order_by("-id").values_list("id", flat=True)[:RUNS_PER_PAGE])
    return {"active_run": active, "runs": sorted(newer),
            "approvals": run_approvals_state(run_id=active) if active is not None else []}


def run_approvals_state(*, run_id: int) -> list[dict[str, str]]:
    """``[{call_id, status, scope, reason}]`` of the run's calls that asked for approval, in
    call order (at most a page of the newest): waiting (``awaiting``) or decided."""
    rows = list(ToolApproval.objects.filter(run_id=run_id).order_by("-step", "-index")[:APPROVALS_SHOWN])
    return [{"call_id": row.call_id, "status": row.status, "scope": row.scope, "reason": row.reason}
            for row in reversed(rows)]


@require_GET
@json_login_required
def session_state(request, session_id: int):
    """``GET /chat/sessions/{id}/state?after=<run id>`` → ``{active_run, runs, approvals}``; 404 for a
    session outside the caller's own (as every chat read), 400 for an ``after`` that is no id."""
    after = id_from_text(request.GET.get("after", "0"))
    if after is None:
        return json_no_store(error_body("invalid", "after must be a run id (or 0).", {"after": "invalid"}), status=400)
    session = session_get_for_user(session_id=session_id, user=request.user)
    return json_no_store(session_runs_state(session=session, after=after))
