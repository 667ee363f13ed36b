"""Browser-side defences of the chat pages and the console: a strict Content-Security-Policy,
a limit on failed logins, console list filters held to ids a column can hold, and no NUL
character in a query string or a console form (SPEC §11).

The CSP is a second wall behind the Markdown sanitiser: the pages load scripts and
styles only from our own origin and carry no inline script, so even markup that slipped
through could not run. The console (``/admin/``) gets the same policy from
:class:`ConsoleMiddleware`: Django's admin templates and ours load every script and
style from static files (configuration travels in ``data-`` attributes), so it needs no
exception — and the console is where decrypted conversations are shown.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib import messages
from django.core.cache import cache
from django.http import HttpResponseRedirect
from django.urls import reverse

from agentloom.api.clients import client_address
from agentloom.api.fields import id_from_text
from agentloom.api.pages import bad_request_saying

CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    # blob: only for images: the chat previews a file being attached from a local object
    # URL of the person's own file (static/web/attach.js); scripts and frames never load one.
    "img-src 'self' data: blob:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])

LOGIN_FAILURES_ALLOWED = 10
LOGIN_FAILURE_WINDOW_SECONDS = 60


def _add_csp(response):
    response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    response.headers.setdefault("Referrer-Policy", "same-origin")
    return response


def with_csp(view: Callable) -> Callable:
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        return _add_csp(view(request, *args, **kwargs))

    return wrapped


# Query parameters of a console list that are never a field lookup (Django's own).
_LIST_PARAMETERS = frozenset({"q", "o", "p", "e", "_popup", "_to_field"})


def _not_an_id(value: str) -> bool:
    """Digits that are no id: non-ASCII ones (``²``) or more than a 64-bit column holds
    (SQLite cannot even bind them: the list would fail with a 500 while rendering)."""
    return any(part.isdigit() and id_from_text(part) is None for part in value.split(","))


class ConsoleMiddleware:
    """Every console response carries the CSP; a console list filtered by a number no id
    can be is shown without that filter, with a message saying why."""

    def __init__(self, get_response: Callable) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if request.path_info.startswith(reverse("admin:index")):
            _add_csp(response)
        return response

    def process_view(self, request, view_func, view_args, view_kwargs):
        match = request.resolver_match
        if (request.method != "GET" or match is None or match.namespace != "admin"
                or not (match.url_name or "").endswith("_changelist")):
            return None
        kept = request.GET.copy()
        dropped = [key for key, values in request.GET.lists()
                   if key not in _LIST_PARAMETERS and any(_not_an_id(value) for value in values)]
        if not dropped:
            return None
        for key in dropped:
            shown = next(value for value in request.GET.getlist(key) if _not_an_id(value))
            shown = shown if len(shown) <= 24 else shown[:24] + "…"
            messages.warning(request, f"The filter {key}={shown} was left out: it is not an id this console can "
                                      "look up (ids are plain digits, at most 19 of them). Check the link or the "
                                      "number and filter again.")
            del kept[key]
        query = kept.urlencode()
        return HttpResponseRedirect(request.path + (f"?{query}" if query else ""))


NUL_REFUSED = "The request holds a NUL character (U+0000), which no field accepts."
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _holds_nul(query) -> bool:
    return any("\x00" in key or any("\x00" in value for value in values) for key, values in query.lists())


class NulRefusedMiddleware:
    """A NUL in any query string, or in a form posted to the console, is a 400 before any view.

    PostgreSQL refuses NUL in text ("A string literal cannot contain NUL"), so a search box
    or a list filter holding one failed with a 500 only there; no field of this product
    holds one. Query strings are checked everywhere (reading them costs nothing); form
    bodies only in the console, whose lists and actions read them raw. Elsewhere the body
    is left to its view: DRF and Django's forms refuse NUL in text themselves, and reading
    a body here would come before the upload bounds the API sets on its own reads.
    """

    def __init__(self, get_response: Callable) -> None:
        self.get_response = get_response

    def __call__(self, request):
        if _holds_nul(request.GET) or (
                request.method == "POST" and request.content_type in _FORM_TYPES
                and request.path_info.startswith(reverse("admin:index")) and _holds_nul(request.POST)):
            return bad_request_saying(request, NUL_REFUSED)
        return self.get_response(request)


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
