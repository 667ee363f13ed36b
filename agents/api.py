"""Agent endpoints (SPEC §9): drafts with their context policy, publishing, versions.

Members of a space read its agents and versions, without their instructions (the person
chatting may not see them, SPEC §9); its admins create, change and publish.
Each view validates input, checks reach with a selector, calls one service and
serializes the result.
"""
from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.decorators import api_view
from rest_framework.response import Response

from agents.selectors import (
    agent_get_for_admin,
    agent_get_for_user,
    agent_list_for_user,
    version_list_for_agent,
)
from agents.serializers import AgentCreateIn, AgentOut, AgentUpdateIn, VersionOut
from agents.services import agent_draft_create, agent_publish, agent_update
from core.api.fields import id_from_text
from core.errors import ValidationFailed
from core.spaces.selectors import space_get_for_admin, space_ids_administered


def _reader(request) -> dict:
    """The serializers' context: which of the agents' spaces the caller administers."""
    return {"administers": space_ids_administered(user=request.user)}


def _space_filter(request) -> int | None:
    raw = request.query_params.get("space")
    if raw is None:
        return None
    space_id = id_from_text(raw)
    if space_id is None:
        raise ValidationFailed("The space filter is not valid.", fields={"space": "must be a space id"})
    return space_id


@extend_schema(
    methods=["GET"],
    parameters=[OpenApiParameter("space", int, description="Only this space's agents.")],
    responses={200: AgentOut(many=True)},
)
@extend_schema(methods=["POST"], request=AgentCreateIn, responses={201: AgentOut})
@api_view(["GET", "POST"])
def agents_collection(request):
    """Agents of the caller's spaces; POST creates a draft (admins of the connection's space)."""
    if request.method == "GET":
        agents = agent_list_for_user(user=request.user, space_id=_space_filter(request))[:500]
        return Response(AgentOut(agents, many=True, context=_reader(request)).data)
    data = AgentCreateIn(data=request.data, context={"user": request.user})
    data.is_valid(raise_exception=True)
    values = dict(data.validated_data)
    space = space_get_for_admin(user=request.user, space_id=values.pop("space", values["model_connection"].space_id))
    agent = agent_draft_create(space=space, data=values, created_by=request.user)
    return Response(AgentOut(agent, context=_reader(request)).data, status=status.HTTP_201_CREATED)


@extend_schema(methods=["GET"], responses={200: AgentOut})
@extend_schema(methods=["PATCH"], request=AgentUpdateIn, responses={200: AgentOut})
@api_view(["GET", "PATCH"])
def agent_detail(request, agent_id: int):
    """Read a draft (members) or change it (admins); published versions never change."""
    if request.method == "GET":
        return Response(AgentOut(agent_get_for_user(agent_id=agent_id, user=request.user),
                                 context=_reader(request)).data)
    agent = agent_get_for_admin(agent_id=agent_id, user=request.user)
    data = AgentUpdateIn(data=request.data, context={"user": request.user})
    data.is_valid(raise_exception=True)
    agent = agent_update(agent=agent, data=data.validated_data)
    return Response(AgentOut(agent, context=_reader(request)).data)


@extend_schema(request=None, responses={201: VersionOut})
@api_view(["POST"])
def agent_publish_view(request, agent_id: int):
    """Freeze the draft into the next version number (admins); new sessions bind to it."""
    agent = agent_get_for_admin(agent_id=agent_id, user=request.user)
    version = agent_publish(agent=agent, published_by=request.user)
    return Response(VersionOut(version, context=_reader(request)).data, status=status.HTTP_201_CREATED)


@extend_schema(responses={200: VersionOut(many=True)})
@api_view(["GET"])
def agent_versions(request, agent_id: int):
    """The agent's published versions, newest first (members; read-only)."""
    agent = agent_get_for_user(agent_id=agent_id, user=request.user)
    versions = version_list_for_agent(agent=agent)[:500]
    return Response(VersionOut(versions, many=True, context=_reader(request)).data)
