"""Browser-side defences of the chat pages and the console: a strict Content-Security-Policy,
the failed-login limit in both login forms, console list filters held to ids a column can
hold, and no NUL character in a query string or a console form (SPEC §11).

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

from django.conf import settings
from django.contrib import messages
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.http import HttpResponseRedirect
from django.urls import reverse

from core.accounts.login_limit import LOCKED_MESSAGE, login_attempt_start, login_attempt_succeeded
from core.api.fields import id_from_text
from core.api.pages import bad_request_saying

LOCKED_CODE = "login_locked"

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


class _LimitedLogin:
    """The one failed-login limit (core/accounts/login_limit.py) inside a login form.

    The form is where a page checks the password, so the attempt is counted there: after
    the fields are valid (a form missing one checks nothing), before ``authenticate``. A
    locked address or username gets :data:`LOCKED_MESSAGE` as the form's error, with code
    ``login_locked``, and its password is never checked; :func:`limited_login` then
    answers 429. A right password gives the attempt's slot back, even when the door then
    refuses the account (an inactive one; a member at the console's door): it was no guess.
    """

    def clean(self):
        username, password = self.cleaned_data.get("username"), self.cleaned_data.get("password")
        if username is None or not password:
            return super().clean()  # no password to check: nothing to count
        attempt = login_attempt_start(request=self.request, username=username)
        if attempt.refused:
            raise ValidationError(LOCKED_MESSAGE, code=LOCKED_CODE)
        try:
            return super().clean()
        finally:
            if self.user_cache is not None:
                login_attempt_succeeded(attempt=attempt)


class LimitedAuthenticationForm(_LimitedLogin, AuthenticationForm):
    """The chat's login form."""


class LimitedAdminAuthenticationForm(_LimitedLogin, AdminAuthenticationForm):
    """The console's login form (``admin.site.login_form``)."""


def login_locked(form) -> bool:
    """Whether a bound login form was refused by the failed-login limit."""
    return form is not None and form.is_bound and form.has_error(NON_FIELD_ERRORS, LOCKED_CODE)


def limited_login(view: Callable) -> Callable:
    """A login page whose form was refused by the failed-login limit answers 429 with
    ``Retry-After``, showing the refusal as the form's error (the console's page included)."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        if request.method == "POST" and login_locked((getattr(response, "context_data", None) or {}).get("form")):
            response.status_code = 429
            response["Retry-After"] = str(settings.AGENTLOOM_LOGIN_LIMIT[1])
        return response

    return wrapped
