"""API tokens (SPEC §9, §11).

The key itself is shown once, when it is issued, and stored only as its SHA-256: a copy
of the database opens no account. (A key is 256 random bits, so a fast hash is enough —
there is nothing to guess.) Each token belongs to one client of one person (``client``,
a name such as "laptop" or "ci"), expires, and carries a stamp of the person's password
hash at issue time: a changed password — in the console, by a command, by a reset —
no longer matches, which revokes every token issued before it.
"""
from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def password_stamp(user) -> str:
    return hashlib.sha256((user.password or "").encode()).hexdigest()


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    client = models.CharField(max_length=100, help_text="The program this token was issued to.")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    password_stamp = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["user_id", "client"]
        constraints = [models.UniqueConstraint(fields=["user", "client"], name="api_token_one_per_client")]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.client} ({self.user})"
