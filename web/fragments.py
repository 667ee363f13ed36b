"""Web-only JSON the chat's script fetches: server-rendered HTML of a run, and of a streamed
text block once its step is over. Not part of the REST API (the records API of RUN-11
keeps its shape); the same reach rules apply — a run outside the caller's sessions is 404.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.http import JsonResponse
from django.views.decorators.http import require_GET

from core.api.errors import error_body
from core.api.fields import id_from_text
from core.errors import NotFound, TryLater
from core.slow_work import slow_work
from sessions.models import Run
from sessions.selectors.runs import run_get_for_user
from web.markdown import render_markdown
from web.rendered_runs import runs_rendered
from web.selectors import context_meter, delta_events, session_last_run
from web.transcript import text_from_deltas

MAX_TEXT_SPAN = 20_000  # events in one text block; a longer block is rendered at the run's end


def json_no_store(body: dict, status: int = 200) -> JsonResponse:
    """A JSON answer no cache keeps: what it says changes with every run."""
    response = JsonResponse(body, status=status)
    response["Cache-Control"] = "no-store"
    return response


def json_login_required(view: Callable) -> Callable:
    """401 in the API's error shape instead of a redirect to the login page."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return json_no_store(error_body("not_authenticated", "Log in first."), status=401)
        try:
            return view(request, *args, **kwargs)
        except NotFound as exc:
            return json_no_store(error_body(exc.code, exc.message), status=404)

    return wrapped


@require_GET
@json_login_required
def run_fragment(request, run_id: int):
    """The run as the transcript shows it: finished runs from their records (Markdown
    rendered here), working runs as what the person wrote plus an empty live area."""
    try:
        with slow_work("render", person=request.user.pk):
            run = run_get_for_user(run_id=run_id, user=request.user)
            latest = session_last_run(session=run.session)
            [view] = runs_rendered(runs=[run], latest_run_id=latest.pk if latest else None,
                                   agent_name=run.version.name, request=request)
    except TryLater as exc:
        response = json_no_store(error_body(exc.code, exc.message), status=exc.status)
        response["Retry-After"] = str(exc.retry_after)
        return response
    # The meter as a reload would show it: a run that failed on its request leaves its size.
    # "ending" tells the status line more than the status does: a completed run whose answer
    # the output limit cut is not "complete", and an empty answer is not a generic failure.
    ending = "cut" if view.continuable else (run.error or {}).get("code", "")
    return json_no_store({"id": run.pk, "status": run.status, "ending": ending,
                          "active": run.status in Run.ACTIVE_STATUSES, "last_seq": view.last_seq,
                          "html": view.html, "supplements": view.supplements,
                          "meter": context_meter(session=run.session)})


def _seq(value: str | None) -> int | None:
    # ASCII digits that fit a column: "²".isdigit() is True, and int("²") raises.
    return id_from_text(value) if value is not None else None


@require_GET
@json_login_required
def run_text(request, run_id: int):
    """The Markdown of the text the run streamed between two event seqs (``after < seq <= upto``),
    rendered and sanitised: what the browser swaps in when a streamed step is over."""
    run = run_get_for_user(run_id=run_id, user=request.user)
    after, upto = _seq(request.GET.get("after")), _seq(request.GET.get("upto"))
    if after is None or upto is None or upto < after or upto - after > MAX_TEXT_SPAN:
        return json_no_store(error_body("invalid", "after and upto must be event seqs with after <= upto.",
                                {"after": "invalid", "upto": "invalid"}), status=400)
    events = delta_events(run=run, after=after, upto=upto)
    text = text_from_deltas((event.type, event.payload or {}) for event in events)
    return json_no_store({"html": render_markdown(text)})
