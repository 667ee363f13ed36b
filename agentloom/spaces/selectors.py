"""Reads for spaces: who may see and manage what."""
from __future__ import annotations

from django.db.models import QuerySet

from agentloom.spaces.models import Membership, Space


def space_list_for_user(*, user) -> QuerySet[Space]:
    return Space.objects.filter(memberships__user=user).distinct()


def space_role_for_user(*, space_id: int, user) -> str | None:
    """The user's role in the space, or None when they are not a member."""
    return (
        Membership.objects.filter(space_id=space_id, user=user)
        .values_list("role", flat=True)
        .first()
    )


def space_is_admin(*, space_id: int, user) -> bool:
    return space_role_for_user(space_id=space_id, user=user) == Membership.Role.ADMIN
