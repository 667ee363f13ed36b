"""One limit on failed logins, whichever door they come through (SPEC §11).

Three doors check a password: the chat's ``/login/``, the console's ``/admin/login/`` and
``POST /api/v1/auth/token``. Each used to keep its own count (the two pages one, the API
another), so an address had twice the guesses it was meant to. Now every door asks here,
and failures are counted twice over, in one counter per client address
(:func:`core.api.clients.client_address`) and one per username, so neither many
usernames from one address nor one username from many addresses gets past
``AGENTLOOM_LOGIN_RATE`` (default ``10/min``) failures in a window.

Failures, not attempts: a person who types their password right is never counted, so an
office behind one address can log in all morning. The count is still taken *before* the
password is checked — the attempt holds a slot, and a right password gives it back — so
fifty guesses sent at once cannot all slip in under the limit while none has failed yet.
Once a counter holds the limit, the next attempt through any door is refused without its
password being checked (a right password too) until the window that began with the
counter's first failure has passed. A refused attempt takes no slot.

The username counter lets anyone lock a person out for a window by guessing their name;
that is the price of stopping a guesser who owns many addresses, and the lock is short.
Usernames are compared case-folded (``Alice`` and ``alice`` share a counter: stricter, never
looser) and kept hashed in the cache keys and the log, since people type passwords into
the username field.

The counters live in Django's default cache: per web process, as the other rate limits.
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from core.api.clients import client_address

logger = logging.getLogger(__name__)

LOCKED_MESSAGE = ("Too many failed logins from this address or for this username. "
                  "Wait a minute, then try again.")


@dataclass(frozen=True)
class LoginAttempt:
    """One login attempt's slots in the counters; ``refused`` when it may not check a password."""

    keys: tuple[str, ...]
    refused: bool
    retry_after: int  # seconds a refused client should wait (the window: its start is not kept)


def username_tag(username: str) -> str:
    """A username as the counters and the log name it: trimmed, case-folded, then hashed."""
    return hashlib.sha256(username.strip().casefold().encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _keys(request, username: str) -> tuple[str, ...]:
    keys = [f"login-failures:address:{client_address(request) or '?'}"]
    if username.strip():
        keys.append(f"login-failures:username:{username_tag(username)}")
    return tuple(keys)


def _take(key: str, window: int) -> int:
    """One more in ``key``'s counter; the count now. A new counter lives ``window`` seconds."""
    cache.add(key, 0, window)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr: this is the first of a new window
        cache.add(key, 1, window)
        return 1


def _give_back(keys: tuple[str, ...]) -> None:
    for key in keys:
        try:
            cache.decr(key)
        except ValueError:  # the window ended meanwhile: nothing left to give back
            pass


def login_attempt_start(*, request, username: str) -> LoginAttempt:
    """Take this attempt's slot in the address's and the username's counters, before any
    password is checked. Refused (its slots given back) when either counter is already full."""
    allowed, window = settings.AGENTLOOM_LOGIN_LIMIT
    keys = _keys(request, username)
    counts = [_take(key, window) for key in keys]
    full = [key for key, count in zip(keys, counts) if count > allowed]
    if not full:
        return LoginAttempt(keys=keys, refused=False, retry_after=window)
    _give_back(keys)
    for key in full:
        if cache.add(f"{key}:logged", 1, window):  # one line per lock, not one per refused guess
            logger.warning("Logins refused for up to %s s after %s failures, %s", window, allowed,
                           key.split(":", 1)[1])
    return LoginAttempt(keys=keys, refused=True, retry_after=window)


def login_attempt_succeeded(*, attempt: LoginAttempt) -> None:
    """The password was right: the attempt was no failure, its slots are given back."""
    if not attempt.refused:
        _give_back(attempt.keys)
