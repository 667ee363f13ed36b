"""Every run endpoint (SPEC §9): asking (its answer streamed in the response when the client
reads Server-Sent Events), events (SSE or a JSON page), the context inspector, and
continuing an answer its output limit cut, a run's state, Stop, Resume and supplements."""
from __future__ import annotations

from django.conf import settings
from django.http import StreamingHttpResponse
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework import status as http_status
from rest_framework.decorators import api_view, renderer_classes, throttle_classes
from rest_framework.exceptions import Throttled
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response

from context.usage import usage_figures
from core.api.fields import MAX_ID, id_from_text
from core.db_pool import connection_give_back
from core.errors import NotFound, ValidationFailed
from sessions.api import AskThrottle, SupplementThrottle
from sessions.event_stream import EventStream, StreamSlot, event_as_dict, events_after
from sessions.models import Run
from sessions.selectors.inspector import CallPairing, model_call_pairings
from sessions.selectors.model_calls import model_call_repairs
from sessions.selectors.runs import run_get_for_user, run_visible_to
from sessions.selectors.sessions import session_get_for_user
from sessions.serializers import ContentIn, QuestionIn, RunOut
from sessions.services.access_audit import read_audited
from sessions.services.approvals import MAX_REASON, approval_decide
from sessions.services.events import event_emit
from sessions.services.questions import answer_continue, question_ask
from sessions.services.run_controls import run_cancel, run_resume
from sessions.services.supplements import supplement_add
from sessions.staff import run_get_for_inspector


class EventStreamRenderer(BaseRenderer):
    """Lets content negotiation accept ``Accept: text/event-stream`` (EventSource, or a
    question whose answer the client reads in the response).

    The stream itself is a StreamingHttpResponse and never passes through here; what does
    is an error (401, 404, 429…), which leaves as JSON in the one error shape.
    """

    media_type = "text/event-stream"
    format = "sse"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        response = (renderer_context or {}).get("response")
        if response is not None:
            response["Content-Type"] = "application/json"
        return JSONRenderer().render(data)


class EventsQueryIn(serializers.Serializer):
    after = serializers.IntegerField(min_value=0, default=0, max_value=MAX_ID)
    limit = serializers.IntegerField(min_value=1, max_value=500, default=200)


def _last_event_id(request) -> int | None:
    raw = request.headers.get("Last-Event-ID")
    if raw is None:
        return None
    seq = id_from_text(raw.strip())
    if seq is None:
        raise ValidationFailed("Last-Event-ID must be a non-negative integer.", fields={"Last-Event-ID": "invalid"})
    return seq


def _stream_slot(request) -> StreamSlot:
    """One of the person's places for an open stream, or 429 (before anything is done)."""
    slot = StreamSlot(request.user.pk)
    if not slot.take():
        raise Throttled(wait=5, detail=f"At most {settings.AGENTLOOM_MAX_STREAMS_PER_USER} event streams may be "
                                       "open at once; close one (another tab?) and try again.")
    return slot


def _event_stream(*, run_id: int, user_id: int, after: int, slot: StreamSlot,
                  status: int = http_status.HTTP_200_OK) -> StreamingHttpResponse:
    stream = EventStream(run_id=run_id, user_id=user_id, after=after, slot=slot)
    connection_give_back()  # the stream borrows one per poll; it keeps none while it is open
    response = StreamingHttpResponse(stream, content_type="text/event-stream", status=status)
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


@extend_schema(request=QuestionIn, responses={202: RunOut})
@api_view(["POST"])
@renderer_classes([JSONRenderer, EventStreamRenderer])
@throttle_classes([AskThrottle])
def session_questions(request, session_id: int):
    """Ask a question: 202 with the queued run; 409 while another run is active (RUN-1).
    ``files``: ids of this session's uploads not yet sent with a question (RUN-13).

    With `Accept: text/event-stream` the 202 is the run's events instead, as
    `GET /runs/{id}/events` sends them from the start (`Location` names the run): the
    question and its answer in one request. A person already at their limit of open
    streams gets 429 and nothing is asked; a stream that drops is resumed with
    `GET /runs/{id}/events` and `Last-Event-ID`."""
    session = session_get_for_user(session_id=session_id, user=request.user)
    data = QuestionIn(data=request.data)
    data.is_valid(raise_exception=True)
    slot = _stream_slot(request) if request.accepted_renderer.format == EventStreamRenderer.format else None
    try:
        run = question_ask(session=session, content=data.validated_data["content"],
                           files=data.validated_data.get("files"))
    except BaseException:
        if slot is not None:
            slot.release()
        raise
    if slot is None:
        return Response(RunOut(run).data, status=http_status.HTTP_202_ACCEPTED)
    response = _event_stream(run_id=run.pk, user_id=request.user.pk, after=0, slot=slot,
                             status=http_status.HTTP_202_ACCEPTED)
    response["Location"] = reverse("run-detail", args=[run.pk])
    return response


