"""The console's download of a question's attached file (RUN-13, SPEC §10).

Like the records page: the staff user needs to view the session and its files, the
access audit is written before the file is decrypted, and the bytes go out as a download
only — ``application/octet-stream``, ``Content-Disposition: attachment``, ``nosniff`` —
so no type the file claims is ever rendered in the console.
"""
from __future__ import annotations

from django.contrib.admin import ModelAdmin
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse

from core.api.fields import id_from_text
from sessions.admin.audit import access_audit_write
from sessions.admin.pages import object_or_404
from sessions.models import Session, SessionFile
from sessions.services.files import attachment_disposition, file_name_of


def file_download_view(model_admin: ModelAdmin, request: HttpRequest, object_id: str, file_id: str) -> HttpResponse:
    """One file of the session, audited (``what="file"``); 404 for a file of another session."""
    session: Session = object_or_404(model_admin, request, object_id, SessionFile)
    pk = id_from_text(file_id)
    if pk is None or not SessionFile.objects.filter(session=session, pk=pk).exists():
        raise Http404(f"No file {file_id!r} in this session.")
    with transaction.atomic():
        access_audit_write(user=request.user, what="file", session=session, detail={"file": pk})
        stored = SessionFile.objects.only("name", "data", "kind", "content_type").get(pk=pk)  # after the audit row
    response = HttpResponse(bytes(stored.data), content_type="application/octet-stream")
    # Cleaned again as the API's download is: a row stored before names were cleaned keeps
    # no direction override and gets an extension that matches what the bytes are.
    response["Content-Disposition"] = attachment_disposition(file_name_of(stored) or f"file-{pk}")
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-store"
    return response
