"""The chat's pages: log in and out, the sessions list with "new chat", one session."""
from __future__ import annotations

import os
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView, LogoutView
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse, reverse_lazy
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET, require_http_methods

from agents.server_tools import frozen_server_tools
from core.api.fields import id_from_text
from core.errors import NotFound, TryLater, ValidationFailed
from core.slow_work import slow_work
from memory.selectors import memory_changes_in_session
from models_catalog.providers import provider_is_offline
from sessions.event_types import event_names
from sessions.models import Session
from sessions.selectors.approvals import sessions_waiting_for
from sessions.selectors.search import QUERY_MAX_CHARS
from sessions.selectors.sessions import prepared_summary_state, session_get_for_user
from sessions.services.sessions import session_draft, session_empty_like
from web.approval_cards import AWAITING_STEP_WORDS, SESSION_WAITING_WORDS, approval_words
from web.errors import error_table
from web.folded import FOLDED_NOTICE
from web.memory_words import memory_notes_by_run, memory_words
from web.presenters import meter_label, meter_page
from web.rendered_runs import runs_rendered
from web.security import LimitedAuthenticationForm, limited_login, login_locked, with_csp
from web.selectors import (
    RunsPage,
    agents_startable,
    context_meter,
    pending_files,
    runs_page,
    session_last_run,
    sessions_for_sidebar,
)
from web.summaries import COMPACTED_BY_CODE_NOTICE
from web.tool_labels import tool_labels
from web.transcript import COMPACTED_NOTICE, PLAN_STATUS_LABELS, STEP_STATUS_LABELS

LOGIN_URL = reverse_lazy("web:login")

_ID = 987654321  # a placeholder id, replaced by "{id}" in the URL templates handed to the browser


@method_decorator(with_csp, name="dispatch")
class ChatLoginView(LoginView):
    """Django's login, our template, the failed-login limit every login door shares (SPEC §11).

    The limit lives in the form (:class:`LimitedAuthenticationForm`); the URL wraps the view
    in :func:`limited_login`, which turns a refused form into 429 with ``Retry-After``.
    """

    template_name = "registration/login.html"
    authentication_form = LimitedAuthenticationForm
    redirect_authenticated_user = True
    next_page = "web:home"  # a URL name: LoginView resolves it (resolve_url)

    def get_context_data(self, **kwargs):
        # The first-time hint says where the admin's password came from: `make run` prints a
        # generated one only when DJANGO_SUPERUSER_PASSWORD did not set it.
        context = super().get_context_data(**kwargs)
        context["admin_password_from_env"] = bool(os.environ.get("DJANGO_SUPERUSER_PASSWORD"))
        context["blocked"] = login_locked(context.get("form"))
        return context


chat_login = limited_login(ChatLoginView.as_view())
chat_logout = LogoutView.as_view(next_page=reverse_lazy("web:login"))


class NewSessionForm(forms.Form):
    agent = forms.IntegerField(min_value=1)


def _url_template(name: str) -> str:
    return reverse(name, args=[_ID]).replace(str(_ID), "{id}")


def _shell(request, **extra: Any) -> dict[str, Any]:
    """What every chat page shows around its content: the sessions (those matching the
    sidebar's search, ``?q=``) and the agents to start with."""
    query = request.GET.get("q", "")
    session = extra.get("session")
    return {
        "sidebar_sessions": sessions_for_sidebar(user=request.user, query=query,
                                                 current=session if session is not None and session.pk else None),
        "sidebar_query": " ".join(query.split())[:QUERY_MAX_CHARS],
        "sidebar_waiting": sessions_waiting_for(user=request.user),  # TOOL-8: marked, in these words
        "sidebar_waiting_words": SESSION_WAITING_WORDS,
        "agents": agents_startable(user=request.user),
        **extra,
    }


def try_later_page(request, exc: TryLater):
    """A page refused for now (429 or 503 with Retry-After): it says so, and loads itself
    again once that time has passed."""
    response = render(request, "web/try_later.html", {"message": exc.message, "seconds": exc.retry_after},
                      status=exc.status)
    response["Retry-After"] = str(exc.retry_after)
    return response


def _own_session(request, session_id: int) -> Session:
    try:
        return session_get_for_user(session_id=session_id, user=request.user)
    except NotFound:
        raise Http404("Session not found.") from None


@with_csp
@ensure_csrf_cookie
@login_required(login_url=LOGIN_URL)
@require_GET
def home(request):
    return render(request, "web/home.html", _shell(request))


@with_csp
@ensure_csrf_cookie
@login_required(login_url=LOGIN_URL)
@require_http_methods(["GET", "POST"])
def session_new(request):
    """A new chat with an agent of the caller's spaces, bound to its latest version once
    its first question is sent (``web:session-start``): until then it is only this page,
    and no session row exists. A POST (an older form) only redirects here."""
    form = NewSessionForm(request.GET if request.method == "GET" else request.POST)
    if not form.is_valid():
        return render(request, "web/home.html", _shell(request, new_session_error="Pick an agent first."), status=400)
    try:
        draft = session_draft(user=request.user, agent_id=form.cleaned_data["agent"])
    except ValidationFailed as exc:
        return render(request, "web/home.html", _shell(request, new_session_error=exc.message), status=400)
    if request.method == "POST":
        return HttpResponseRedirect(f"{reverse('web:session-new')}?agent={draft.agent_id}", status=303)
    empty = session_empty_like(draft=draft)
    if empty is not None:  # a new chat already started by a file: that one, with its files
        return HttpResponseRedirect(reverse("web:session", args=[empty.pk]))
    meter = context_meter(session=draft)
    config = _chat_config(draft, meter=meter)
    return render(request, "web/session.html", _shell(
        request, session=draft, runs=[], page=RunsPage(runs=[], earlier_before=None, is_latest_page=True),
        is_demo=provider_is_offline(draft.version.provider), meter=meter, meter_text=meter_label(meter),
        meter_page=meter_page(meter),
        chat_config=config, is_draft=True,
    ))


