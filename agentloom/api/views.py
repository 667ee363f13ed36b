"""Account endpoints of the API."""
from __future__ import annotations

from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.authtoken.models import Token
from rest_framework.decorators import api_view, authentication_classes, permission_classes, throttle_classes
from rest_framework.response import Response
from agentloom.api.clients import ClientThrottle
from agentloom.errors import DomainError


class LoginSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=256, trim_whitespace=False)


class LoginThrottle(ClientThrottle):
    """Rate limit on login attempts per client address (SPEC §11)."""

    scope = "login"

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


@extend_schema(
    request=LoginSerializer,
    responses={200: inline_serializer("TokenResponse", {"token": serializers.CharField()})},
)
@api_view(["POST"])
@authentication_classes([])
@permission_classes([])
@throttle_classes([LoginThrottle])
def obtain_token(request):
    """Exchange a username and password for an API token (`Authorization: Token <key>`)."""
    data = LoginSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    user = authenticate(request, **data.validated_data)
    if user is None or not user.is_active:
        raise DomainError("Wrong username or password.", code="bad_credentials")
    token, _ = Token.objects.get_or_create(user=user)
    return Response({"token": token.key})
