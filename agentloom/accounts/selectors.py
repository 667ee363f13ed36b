"""Reads for API tokens. Nothing here writes."""
from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from agentloom.accounts.models import ApiToken
from agentloom.errors import NotFound


def token_list_for_user(*, user) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).order_by("client")


def token_get_for_user(*, token_id: Any, user) -> ApiToken:
    """One of the caller's own tokens; NotFound for anyone else's."""
    try:
        return token_list_for_user(user=user).get(pk=int(token_id))
    except (ApiToken.DoesNotExist, TypeError, ValueError):
        raise NotFound("Token not found.") from None
