"""What the input-class fuzz sends, and the URL conf it has to cover (issue #44 item 9).

The schema fuzz (``test_fuzz.py``) generates inputs from the API's schema; these classes
are the ones it finds only by luck, sent on purpose to every route: hosts no parser can
use, digits ``str.isdigit`` accepts and ``int`` or a column refuses, NUL (PostgreSQL
refuses it in any text), years outside a date's range, a regular expression the database
cannot compile. :class:`Prober` sends each request, records which route of the URL conf
answered it, and collects every 5xx; :func:`every_route` is the URL conf, so a test can
say which routes nothing was sent to.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

from asgiref.sync import async_to_sync
from django.core.cache import cache
from django.urls import Resolver404, URLPattern, URLResolver, get_resolver, resolve

NUL = "fuzz\x00text"
# Hosts and ports no parser can use, each a 500 somewhere before issue #44: an empty
# A-label, a bracketed non-address, a hex port, a second port, no host, a percent-encoded
# host, NUL, an overlong label and name, an A-label that is no Punycode, a character IDNA
# refuses, ports out of range, empty labels.
MALFORMED_URLS = [
    "http://xn--/v1", "http://[abc]/v1", "http://models.example:0x10/v1", "http://models.example:1:2/v1",
    "http:///v1", "http://%zz/v1", "http://mo\x00dels.example/v1", "http://" + "a" * 64 + ".example/v1",
    "http://" + "a." * 127 + "example/v1", "http://xn--a.example/v1", "http://\u2100.example/v1",
    "http://models.example:-1/v1", "http://[::1]:99999/v1", "http://models..example/v1", "http://.example/v1",
    "http://models.example:0/v1", "http://mod els.example/v1",
]
# Ids and numbers: Unicode digits (``"²".isdigit()`` is True, ``int("²")`` raises, ``int("٣")``
# is 3), a negative, hex and exponent spellings, padding, past 64 bits, past ``int()``'s limit.
ODD_NUMBERS = ["²", "٣", "１", "-1", "0x10", "1e3", " 1", "9" * 30, "9" * 4301]
HUGE_INT = 10**30  # in a JSON body: past any column


def _join(first: str, second: str) -> str:
    """Django's own join of nested routes (``URLResolver._join_route``)."""
    return second if not first else first + second.removeprefix("^")


def every_route() -> set[str]:
    """Every route of the URL conf, spelled as ``ResolverMatch.route`` spells it."""
    found: set[str] = set()

    def walk(resolver: URLResolver, prefix: str) -> None:
        for entry in resolver.url_patterns:
            route = _join(prefix, str(entry.pattern))
            if isinstance(entry, URLResolver):
                walk(entry, route)
            elif isinstance(entry, URLPattern):
                found.add(route)

    walk(get_resolver(), "")
    return found


def route_of(path: str) -> str | None:
    try:
        return resolve(urlsplit(path).path).route
    except Resolver404:
        return None


def operations_of_the_schema() -> list[Any]:
    """Every operation of ``/api/schema/``, as schemathesis reads it from the WSGI app."""
    import schemathesis
    from django.core.wsgi import get_wsgi_application

    schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())
    return [result.ok() for result in schema.get_all_operations()]


def path_with(operation: Any, ids: dict[str, Any], every_id: str | None = None) -> str:
    """The operation's path with each id the caller's real row (``ids`` by parameter name),
    or ``every_id`` in all of them."""
    path = operation.path
    for parameter in operation.definition.raw.get("parameters", []):
        if parameter.get("in") == "path":
            value = every_id if every_id is not None else ids.get(parameter["name"], 1)
            path = path.replace("{" + parameter["name"] + "}", str(value))
    return path


def error_shape_problem(response) -> str | None:
    """Why a 4xx of the API is not ``{"error": {"code", "message", "fields"?}}``, or None."""
    try:
        body = json.loads(response.content)
    except ValueError:
        return "not JSON"
    error = body.get("error") if isinstance(body, dict) else None
    if (not isinstance(error, dict) or set(body) != {"error"} or not {"code", "message"} <= set(error)
            or not set(error) <= {"code", "message", "fields"}):
        return "not the error shape"
    return None


@dataclass
class Prober:
    """Sends requests with one client and keeps what answered and what failed."""

    client: Any
    covered: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    sent: int = 0

    def send(self, method: str, path: str, data: Any = None, *, query: dict[str, Any] | None = None,
             as_json: bool = False, **extra: Any):
        # Throttles count per person in the cache: cleared so every request reaches its view.
        cache.clear()
        route = route_of(path)
        if route is not None:
            self.covered.add(route)
        call = getattr(self.client, method.lower())
        if query and method.upper() != "GET":
            path = f"{path}?{urlencode(query)}"
        if method.upper() == "GET":
            response = call(path, query or {}, **extra)
        elif as_json:
            response = call(path, json.dumps(data if data is not None else {}), content_type="application/json",
                            **extra)
        elif method.upper() in ("POST",):
            response = call(path, data or {}, **extra)
        else:  # Django's client sends PATCH and DELETE bodies as given: encode the form ourselves
            response = call(path, urlencode(data or {}, doseq=True), content_type="application/x-www-form-urlencoded",
                            **extra)
        self.sent += 1
        if getattr(response, "streaming", False):
            _drain(response.streaming_content)
        shown = {k: (v[:40] if isinstance(v, str) else v) for k, v in (query or {}).items()}
        where = f"{method} {path[:120]!r} query={shown} body={str(data)[:160]!r} → {response.status_code}"
        # 502 (a provider or tool server that did not answer) and 503 (busy, or not ready:
        # /healthz without workers) are answers the product means; anything else past 499 is not.
        if response.status_code >= 500 and response.status_code not in (502, 503):
            self.problems.append(f"server error: {where}")
        elif 400 <= response.status_code < 500 and path.startswith(("/api/v1/", "/api/models/")):
            problem = error_shape_problem(response)
            if problem:
                self.problems.append(f"{problem}: {where}")
        return response


def _drain(content: Any) -> None:
    """Read a streamed answer to its end (an event stream is an async iterator)."""
    if hasattr(content, "__aiter__"):
        async def read() -> None:
            async for _ in content:
                pass

        async_to_sync(read)()
    else:
        for _ in content:
            pass


def traces_logged(caplog, *, besides: tuple[str, ...] = ()) -> list[str]:
    """Log records at ERROR (a 5xx, an unhandled error: a handled 4xx logs below), but for
    the loggers named in ``besides``."""
    return [f"{record.name}: {record.getMessage()[:200]}" for record in caplog.records
            if record.levelno >= logging.ERROR and not record.name.startswith(besides or ("\x00",))]
