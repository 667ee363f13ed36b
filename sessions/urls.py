from __future__ import annotations

from django.urls import path

from sessions import api

urlpatterns = [
    path("sessions", api.sessions_collection, name="sessions"),
    path("sessions/import", api.sessions_import, name="sessions-import"),
    path("sessions/<int:session_id>", api.session_detail, name="session-detail"),
    path("sessions/<int:session_id>/messages", api.session_messages, name="session-messages"),
    path("sessions/<int:session_id>/compact", api.session_compact, name="session-compact"),
    path("sessions/<int:session_id>/files", api.session_files_upload, name="session-files"),
    path("files/<int:file_id>", api.file_download, name="file-download"),
    path("runs/<int:run_id>", api.run_detail, name="run-detail"),
    path("runs/<int:run_id>/cancel", api.run_cancel_view, name="run-cancel"),
    path("runs/<int:run_id>/resume", api.run_resume_view, name="run-resume"),
    path("runs/<int:run_id>/supplements", api.run_supplements, name="run-supplements"),
]
