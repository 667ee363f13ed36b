"""Session and run endpoints (SPEC §9): validate input, call one service, serialize output."""
from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view, throttle_classes
from rest_framework.response import Response

from core.api.clients import ClientThrottle
from core.api.fields import BoundedJSONField
from core.api.uploads import upload_bound
from core.errors import ValidationFailed
from sessions.models import SessionFile
from sessions.selectors.files import file_get_for_user
from sessions.selectors.instances import instance_in_session
from sessions.selectors.pins import pins_of_session
from sessions.selectors.records import records_page
from sessions.selectors.search import search_terms, sessions_search
from sessions.selectors.sessions import session_get_for_user, session_list_for_user
from sessions.serializers import (
    FileOut,
    FileUploadIn,
    RecordOut,
    RecordsQueryIn,
    SessionCreateIn,
    SessionDetailOut,
    SessionOut,
)
from sessions.services.access_audit import read_audited
from sessions.services.compaction_undo import compaction_undo
from sessions.services.dispatch import compaction_dispatch_on_commit
from sessions.services.files import attachment_disposition, file_delete, file_name_of, file_store, file_too_large
from sessions.services.imports import session_import
from sessions.services.manual_compaction import compaction_request
from sessions.services.pins import pin_set
from sessions.services.sessions import session_create, session_delete, session_rename
from sessions.staff import file_get_for_reader


class AskThrottle(ClientThrottle):
    """Rate limit on asking, per user (SPEC §11)."""

    scope = "ask"

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk or self.get_ident(request)}


class SupplementThrottle(AskThrottle):
    """Rate limit on supplements, per user: each one is queued in the run's encrypted frame."""

    scope = "supplement"


@extend_schema(request=SessionCreateIn, parameters=[OpenApiParameter("q", str, description=(
    "Search: only sessions whose title or one of whose questions holds this text (case-insensitive; the "
    "200 most recent sessions with something asked, their last 2,000 questions)."))],
    responses={200: SessionOut(many=True), 201: SessionOut, 429: OpenApiResponse(
        description="`sessions_per_day`: the person started `AGENTLOOM_SESSIONS_PER_DAY` in 24 hours; Retry-After")})
@api_view(["GET", "POST"])
def sessions_collection(request):
    """The caller's sessions (`?q=` searches them); POST `{agent}` starts one bound to the
    agent's latest published version."""
    if request.method == "GET":
        if search_terms(request.query_params.get("q")):
            sessions = sessions_search(user=request.user, query=request.query_params.get("q"))
        else:
            sessions = session_list_for_user(user=request.user)[:200]
        return Response(SessionOut(sessions, many=True).data)
    data = SessionCreateIn(data=request.data)
    data.is_valid(raise_exception=True)
    session = session_create(user=request.user, agent_id=data.validated_data["agent"])
    return Response(SessionOut(session).data, status=status.HTTP_201_CREATED)


class SessionRenameIn(serializers.Serializer):
    title = serializers.CharField(allow_blank=True, trim_whitespace=False, help_text=(
        "The session's new name: one line, 1–200 characters once trimmed."))


@extend_schema(methods=["GET"], responses=SessionDetailOut)
@extend_schema(methods=["PATCH"], request=SessionRenameIn, responses={
    200: SessionDetailOut,
    400: OpenApiResponse(description="`invalid`: an empty or too long `title`; nothing changes")})
@extend_schema(methods=["DELETE"], request=None, responses={
    204: OpenApiResponse(description="Erased: its records, runs, files and call log (the access audit keeps its "
                                     "rows)."),
    409: OpenApiResponse(description="`run_active` (an answer is queued or running: stop it first) or "
                                     "`compaction_running`; nothing is deleted")})
@api_view(["GET", "PATCH", "DELETE"])
def session_detail(request, session_id: int):
    """GET the session; PATCH `{title}` renames it; DELETE erases it. Only its creator
    (others: 404)."""
    session = session_get_for_user(session_id=session_id, user=request.user)
    if request.method == "PATCH":
        data = SessionRenameIn(data=request.data)
        data.is_valid(raise_exception=True)
        session = session_rename(session=session, title=data.validated_data["title"])
    elif request.method == "DELETE":
        session_delete(session=session)
        return Response(status=status.HTTP_204_NO_CONTENT)
    return Response(SessionDetailOut(session).data)


