"""Writes for spaces and memberships."""
from __future__ import annotations

from django.db import transaction

from core.spaces.models import Membership, Space


@transaction.atomic
def space_bootstrap_for_user(*, user, name: str | None = None) -> Space:
    """Return the user's first space where they are admin, creating a personal one if none.

    Idempotent: calling it twice for the same user returns the same space.
    """
    existing = (
        Space.objects.filter(memberships__user=user, memberships__role=Membership.Role.ADMIN)
        .order_by("id")
        .first()
    )
    if existing is not None:
        return existing
    space = Space.objects.create(name=name or f"{user.get_username()}'s space")
    Membership.objects.create(space=space, user=user, role=Membership.Role.ADMIN)
    return space


def membership_add(*, space: Space, user, role: str = Membership.Role.MEMBER) -> Membership:
    membership, _ = Membership.objects.update_or_create(
        space=space, user=user, defaults={"role": role}
    )
    return membership


def membership_remove(*, space: Space, user) -> bool:
    """Take ``user`` out of ``space``. Their sessions there stay stored but out of their
    reach from the next request on (RUN-11): every session, run, records and event-stream
    read checks current membership, asking refuses, and a queued run is never claimed."""
    deleted, _ = Membership.objects.filter(space=space, user=user).delete()
    return bool(deleted)
