"""Reads for API tokens, and who is an operator. Nothing here writes."""
from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from core.accounts.models import ApiToken
from core.errors import NotFound


def token_list_for_user(*, user) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).order_by("client")


def token_get_for_user(*, token_id: Any, user) -> ApiToken:
    """One of the caller's own tokens; NotFound for anyone else's."""
    try:
        return token_list_for_user(user=user).get(pk=int(token_id))
    except (ApiToken.DoesNotExist, TypeError, ValueError):
        raise NotFound("Token not found.") from None


def user_is_operator(*, user) -> bool:
    """Whether ``user`` runs this installation: active staff, who may read what a failed
    connection found at an address (``models_catalog.reachability``), which other people
    get in one generic answer."""
    return bool(user is not None and user.is_authenticated and user.is_active and user.is_staff)
