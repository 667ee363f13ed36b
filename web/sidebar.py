"""The sidebar's session list as the chat's script fetches it while a person types in its
search box: the same list the page renders for ``?q=`` (``templates/web/_session_list.html``),
so the live filter and the form without script show the same sessions."""
from __future__ import annotations

from django.http import JsonResponse
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET

from core.api.fields import id_from_text
from sessions.selectors.approvals import sessions_waiting_for
from web.approval_cards import SESSION_WAITING_WORDS
from web.fragments import json_login_required
from web.selectors import sessions_for_sidebar


@require_GET
@json_login_required
def session_list(request):
    """``{html, count}``: the caller's sessions matching ``?q=`` (all of them without one)."""
    current = id_from_text(request.GET.get("current", ""))
    sessions = sessions_for_sidebar(user=request.user, query=request.GET.get("q", ""))
    html = render_to_string("web/_session_list.html", {
        "sidebar_sessions": sessions, "sidebar_query": request.GET.get("q", "").strip(),
        "current_session_id": current, "sidebar_waiting": sessions_waiting_for(user=request.user),
        "sidebar_waiting_words": SESSION_WAITING_WORDS},
        request=request)
    response = JsonResponse({"html": html, "count": len(sessions)})
    response["Cache-Control"] = "no-store"
    return response
