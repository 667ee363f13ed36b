"""A person's decision on a waiting tool call, sent from its card in the chat (SPEC §7b,
TOOL-9): ``POST /chat/runs/{id}/approvals`` with ``call_id``, ``decision`` (approve or
deny), an optional ``reason`` and ``scope`` (call, or this tool for the rest of the
session), as JSON or as a form.

The chat's own door to ``approval_decide``, beside the API's (``/api/v1/runs/{id}/approvals``):
it takes only the chat's login cookie, so every decision it records carries the CSRF
token of the page that showed the card. The service decides everything else — only the
session's creator may decide (404 for anyone else, as every chat read), the same decision
twice changes nothing, a different one on a decided call is 409 ``already_decided`` — and
its errors leave in the one error shape (``core.api.errors``).
"""
from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.authentication import SessionAuthentication
from rest_framework.decorators import api_view, authentication_classes, throttle_classes
from rest_framework.response import Response

from sessions.api import SupplementThrottle
from sessions.api_runs import ApprovalIn
from sessions.selectors.runs import run_get_for_user
from sessions.services.approvals import approval_decide


# Web-only, as the run's fragments are: not an operation of the REST API (its door to the
# same decision is /api/v1/runs/{id}/approvals), so not in its schema either.
@extend_schema(exclude=True)
@api_view(["POST"])
@authentication_classes([SessionAuthentication])
@throttle_classes([SupplementThrottle])  # as the API's door to the same decision
def run_approval_decide(request, run_id: int):
    """200 with the call's decision as recorded; 400 for a decision that is neither approve
    nor deny (nothing written), 404 for a run outside the caller's own sessions."""
    run = run_get_for_user(run_id=run_id, user=request.user)
    data = ApprovalIn(data=request.data)  # the API's, so both doors take the same input
    data.is_valid(raise_exception=True)
    approval = approval_decide(run=run, user=request.user, call_id=data.validated_data["call_id"],
                               decision=data.validated_data["decision"], reason=data.validated_data["reason"],
                               scope=data.validated_data["scope"])
    return Response({"call_id": approval.call_id, "status": approval.status, "scope": approval.scope,
                     "reason": approval.reason}, status=status.HTTP_200_OK)
