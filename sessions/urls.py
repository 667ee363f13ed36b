from __future__ import annotations

from django.urls import path

from sessions import api, api_inputs, api_runs

urlpatterns = [
    path("sessions", api.sessions_collection, name="sessions"),
    path("sessions/import", api.sessions_import, name="sessions-import"),
    path("sessions/<int:session_id>", api.session_detail, name="session-detail"),
    path("sessions/<int:session_id>/messages", api.session_messages, name="session-messages"),
    path("sessions/<int:session_id>/compact", api.session_compact, name="session-compact"),
    path("sessions/<int:session_id>/compactions/undo", api.session_compaction_undo, name="session-compaction-undo"),
    path("sessions/<int:session_id>/pins", api.session_pins, name="session-pins"),
    path("sessions/<int:session_id>/pins/<int:seq>", api.session_pin_detail, name="session-pin"),
    path("sessions/<int:session_id>/files", api.session_files_upload, name="session-files"),
    path("files/<int:file_id>", api.file_download, name="file-download"),
    path("sessions/<int:session_id>/questions", api_runs.session_questions, name="session-questions"),
    path("runs/<int:run_id>", api_runs.run_detail, name="run-detail"),
    path("runs/<int:run_id>/cancel", api_runs.run_cancel_view, name="run-cancel"),
    path("runs/<int:run_id>/resume", api_runs.run_resume_view, name="run-resume"),
    path("runs/<int:run_id>/supplements", api_runs.run_supplements, name="run-supplements"),
    path("runs/<int:run_id>/approvals", api_runs.run_approvals, name="run-approvals"),
    path("runs/<int:run_id>/events", api_runs.run_events, name="run-events"),
    path("runs/<int:run_id>/context", api_runs.run_context, name="run-context"),
    path("runs/<int:run_id>/continue", api_runs.run_continue, name="run-continue"),
    path("runs/<int:run_id>/inputs", api_inputs.run_inputs, name="run-inputs"),
]
