"""Routes of the run loop's own endpoints: the event stream, the context inspector, Continue."""
from __future__ import annotations

from django.urls import path

from agentloom.runloop import api

urlpatterns = [
    path("sessions/<int:session_id>/questions", api.session_questions, name="session-questions"),
    path("runs/<int:run_id>/events", api.run_events, name="run-events"),
    path("runs/<int:run_id>/context", api.run_context, name="run-context"),
    path("runs/<int:run_id>/continue", api.run_continue, name="run-continue"),
]