@extend_schema(
    parameters=[OpenApiParameter("format", str, enum=["json"], description="`json` for a plain page; omit for SSE."),
                OpenApiParameter("after", int), OpenApiParameter("limit", int)],
    responses=inline_serializer("RunEventsPage", {
        "items": inline_serializer("RunEventItem", {"seq": serializers.IntegerField(), "type": serializers.CharField(
            help_text="The event's name, as on the SSE stream: run_started, message_delta, …, run_error (a run "
                      "error or a retry, with retrying_in), run_finished; never error, open or message, which "
                      "EventSource keeps for itself."),
                                                    "data": serializers.JSONField()}, many=True),
        "next_after": serializers.IntegerField()}),
)
@api_view(["GET"])
@renderer_classes([JSONRenderer, EventStreamRenderer])
def run_events(request, run_id: int):
    """The run's events: Server-Sent Events (`id:` = seq, Last-Event-ID resumes) or `?format=json&after=N`."""
    query = EventsQueryIn(data=request.query_params)
    query.is_valid(raise_exception=True)
    after = query.validated_data["after"]
    # The status through the reader's access (one indexed query; 404 for anyone else).
    status = run_visible_to(run_id=run_id, user_id=request.user.pk)
    if status is None:
        raise NotFound("Run not found.")
    if request.query_params.get("format") == "json":
        items = events_after(run_id=run_id, after=after, limit=query.validated_data["limit"])
        return Response({"items": [event_as_dict(e) for e in items],
                         "next_after": items[-1].seq if items else after})
    resume_from = _last_event_id(request)
    return _event_stream(run_id=run_id, user_id=request.user.pk, slot=_stream_slot(request),
                         after=resume_from if resume_from is not None else after)


@extend_schema(responses=inline_serializer("RunContext", {"calls": serializers.JSONField()}))
@api_view(["GET"])
def run_context(request, run_id: int):
    """The context inspector: exactly what each model call of the run received, with the
    estimate per message, the provider's usage (and its four figures: uncached input,
    cache read, cache written, output), the repairs the projector made, and the diff to
    the previous call of the same instance and purpose (for the first call of a run's main
    instance: the last one of the session's previous run); its ``first_changed`` is where
    a prompt cache stops matching. Operators only (SPEC §9): the admins of the session's
    space, and staff holding the console's permissions for it; never the person chatting,
    who may not see the agent's instructions (404, as for anything out of reach). A read
    of someone else's session is written to the access audit first (RUN-11)."""
    run, audited = run_get_for_inspector(run_id=run_id, user=request.user)
    with read_audited(user=request.user, audited=audited, what="context_inspector", session=run.session, run=run):
        return Response({"run": run.pk, "calls": _calls(run)})


def _calls(run: Run) -> list[dict]:
    return [_call(pairing) for pairing in model_call_pairings(run=run)]


def _call(pairing: CallPairing) -> dict:
    call = pairing.call
    return {
        "id": call.id, "instance": call.instance_id, "purpose": call.purpose, "provider": call.provider,
        "model": call.model, "estimator_id": call.estimator_id, "estimated_tokens": call.estimated_tokens,
        "usage": call.usage, "usage_figures": usage_figures(call.usage).as_dict(), "outcome": call.outcome,
        "created_at": call.created_at,
        # Summary and verification calls store no per-message estimates: show the messages anyway.
        "messages": [{"message": entry.message, "estimated_tokens": entry.estimated_tokens}
                     for entry in pairing.entries],
        "tools": pairing.tools, "repairs": model_call_repairs(call=call), "diff": _diff(pairing),
    }


