"""Issuing, checking and revoking API tokens."""
from __future__ import annotations

import secrets
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from agentloom.accounts.models import ApiToken, key_digest, password_stamp


def token_issue(*, user, client: str) -> tuple[ApiToken, str]:
    """A new token for ``client`` of ``user``, replacing that client's previous one.

    Returns the row and the key, which exists nowhere else: only its hash is stored.
    One transaction; two logins of the same client racing both end with a token, the
    later one replacing the earlier (the unique constraint decides).
    """
    key = secrets.token_urlsafe(32)
    for _ in range(2):
        try:
            with transaction.atomic():
                ApiToken.objects.filter(user=user, client=client).delete()
                token = ApiToken.objects.create(
                    user=user, client=client, key_hash=key_digest(key), password_stamp=password_stamp(user),
                    expires_at=timezone.now() + timedelta(days=settings.AGENTLOOM_TOKEN_DAYS))
            return token, key
        except IntegrityError:
            continue
    raise IntegrityError("could not issue a token")


def token_check(*, key: str) -> ApiToken | None:
    """The live token for ``key``, or None.

    An expired token, or one issued before its owner's last password change, is deleted
    when it is seen — and with a stale password stamp, so is every other token of that
    person issued before the change.
    """
    try:  # key_hash is unique: a plain get, not first()'s ordered query (every API request comes here)
        token = ApiToken.objects.select_related("user").get(key_hash=key_digest(key))
    except ApiToken.DoesNotExist:
        return None
    if token.password_stamp != password_stamp(token.user):
        ApiToken.objects.filter(user_id=token.user_id).exclude(password_stamp=password_stamp(token.user)).delete()
        return None
    if token.expires_at <= timezone.now():
        token.delete()
        return None
    return token


def token_revoke(*, token: ApiToken) -> None:
    token.delete()
