"""Reads for spaces: who may see and manage what.

Reach rules (SPEC §9, §11): what belongs to a space is visible to its members; only its
admins change it. Anything outside the caller's spaces is reported as not found (404),
never as forbidden, so ids do not leak which spaces exist; a member who tries an
admin-only write gets 403, because they can already see the object.
"""
from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from core.api.fields import id_from_text
from core.errors import Forbidden, NotFound, ValidationFailed
from core.spaces.models import Membership, Space

ADMINS_ONLY = "Only admins of this space can do this."


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


def space_require_admin(*, space_id: int, user) -> None:
    """403 unless ``user`` administers the space. The caller has already shown the object
    to be within the user's reach (a 404 for outsiders comes before this)."""
    if not space_is_admin(space_id=space_id, user=user):
        raise Forbidden(ADMINS_ONLY)


def space_get_for_admin(*, user, space_id: Any) -> Space:
    """The space when ``user`` administers it: 404 for outsiders, 403 for plain members."""
    pk = id_from_text(str(space_id)) if space_id is not None else None
    if pk is None or space_role_for_user(space_id=pk, user=user) is None:
        raise NotFound("Space not found.")
    space_require_admin(space_id=pk, user=user)
    return Space.objects.get(pk=pk)


def space_default_for_admin(*, user) -> Space:
    """The one space ``user`` administers, for requests that name no space.

    403 when they administer none; 400 naming ``space`` when they administer several,
    because guessing would put a key or an agent into the wrong workspace.
    """
    spaces = list(
        Space.objects.filter(memberships__user=user, memberships__role=Membership.Role.ADMIN).order_by("id")[:2]
    )
    if not spaces:
        raise Forbidden("Only space admins can do this, and you administer no space.")
    if len(spaces) > 1:
        raise ValidationFailed(
            "You administer several spaces: say which one.",
            fields={"space": "required when you administer several spaces"},
        )
    return spaces[0]


def user_administers_a_space(*, user) -> bool:
    return Membership.objects.filter(user=user, role=Membership.Role.ADMIN).exists()


def space_ids_administered(*, user) -> set[int]:
    """The ids of the spaces ``user`` administers (one query, for pages of many rows)."""
    return set(Membership.objects.filter(user=user, role=Membership.Role.ADMIN).values_list("space_id", flat=True))
