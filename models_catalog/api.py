"""Catalog endpoints (SPEC §9): discovery and model connections.

A view validates input, calls one service (after the selector that checks reach) and
serializes output. Errors leave through ``core.api.errors`` in the one JSON shape.
The API key arrives in request bodies only; ``sensitive_post_parameters`` keeps it out of
Django's error reports, and nothing here echoes it.
"""
from __future__ import annotations

from django.views.decorators.debug import sensitive_post_parameters
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.decorators import api_view, throttle_classes
from rest_framework.response import Response
from rest_framework.settings import api_settings

from core.accounts.selectors import user_is_operator
from core.api.clients import ClientThrottle
from core.api.fields import id_from_text
from core.errors import ValidationFailed
from core.spaces.selectors import space_default_for_admin, space_get_for_admin
from models_catalog.selectors import (
    connection_get_for_admin,
    connection_get_for_user,
    connection_list_for_user,
    discovery_key_for_user,
)
from models_catalog.serializers import (
    ConnectionCreateIn,
    ConnectionOut,
    ConnectionUpdateIn,
    DiscoverIn,
    DiscoveryOut,
    discovery_data,
)
from models_catalog.services import connection_create, connection_delete, connection_update, models_discover

DISCOVER_RATE_DEFAULT = "30/min"


class DiscoverThrottle(ClientThrottle):
    """Each discovery makes outbound calls on the caller's behalf: bound them per user.

    The rate is ``DEFAULT_THROTTLE_RATES["discover"]`` when the settings name one.
    """

    scope = "discover"

    def get_rate(self) -> str:
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope) or DISCOVER_RATE_DEFAULT

    def get_cache_key(self, request, view) -> str:
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk or self.get_ident(request)}


@sensitive_post_parameters("api_key")
@extend_schema(request=DiscoverIn, responses={200: DiscoveryOut})
@api_view(["POST"])
@throttle_classes([DiscoverThrottle])
def models_discover_view(request):
    """List a provider's models with figures and their sources (CAT-1). Saves nothing.

    Space admins only. A refused key is a 400 with code ``auth`` naming ``api_key``; a
    provider that is down, rate limiting or over quota is a 502; neither body carries
    the key or the provider's own message. Those details are for operators (staff) and for
    a provider's official endpoint: any other space admin gets one 400 ``unreachable``
    naming ``base_url`` for every failure that depends on what answered at the address.
    """
    data = DiscoverIn(data=request.data)
    data.is_valid(raise_exception=True)
    values = data.validated_data
    key = discovery_key_for_user(
        user=request.user, provider=values["provider"], base_url=values.get("base_url"),
        api_key=values.get("api_key"), resource_id=values.get("resource_id"), space_id=values.get("space"),
    )
    result = models_discover(provider=values["provider"], base_url=values.get("base_url"), api_key=key,
                             by=request.user, detailed=user_is_operator(user=request.user))
    return Response(discovery_data(result))


@sensitive_post_parameters("api_key")
@extend_schema(
    methods=["GET"],
    parameters=[OpenApiParameter("space", int, description="Only this space's connections.")],
    responses={200: ConnectionOut(many=True)},
)
@extend_schema(methods=["POST"], request=ConnectionCreateIn, responses={201: ConnectionOut})
@api_view(["GET", "POST"])
def connections_collection(request):
    """Connections of the caller's spaces; POST creates one (space admins; the key is write-only)."""
    if request.method == "GET":
        raw_space = request.query_params.get("space")
        space_id = id_from_text(raw_space) if raw_space is not None else None
        if raw_space is not None and space_id is None:
            raise ValidationFailed("The space filter is not valid.", fields={"space": "must be a space id"})
        connections = connection_list_for_user(user=request.user, space_id=space_id)
        return Response(ConnectionOut(connections[:500], many=True).data)
    data = ConnectionCreateIn(data=request.data)
    data.is_valid(raise_exception=True)
    values = dict(data.validated_data)
    space_id = values.pop("space", None)
    space = (space_get_for_admin(user=request.user, space_id=space_id) if space_id is not None
             else space_default_for_admin(user=request.user))
    connection = connection_create(space=space, data=values)
    return Response(ConnectionOut(connection).data, status=status.HTTP_201_CREATED)


@sensitive_post_parameters("api_key")
@extend_schema(methods=["GET"], responses={200: ConnectionOut})
@extend_schema(methods=["PATCH"], request=ConnectionUpdateIn, responses={200: ConnectionOut})
@extend_schema(methods=["DELETE"], responses={204: None})
@api_view(["GET", "PATCH", "DELETE"])
def connection_detail(request, connection_id: int):
    """Read (members), change or delete (admins) one connection; 409 when an agent uses it."""
    if request.method == "GET":
        return Response(ConnectionOut(connection_get_for_user(connection_id=connection_id, user=request.user)).data)
    connection = connection_get_for_admin(connection_id=connection_id, user=request.user)
    if request.method == "DELETE":
        connection_delete(connection=connection)
        return Response(status=status.HTTP_204_NO_CONTENT)
    data = ConnectionUpdateIn(data=request.data)
    data.is_valid(raise_exception=True)
    connection = connection_update(connection=connection, data=data.validated_data)
    return Response(ConnectionOut(connection).data)
