"""Issuing, checking and revoking API tokens."""
from __future__ import annotations

import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from core.accounts.models import ApiToken, key_digest, password_stamp
from core.db_rows import models_from_row, select_list


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
    token = _token_with_user(key_hash=key_digest(key))
    if token is None:
        return None
    if token.password_stamp != password_stamp(token.user):
        ApiToken.objects.filter(user_id=token.user_id).exclude(password_stamp=password_stamp(token.user)).delete()
        return None
    if token.expires_at <= timezone.now():
        token.delete()
        return None
    return token


def _token_with_user(*, key_hash: str) -> ApiToken | None:
    """The token and its owner in one written-out statement (``key_hash`` is unique):
    every API request comes here."""
    layout = ((ApiToken, "t"), (get_user_model(), "u"))
    select = select_list(layout)
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT {select} FROM "{ApiToken._meta.db_table}" t '
                       f'JOIN "{layout[1][0]._meta.db_table}" u ON u."id" = t."user_id" WHERE t."key_hash" = %s',
                       [key_hash])
        row = cursor.fetchone()
    if row is None:
        return None
    token, token.user = models_from_row(row, layout)
    return token


def token_revoke(*, token: ApiToken) -> None:
    token.delete()
