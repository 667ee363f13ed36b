"""Spaces (workspaces) and who belongs to them (SPEC §2)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class Space(models.Model):
    """A workspace: agents and model connections belong to one and are seen by its members."""

    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    # Typed by hand: the plugin cannot follow a `through` model declared below this one.
    members: models.ManyToManyField[User, Membership] = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="spaces"
    )

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        ADMIN = "admin", "Admin"
        MEMBER = "member", "Member"

    space = models.ForeignKey(Space, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["space", "user"], name="membership_unique_user_per_space")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.space} ({self.role})"
