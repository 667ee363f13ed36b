"""A tool server's question to the person, answered through the API (SPEC §7b, TOOL-10)."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.response import Response

from core.api.fields import MAX_ID, BoundedJSONField
from sessions.models import ToolInput
from sessions.selectors.runs import run_get_for_user
from sessions.services.inputs import tool_input_answer


class InputAnswerIn(serializers.Serializer):
    input_id = serializers.IntegerField(min_value=1, max_value=MAX_ID)
    action = serializers.ChoiceField(choices=list(ToolInput.ACTIONS))
    content = BoundedJSONField(required=False, allow_null=True)


def input_out(row: ToolInput) -> dict:
    return {"input_id": row.pk, "run": row.run_id, "call_id": row.call_id, "server": row.server, "mode": row.mode,
            "status": row.status, "answered_at": row.answered_at}


INPUT_OUT = inline_serializer("ToolInputOut", {
    "input_id": serializers.IntegerField(), "run": serializers.IntegerField(), "call_id": serializers.CharField(),
    "server": serializers.CharField(), "mode": serializers.CharField(), "status": serializers.CharField(),
    "answered_at": serializers.DateTimeField(allow_null=True)})


@extend_schema(request=InputAnswerIn, responses={200: INPUT_OUT})
@api_view(["POST"])
def run_inputs(request, run_id: int):
    """Answer what a tool server asked the person during a call (`input_requested`):
    `accept` with the form's `content` (checked against the form's schema: 400 with the
    fields), `decline` or `cancel`. By the session's creator only (404 for anyone else).
    The same answer twice is accepted once; another answer to an answered question is
    409 `already_answered`; a question nobody waits for any more is 409 `not_waiting`."""
    run = run_get_for_user(run_id=run_id, user=request.user)
    data = InputAnswerIn(data=request.data)
    data.is_valid(raise_exception=True)
    row = tool_input_answer(run=run, user=request.user, input_id=data.validated_data["input_id"],
                            action=data.validated_data["action"], content=data.validated_data.get("content"))
    return Response(input_out(row))
