"""The chat's answer to what a tool server asked the person (TOOL-10): the API's operation
(``sessions.api_inputs``) under the chat's address, with the page's cookie and CSRF token."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view
from rest_framework.response import Response

from sessions.api_inputs import INPUT_OUT, InputAnswerIn, input_out
from sessions.selectors.runs import run_get_for_user
from sessions.services.inputs import tool_input_answer


# Described like the API's operations, so the deploy checks know its shapes and the fuzz
# test (which walks the schema) reaches it too.
@extend_schema(request=InputAnswerIn, responses={200: INPUT_OUT}, operation_id="chat_run_inputs")
@api_view(["POST"])
def run_inputs_view(request, run_id: int):
    """The person's answer from the chat: as ``POST /api/v1/runs/{id}/inputs``."""
    run = run_get_for_user(run_id=run_id, user=request.user)
    data = InputAnswerIn(data=request.data)
    data.is_valid(raise_exception=True)
    row = tool_input_answer(run=run, user=request.user, input_id=data.validated_data["input_id"],
                            action=data.validated_data["action"], content=data.validated_data.get("content"))
    return Response(input_out(row))