def _chat_config(session: Session, *, meter: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """What chat.js needs: the session's addresses (a new chat's: where its first question goes)."""
    urls: dict[str, str] = {
        "run": _url_template("run-detail"),
        "events": _url_template("run-events"),
        "cancel": _url_template("run-cancel"),
        "resume": _url_template("run-resume"),
        "continue": _url_template("run-continue"),
        "supplements": _url_template("run-supplements"),
        "fragment": _url_template("web:run-fragment"),
        "text": _url_template("web:run-text"),
        "approvals": _url_template("web:run-approvals"),  # TOOL-9: a decision on a waiting call
        "inputs": _url_template("web:run-inputs"),  # TOOL-10: the answer to a tool server's question
    }
    # Attaching a file (RUN-13): into the session; a new chat's first file starts it.
    # MEM-4: the person's own memory for this agent (the panel; web/memory_words.py).
    urls.update(memory=reverse("agent-memory", args=[session.agent_id]),
                memoryFile=reverse("agent-memory-file", args=[session.agent_id, "PATH"]).replace("PATH", "{path}"))
    urls.update(files=_url_template("session-files"), sessions=reverse("sessions"),
                sessionQuestions=_url_template("session-questions"), sessionPage=_url_template("web:session"))
    if session.pk is None:
        urls["start"] = reverse("web:session-start")
    else:
        urls.update(session=reverse("session-detail", args=[session.pk]),
                    questions=reverse("session-questions", args=[session.pk]),
                    compact=reverse("session-compact", args=[session.pk]),
                    undoCompaction=reverse("session-compaction-undo", args=[session.pk]),
                    # CTX-50: the session's pins (chat.js reads them as the page opens: the
                    # page itself reads no record's content once its runs' HTML is kept).
                    pins=reverse("session-pins", args=[session.pk]),
                    pin=reverse("session-pin", args=[session.pk, _ID]).replace(str(_ID), "{id}"),
                    # Another tab or device of the person may start a run here (docs/web.md).
                    state=reverse("web:session-state", args=[session.pk]))
    return {
        "sessionId": session.pk,
        "agentId": session.agent_id,
        "agentName": session.version.name,
        "csrfCookie": settings.CSRF_COOKIE_NAME,
        "urls": urls,
        "errors": error_table(),
        "events": event_names(),  # the script names no event itself (sessions/event_types.py)
        "compactedNotice": COMPACTED_NOTICE,
        "foldedNotice": FOLDED_NOTICE,
        "compactedByCodeNotice": COMPACTED_BY_CODE_NOTICE,  # CTX-48
        "stepStatus": {**{status or "none": label for status, label in STEP_STATUS_LABELS.items()},
                       "awaiting": AWAITING_STEP_WORDS},
        "approvalWords": approval_words(),  # TOOL-8: what a waiting call's card says
        "planStatus": PLAN_STATUS_LABELS,
        # How a step names its tool (web.tool_labels): the live run's steps as the server's.
        "toolLabels": tool_labels(frozen_server_tools(session.version)),
        "memoryWords": memory_words(),  # MEM-4: the Memory panel's and the memory steps' words
        "meter": meter,
        "supplements": {},
        "prepared": None,
        **extra,
    }


@with_csp
@ensure_csrf_cookie
@login_required(login_url=LOGIN_URL)
@require_GET
def session_page(request, session_id: int):
    try:
        with slow_work("render", person=request.user.pk):
            return _session_page(request, session_id)
    except TryLater as exc:
        return try_later_page(request, exc)


def _session_page(request, session_id: int):
    session = _own_session(request, session_id)
    before = request.GET.get("before", "")
    page = runs_page(session=session, before=id_from_text(before))
    latest = session_last_run(session=session)
    views = runs_rendered(runs=page.runs, latest_run_id=latest.pk if latest else None,
                          agent_name=session.version.name, request=request)
    meter = context_meter(session=session)
    config = _chat_config(
        session, meter=meter,
        # The working run's supplements by id, placed where its events say they arrived.
        supplements=next((view.supplements for view in views if view.live), {}),
        prepared=prepared_summary_state(session=session),  # CTX-45: the meter's note on load
        # Files attached and not sent yet: chips again after a reload, each with its remove.
        pendingFiles=pending_files(session=session),
    )
    notes = memory_notes_by_run(memory_changes_in_session(session_id=session.pk), [view.run for view in views])
    return render(request, "web/session.html", _shell(
        request,
        session=session,
        runs=views,
        # MEM-4: what the person changed in memory from the panel, after the run it followed.
        runs_noted=[(view, notes.get(view.run.pk, [])) for view in views],
        page=page,
        is_demo=provider_is_offline(session.version.provider),
        meter=meter,
        meter_text=meter_label(meter),
        meter_page=meter_page(meter),
        chat_config=config,
    ))