def _diff(pairing: CallPairing) -> dict | None:
    if pairing.diff is None or pairing.previous is None:
        return None
    return {"previous": pairing.previous.pk, "tools_changed": pairing.tools_changed, **pairing.diff.as_dict(),
            "first_changed": pairing.first_changed}


@extend_schema(request=None, responses={202: RunOut})
@api_view(["POST"])
@throttle_classes([AskThrottle])
def run_continue(request, run_id: int):
    """Continue an answer cut at its output limit (finish reason `length` / stop reason
    `max_tokens`): 202 with a new queued run of the session, whose model reads the cut
    answer as its last assistant message and is asked to go on. 409 `not_continuable`
    unless the run is the session's latest, completed with a cut answer; 409 while
    another run is active, as for a question."""
    run = answer_continue(run=run_get_for_user(run_id=run_id, user=request.user))
    return Response(RunOut(run).data, status=http_status.HTTP_202_ACCEPTED)


@extend_schema(responses=RunOut)
@api_view(["GET"])
def run_detail(request, run_id: int):
    run = run_get_for_user(run_id=run_id, user=request.user)
    return Response(RunOut(run).data)


@extend_schema(request=None, responses={202: RunOut})
@api_view(["POST"])
def run_cancel_view(request, run_id: int):
    """Stop a run (LOOP-7)."""
    run = run_cancel(run=run_get_for_user(run_id=run_id, user=request.user))
    return Response(RunOut(run).data, status=http_status.HTTP_202_ACCEPTED)


@extend_schema(request=None, responses={202: RunOut})
@api_view(["POST"])
def run_resume_view(request, run_id: int):
    """Resume a stopped or interrupted run (RUN-4); 409 while another run is active."""
    run = run_resume(run=run_get_for_user(run_id=run_id, user=request.user))
    return Response(RunOut(run).data, status=http_status.HTTP_202_ACCEPTED)


@extend_schema(request=ContentIn, responses={202: inline_serializer("SupplementOut", {
    "id": serializers.CharField(), "run": serializers.IntegerField(), "status": serializers.CharField()})})
@api_view(["POST"])
@throttle_classes([SupplementThrottle])
def run_supplements(request, run_id: int):
    """Send a supplement to a working run (RUN-5)."""
    run = run_get_for_user(run_id=run_id, user=request.user)
    data = ContentIn(data=request.data)
    data.is_valid(raise_exception=True)
    item = supplement_add(run=run, content=data.validated_data["content"])
    event_emit(run_id=run.pk, type="supplement_received", data={"id": item["id"]})
    return Response({"id": item["id"], "run": run.pk, "status": "queued"}, status=http_status.HTTP_202_ACCEPTED)


class ApprovalIn(serializers.Serializer):
    call_id = serializers.CharField(max_length=200)
    decision = serializers.ChoiceField(choices=["approve", "deny"])
    reason = serializers.CharField(max_length=MAX_REASON, required=False, allow_blank=True, default="")
    scope = serializers.ChoiceField(choices=["call", "session"], required=False, default="call")


class ApprovalOut(serializers.Serializer):
    id = serializers.IntegerField()
    call_id = serializers.CharField()
    tool = serializers.CharField()
    label = serializers.CharField()
    status = serializers.CharField()
    scope = serializers.CharField()
    reason = serializers.CharField()
    decided_at = serializers.DateTimeField(allow_null=True)


@extend_schema(request=ApprovalIn, responses={200: inline_serializer("ApprovalDecided", {
    "approval": ApprovalOut(), "run": RunOut()})})
@api_view(["POST"])
@throttle_classes([SupplementThrottle])
def run_approvals(request, run_id: int):
    """Approve or deny a call the run waits on (TOOL-9), as the session's creator (404 for
    anyone else). The same decision twice is answered as the first; another is 409
    ``already_decided``. Once every waiting call is decided the run goes back to the queue."""
    run = run_get_for_user(run_id=run_id, user=request.user)
    data = ApprovalIn(data=request.data)
    data.is_valid(raise_exception=True)
    approval = approval_decide(run=run, user=request.user, **data.validated_data)
    run.refresh_from_db()
    return Response({"approval": ApprovalOut(approval).data, "run": RunOut(run).data})
