"""Tool-server endpoints (SPEC §9, TOOL-1, TOOL-2).

Members of a space read its servers and the operator's servers it may use (how the
operator starts one only when they are operators: staff of the console); its admins
register, change, refresh and delete its own. Nothing here can add, change or start a
command: the operator's servers are read-only. Header values arrive in request bodies only;
``sensitive_post_parameters`` keeps them out of Django's error reports.
"""
from __future__ import annotations

from django.views.decorators.debug import sensitive_post_parameters
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.decorators import api_view, throttle_classes
from rest_framework.exceptions import Throttled
from rest_framework.response import Response

from core.accounts.selectors import user_is_operator
from core.api.fields import id_from_text
from core.errors import ValidationFailed
from core.spaces.selectors import space_default_for_admin, space_get_for_admin
from models_catalog.api import DiscoverThrottle
from toolservers.selectors import (
    sees_operator_commands,
    toolserver_get_for_admin,
    toolserver_get_for_user,
    toolserver_list_for_user,
)
from toolservers.serializers import RefreshOut, ToolServerCreateIn, ToolServerOut, ToolServerUpdateIn
from toolservers.services import toolserver_delete, toolserver_refresh, toolserver_register, toolserver_update


class ConnectThrottle(DiscoverThrottle):
    """Registering, changing and refreshing connect out on the caller's behalf: bounded
    per user like discovery."""

    scope = "toolservers"


def _reader(request) -> dict:
    """The serializers' context: whether the caller may read the operator's commands (TOOL-2)."""
    return {"shows_commands": sees_operator_commands(user=request.user)}


def _throttle(request) -> None:
    """The connect throttle for the writes that connect (a GET never does)."""
    throttle = ConnectThrottle()
    if not throttle.allow_request(request, None):
        raise Throttled(throttle.wait())


@sensitive_post_parameters("headers")
@extend_schema(methods=["GET"], parameters=[OpenApiParameter("space", int, description="Only this space's servers.")],
               responses={200: ToolServerOut(many=True)})
@extend_schema(methods=["POST"], request=ToolServerCreateIn, responses={201: ToolServerOut})
@api_view(["GET", "POST"])
def toolservers_collection(request):
    """The servers of the caller's spaces and the operator's; POST registers one (space
    admins): it connects and lists every tool, and saves nothing when that fails (400)."""
    if request.method == "GET":
        raw = request.query_params.get("space")
        space_id = id_from_text(raw) if raw is not None else None
        if raw is not None and space_id is None:
            raise ValidationFailed("The space filter is not valid.", fields={"space": "must be a space id"})
        return Response(ToolServerOut(toolserver_list_for_user(user=request.user, space_id=space_id)[:500],
                                      many=True, context=_reader(request)).data)
    _throttle(request)
    data = ToolServerCreateIn(data=request.data)
    data.is_valid(raise_exception=True)
    values = dict(data.validated_data)
    space_id = values.pop("space", None)
    space = (space_get_for_admin(user=request.user, space_id=space_id) if space_id is not None
             else space_default_for_admin(user=request.user))
    server, _ = toolserver_register(space=space, data=values, created_by=request.user,
                                    detailed=user_is_operator(user=request.user))
    return Response(ToolServerOut(server, context=_reader(request)).data, status=status.HTTP_201_CREATED)


@sensitive_post_parameters("headers")
@extend_schema(methods=["GET"], responses={200: ToolServerOut})
@extend_schema(methods=["PATCH"], request=ToolServerUpdateIn, responses={200: ToolServerOut})
@extend_schema(methods=["DELETE"], responses={204: None})
@api_view(["GET", "PATCH", "DELETE"])
def toolserver_detail(request, server_id: int):
    """Read (members), change or delete (the space's admins) one server; 409 while agents use it."""
    if request.method == "GET":
        return Response(ToolServerOut(toolserver_get_for_user(server_id=server_id, user=request.user),
                                      context=_reader(request)).data)
    server = toolserver_get_for_admin(server_id=server_id, user=request.user)
    if request.method == "DELETE":
        toolserver_delete(server=server)
        return Response(status=status.HTTP_204_NO_CONTENT)
    data = ToolServerUpdateIn(data=request.data)
    data.is_valid(raise_exception=True)
    if "url" in data.validated_data or "headers" in data.validated_data:
        _throttle(request)
    return Response(ToolServerOut(toolserver_update(server=server, data=data.validated_data, by=request.user,
                                                    detailed=user_is_operator(user=request.user)),
                                  context=_reader(request)).data)


@extend_schema(request=None, responses={200: RefreshOut})
@api_view(["POST"])
@throttle_classes([ConnectThrottle])
def toolserver_refresh_view(request, server_id: int):
    """List the server's tools again and say what changed (the space's admins)."""
    server = toolserver_get_for_admin(server_id=server_id, user=request.user)
    server, changes = toolserver_refresh(server=server, by=request.user, detailed=user_is_operator(user=request.user))
    return Response(RefreshOut(server, context={"changes": changes, **_reader(request)}).data)
