from __future__ import annotations

from django.urls import path

from web import approvals, fragments, inputs, session_state, sidebar, start, views

app_name = "web"

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", views.chat_login, name="login"),
    path("logout/", views.chat_logout, name="logout"),
    path("sessions/new", views.session_new, name="session-new"),
    path("sessions/new/questions", start.session_start_view, name="session-start"),
    path("sessions/<int:session_id>/", views.session_page, name="session"),
    path("chat/sessions", sidebar.session_list, name="session-list"),
    path("chat/runs/<int:run_id>/fragment", fragments.run_fragment, name="run-fragment"),
    path("chat/runs/<int:run_id>/text", fragments.run_text, name="run-text"),
    path("chat/runs/<int:run_id>/approvals", approvals.run_approval_decide, name="run-approvals"),
    path("chat/runs/<int:run_id>/inputs", inputs.run_inputs_view, name="run-inputs"),
    path("chat/sessions/<int:session_id>/state", session_state.session_state, name="session-state"),
]