@extend_schema(
    parameters=[
        OpenApiParameter("after", int, description="Session seq to read after (default 0)."),
        OpenApiParameter("limit", int, description="1–200, default 100."),
        OpenApiParameter("instance", str, description="`main`, a sub-instance id, or omitted for all."),
    ],
    responses=inline_serializer("RecordsPage",
                                {"items": RecordOut(many=True), "next_after": serializers.IntegerField()}),
)
@api_view(["GET"])
def session_messages(request, session_id: int):
    """The session's records, page by page (RUN-11): keyset on seq, decrypted payloads."""
    session = session_get_for_user(session_id=session_id, user=request.user)
    query = RecordsQueryIn(data=request.query_params)
    query.is_valid(raise_exception=True)
    instance = query.validated_data.get("instance")
    if instance is not None and not instance_in_session(session=session, instance=instance):
        raise ValidationFailed("Unknown instance.",
                               fields={"instance": "use main or a sub-instance id of this session"})
    page = records_page(session=session, after=query.validated_data["after"],
                        limit=query.validated_data["limit"], instance=instance)
    return Response({"items": RecordOut(page.items, many=True).data, "next_after": page.next_after})


class ImportIn(serializers.Serializer):
    agent = serializers.IntegerField(min_value=1)
    transcript = BoundedJSONField()
    title = serializers.CharField(max_length=200, required=False, allow_blank=True)


class ImportThrottle(AskThrottle):
    """Rate limit on imports, per user: each one parses and writes up to 20,000 records."""

    scope = "import"


@extend_schema(request=ImportIn, responses={
    201: SessionOut,
    429: OpenApiResponse(description="`rate_limited` (`AGENTLOOM_IMPORT_RATE`), `sessions_per_day`, or "
                                     "`too_many_at_once` (the person's import already running); Retry-After"),
    503: OpenApiResponse(description="`busy`: the process runs as many imports as it takes; Retry-After")})
@api_view(["POST"])
@throttle_classes([ImportThrottle])
def sessions_import(request):
    """Import an OpenAI-messages transcript (list, JSONL text, or tau-bench `traj`) as a session (RUN-12)."""
    data = ImportIn(data=request.data)
    data.is_valid(raise_exception=True)
    session = session_import(user=request.user, agent_id=data.validated_data["agent"],
                             transcript=data.validated_data["transcript"], title=data.validated_data.get("title", ""))
    return Response(SessionOut(session).data, status=status.HTTP_201_CREATED)


@extend_schema(request=None, responses={202: inline_serializer("CompactionScheduled", {
    "status": serializers.CharField(), "run": serializers.IntegerField()})})
@api_view(["POST"])
def session_compact(request, session_id: int):
    """Manual compaction (CTX-43), under the same commit rules as any other."""
    session = session_get_for_user(session_id=session_id, user=request.user)
    # One thing at a time: while an answer runs, the chat is told to wait (409), in words.
    status_text, run = compaction_request(session=session, while_answering="refuse")
    if status_text == "queued":
        compaction_dispatch_on_commit(run.pk)
    return Response({"status": status_text, "run": run.pk}, status=status.HTTP_202_ACCEPTED)


class CompactionUndoIn(serializers.Serializer):
    compaction = serializers.IntegerField(min_value=1, required=False, help_text=(
        "The compaction the chat showed as the latest (its id): refused with 409 `not_newest` when another is."))


@extend_schema(request=CompactionUndoIn, responses={
    200: inline_serializer("CompactionUndone", {
        "undone": serializers.IntegerField(), "revision": serializers.IntegerField(),
        "run": serializers.IntegerField(), "view_removed": serializers.BooleanField()}),
    409: OpenApiResponse(description="`answer_running`, `compaction_running`, `nothing_to_undo`, "
                                     "`already_undone` (an undo is not undone: Compact now summarizes again) "
                                     "or `not_newest`; nothing is written")})
@api_view(["POST"])
def session_compaction_undo(request, session_id: int):
    """Undo the newest compaction of the session's main line (CTX-51): the next question reads
    the history exactly as it was before that summary, and the summary is not made again at
    once. Only the session's creator (others: 404)."""
    session = session_get_for_user(session_id=session_id, user=request.user)
    data = CompactionUndoIn(data=request.data)
    data.is_valid(raise_exception=True)
    result = compaction_undo(session=session, by=request.user, expected=data.validated_data.get("compaction"))
    return Response({"undone": result.undone.pk, "revision": result.snapshot.revision,
                     "run": result.undone.instance.run_id, "view_removed": result.view_removed})


class UploadThrottle(AskThrottle):
    """Rate limit on attaching files, per user: each one is sniffed, read and stored."""

    scope = "upload"


@upload_bound("AGENTLOOM_FILE_MAX_BYTES", file_too_large)
@extend_schema(request={"multipart/form-data": FileUploadIn}, responses={
    201: FileOut,
    413: OpenApiResponse(description="`file_too_large`, `image_too_large` (in pixels, from its header), "
                                     "`session_files_full`, or `user_files_full`"),
    415: OpenApiResponse(description="`unsupported_file_type`: judged by the content, never the name"),
    429: OpenApiResponse(description="`too_many_at_once`: the person's files being read at once; Retry-After"),
    503: OpenApiResponse(description="`busy`: the process reads as many files as it takes; Retry-After")})
