"""Account endpoints of the API: a token for a username and password (SPEC §9), the
caller's tokens, and revoking one."""
from __future__ import annotations

from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.exceptions import Throttled
from rest_framework.response import Response

from core.accounts.login_limit import LOCKED_MESSAGE, login_attempt_start, login_attempt_succeeded
from core.accounts.models import ApiToken
from core.accounts.selectors import token_get_for_user, token_list_for_user
from core.accounts.services import token_issue, token_revoke
from core.api.fields import StrictCharField
from core.errors import DomainError, NotFound


class BadCredentials(DomainError):
    status = 401
    code = "bad_credentials"


class LoginSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=256, trim_whitespace=False)
    client = StrictCharField(max_length=100, required=False, default="default",
                             help_text="Which program the token is for; logging in again as the same client "
                                       "replaces its previous token.")


class TokenOut(serializers.ModelSerializer):
    current = serializers.SerializerMethodField()

    class Meta:
        model = ApiToken
        fields = ["id", "client", "created_at", "expires_at", "current"]

    def get_current(self, token: ApiToken) -> bool:
        return token.pk == getattr(self.context.get("current"), "pk", None)


@extend_schema(
    request=LoginSerializer,
    responses={200: inline_serializer("TokenResponse", {"token": serializers.CharField(),
                                                        "client": serializers.CharField(),
                                                        "expires_at": serializers.DateTimeField()})},
)
@api_view(["POST"])
@authentication_classes([])
@permission_classes([])
def obtain_token(request):
    """Exchange a username and password for an API token (`Authorization: Token <key>`).

    The key is shown this once. It expires after `AGENTLOOM_TOKEN_DAYS`, is replaced when
    the same `client` logs in again, and dies with a password change. Failed logins count
    with the chat's and the console's login pages, per address and per username; past
    `AGENTLOOM_LOGIN_RATE` every attempt is refused with 429 until the window has passed.
    """
    data = LoginSerializer(data=request.data)
    data.is_valid(raise_exception=True)  # a malformed body checks no password and counts for nothing
    values = data.validated_data
    attempt = login_attempt_start(request=request, username=values["username"])
    if attempt.refused:
        refused = Throttled(detail=LOCKED_MESSAGE)
        refused.wait = attempt.retry_after - 1  # the handler's Retry-After is wait + 1; the message stays as is
        raise refused
    user = authenticate(request, username=values["username"], password=values["password"])
    if user is None or not user.is_active:
        raise BadCredentials("Wrong username or password.")
    login_attempt_succeeded(attempt=attempt)
    token, key = token_issue(user=user, client=values["client"])
    return Response({"token": key, "client": token.client, "expires_at": token.expires_at})


@extend_schema(responses=TokenOut(many=True))
@api_view(["GET"])
def tokens_collection(request):
    """The caller's API tokens (never their keys); `current` marks the one used for this call."""
    tokens = token_list_for_user(user=request.user)[:200]
    return Response(TokenOut(tokens, many=True, context={"current": request.auth}).data)


@extend_schema(responses={204: None})
@api_view(["DELETE"])
def token_detail(request, token_id: int):
    """Revoke one of the caller's tokens."""
    token_revoke(token=token_get_for_user(token_id=token_id, user=request.user))
    return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(responses={204: None})
@api_view(["DELETE"])
def token_current(request):
    """Revoke the token this call was made with (log out)."""
    if not isinstance(request.auth, ApiToken):
        raise NotFound("This call was not made with an API token.")
    token_revoke(token=request.auth)
    return Response(status=status.HTTP_204_NO_CONTENT)
