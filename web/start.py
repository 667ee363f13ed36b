"""A new chat's first question (``POST /sessions/new/questions``): the session is created
with it, never before, so opening "New chat" and leaving leaves nothing behind."""
from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, throttle_classes
from rest_framework.response import Response

from sessions.api import AskThrottle
from sessions.serializers import ContentIn
from sessions.services.sessions import session_start


class StartIn(ContentIn):
    agent = serializers.IntegerField(min_value=1)


class StartOut(serializers.Serializer):
    session = serializers.IntegerField()
    run = serializers.IntegerField()
    url = serializers.CharField()


# Described like the API's operations, so the deploy checks know its shapes and the fuzz
# test (which walks the schema) reaches it too.
@extend_schema(request=StartIn, responses={202: StartOut}, operation_id="chat_session_start")
@api_view(["POST"])
@throttle_classes([AskThrottle])
def session_start_view(request):
    """202 with the new session, its first run and the session page's address; 400 in the
    one error shape for an agent outside the caller's spaces or an empty question."""
    data = StartIn(data=request.data)
    data.is_valid(raise_exception=True)
    run = session_start(user=request.user, agent_id=data.validated_data["agent"],
                        content=data.validated_data["content"])
    return Response({"session": run.session_id, "run": run.pk,
                     "url": reverse("web:session", args=[run.session_id])}, status=status.HTTP_202_ACCEPTED)