@api_view(["POST"])
@throttle_classes([UploadThrottle])
def session_files_upload(request, session_id: int):
    """Attach a file to the session (RUN-13): multipart field `file`; text, PDF, PNG, JPEG,
    WebP or GIF, sniffed by content. Send its id with the next question's `files`."""
    session = session_get_for_user(session_id=session_id, user=request.user)
    data = FileUploadIn(data=request.data)
    data.is_valid(raise_exception=True)
    upload = data.validated_data["file"]
    stored = file_store(session=session, user=request.user, name=upload.name, data=upload.read())
    return Response(FileOut(stored).data, status=status.HTTP_201_CREATED)


# How a download names its type: an image or text as what it was sniffed to be, anything
# else as bytes. Always an attachment, never sniffed by the browser, never a page.
_HTTP_CHARSETS = {"utf-8": "utf-8", "utf-16-le": "utf-16", "utf-16-be": "utf-16", "cp1252": "windows-1252"}


def _download(file: SessionFile) -> HttpResponse:
    if file.kind == SessionFile.Kind.IMAGE:
        content_type = file.content_type
    elif file.kind == SessionFile.Kind.TEXT:
        content_type = f"text/plain; charset={_HTTP_CHARSETS.get(file.encoding, 'utf-8')}"
    else:
        content_type = "application/octet-stream"
    response = HttpResponse(bytes(file.data), content_type=content_type)
    response["Content-Disposition"] = attachment_disposition(file_name_of(file))
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Cache-Control"] = "private, no-store"
    return response


@extend_schema(methods=["GET"], responses={
    (200, "application/octet-stream"): OpenApiTypes.BINARY, (200, "text/plain"): OpenApiTypes.BINARY,
    (200, "image/png"): OpenApiTypes.BINARY, (200, "image/jpeg"): OpenApiTypes.BINARY,
    (200, "image/webp"): OpenApiTypes.BINARY, (200, "image/gif"): OpenApiTypes.BINARY})
@extend_schema(methods=["DELETE"], request=None, responses={
    204: OpenApiResponse(description="Removed; its room in the session is free again."),
    404: OpenApiResponse(description="No such file for the caller (as for the download)."),
    409: OpenApiResponse(description="`file_in_question`: a question has used it; it stays with that record.")})
@api_view(["GET", "DELETE"])
def file_download(request, file_id: int):
    """GET: an attached file's bytes (RUN-13), for whoever may read its session, or staff
    holding the console's permissions for it — every such read written to the access audit
    first; anyone else gets 404. DELETE: remove a file no question has used yet, for whoever
    may read its session (staff who may only audit-read it get 404); 409 once one has."""
    if request.method == "DELETE":
        file_delete(file=file_get_for_user(file_id=file_id, user=request.user))
        return Response(status=status.HTTP_204_NO_CONTENT)
    file, audited = file_get_for_reader(file_id=file_id, user=request.user)
    with read_audited(user=request.user, audited=audited, what="file", session=file.session,
                      detail={"file": file.pk}):
        return _download(file)


class PinIn(serializers.Serializer):
    seq = serializers.IntegerField(min_value=1, help_text="The record seq of a main-line message.")


_PINS_OUT = inline_serializer("Pins", {"items": inline_serializer("Pin", {
    "seq": serializers.IntegerField(), "by": serializers.CharField(allow_null=True),
    "at": serializers.DateTimeField(allow_null=True), "default": serializers.BooleanField()}, many=True)})


@extend_schema(methods=["GET"], responses={200: _PINS_OUT})
@extend_schema(methods=["POST"], request=PinIn, responses={200: _PINS_OUT, 400: OpenApiResponse(
    description="`invalid`: not a question, answer or tool result of this session's main line")})
@api_view(["GET", "POST"])
def session_pins(request, session_id: int):
    """CTX-50: the session's pinned messages (its first question by default); POST `{seq}`
    pins one (idempotent). Pinned messages stay verbatim through every compaction."""
    session = session_get_for_user(session_id=session_id, user=request.user)
    if request.method == "GET":
        pins = pins_of_session(session_id=session.pk)
    else:
        data = PinIn(data=request.data)
        data.is_valid(raise_exception=True)
        pins = pin_set(session=session, seq=data.validated_data["seq"], pinned=True, by=request.user.pk)
    return Response({"items": [pin.as_dict() for pin in pins]})


@extend_schema(request=None, responses={200: _PINS_OUT})
@api_view(["DELETE"])
def session_pin_detail(request, session_id: int, seq: int):
    """CTX-50: unpin a message (idempotent); the first question too, which is pinned by default."""
    session = session_get_for_user(session_id=session_id, user=request.user)
    pins = pin_set(session=session, seq=seq, pinned=False, by=request.user.pk)
    return Response({"items": [pin.as_dict() for pin in pins]})
