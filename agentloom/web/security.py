"""Browser-side defences of the chat pages: a strict Content-Security-Policy and a limit
on failed logins (SPEC §11).

The CSP is a second wall behind the Markdown sanitiser: the pages load scripts and
styles only from our own origin and carry no inline script, so even markup that slipped
through could not run.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.core.cache import cache

from agentloom.api.clients import client_address

CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])

LOGIN_FAILURES_ALLOWED = 10
LOGIN_FAILURE_WINDOW_SECONDS = 60


def with_csp(view: Callable) -> Callable:
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response

    return wrapped


def _client_key(request) -> str:
    return f"web-login-failures:{client_address(request) or '?'}"


def login_blocked(request) -> bool:
    """True after too many failed logins from this address within the window."""
    return (cache.get(_client_key(request)) or 0) >= LOGIN_FAILURES_ALLOWED


def login_failed(request) -> None:
    key = _client_key(request)
    if cache.add(key, 1, LOGIN_FAILURE_WINDOW_SECONDS):
        return
    try:
        cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, LOGIN_FAILURE_WINDOW_SECONDS)


def limited_login(view: Callable) -> Callable:
    """The same failed-login limit for any login view (the admin console's included)."""
    from django.http import HttpResponse

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if request.method == "POST" and login_blocked(request):
            return HttpResponse("Too many failed logins from this address; wait a minute and try again.\n",
                                status=429, content_type="text/plain; charset=utf-8",
                                headers={"Retry-After": str(LOGIN_FAILURE_WINDOW_SECONDS)})
        response = view(request, *args, **kwargs)
        if request.method == "POST" and not request.user.is_authenticated:
            login_failed(request)
        return response

    return wrapped
