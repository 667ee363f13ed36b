"""``Authorization: Token <key>`` against the hashed, expiring tokens."""
from __future__ import annotations

from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from core.accounts.services import token_check


class ApiTokenAuthentication(TokenAuthentication):
    keyword = "Token"

    def authenticate_credentials(self, key):
        token = token_check(key=key)
        if token is None or not token.user.is_active:
            raise AuthenticationFailed("Invalid, expired or revoked token.")
        return token.user, token
