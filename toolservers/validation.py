"""Input rules of a remote tool server, one home for the API and the console (TOOL-1).

The URL must be readable whole (``models_catalog.url_syntax``: a malformed host or port is
a 400 naming ``url``, never a crash further on). Names are what agents write before the dot
(``git.git_status``): a lower-case letter, then letters, digits or ``_``. Headers are what
an admin adds for the server (a bearer token, an API-key header): names are HTTP tokens,
values printable ASCII, and the headers the protocol itself sets are not theirs to override.
Values are secrets: they never appear in an error message, only their names do.
"""
from __future__ import annotations

import re
from typing import Any

from core.errors import ValidationFailed
from models_catalog.url_syntax import MalformedURL, url_parse
from toolservers.models import NAME_PATTERN

NAME = re.compile(NAME_PATTERN)
HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,100}$")
MAX_HEADERS = 16
MAX_HEADER_VALUE = 8_192
# Set by the HTTP client or the MCP transport: an admin's value would break the protocol.
RESERVED_HEADERS = frozenset({"host", "content-length", "content-type", "transfer-encoding", "connection",
                              "accept", "user-agent", "mcp-session-id", "mcp-protocol-version", "last-event-id",
                              "upgrade", "te", "trailer", "keep-alive", "proxy-authorization"})
MAX_TIMEOUT = 3600
MAX_URL = 500
AUTH_SCHEMES = ("Bearer ", "Basic ", "Token ")


def name_check(name: Any) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValidationFailed("The name is not valid.", fields={
            "name": "a lower-case letter, then lower-case letters, digits or _ (at most 31 characters)"})
    return name


def headers_check(headers: Any) -> dict[str, str]:
    """The headers as sent: an object of name → value (an empty object: none)."""
    if headers is None:
        return {}
    if not isinstance(headers, dict):
        raise ValidationFailed("The headers are not valid.", fields={"headers": "must be an object of name → value"})
    if len(headers) > MAX_HEADERS:
        raise ValidationFailed("Too many headers.", fields={"headers": f"at most {MAX_HEADERS}"})
    seen: set[str] = set()
    for name, value in headers.items():
        if not isinstance(name, str) or not HEADER_NAME.fullmatch(name):
            raise ValidationFailed("A header name is not valid.", fields={"headers": "names are HTTP tokens "
                                                                                   "(letters, digits, - and _)"})
        if name.lower() in RESERVED_HEADERS:
            raise ValidationFailed("A header is set by the protocol.", fields={
                "headers": f"{name} is set by the HTTP client or the MCP transport and cannot be given"})
        if name.lower() in seen:
            raise ValidationFailed("A header is given twice.", fields={"headers": f"{name} is given twice"})
        seen.add(name.lower())
        if (not isinstance(value, str) or not value or len(value) > MAX_HEADER_VALUE
                or any(not " " <= c <= "~" for c in value) or value != value.strip()):
            # The value is a secret: the message names the header, never what it holds.
            raise ValidationFailed("A header value is not valid.", fields={
                "headers": f"the value of {name} must be printable ASCII, without surrounding spaces, "
                           f"at most {MAX_HEADER_VALUE:,} characters"})
    return dict(headers)


def url_check(value: Any) -> str:
    """The server's URL as stored: http(s), at most ``MAX_URL`` characters, and readable whole
    (``url_parse``: host, labels, port), so a malformed one is a 400 naming ``url`` before
    anything connects. Whether its address may be contacted is the guard's, when it connects."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_URL:
        raise ValidationFailed("The URL is not valid.",
                               fields={"url": f"an http(s) URL of at most {MAX_URL} characters"})
    url = value.strip()
    try:
        url_parse(url)
    except MalformedURL as exc:
        raise ValidationFailed(f"The URL is not valid: {exc.message}.", fields={"url": exc.message}) from None
    return url


def timeout_check(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TIMEOUT:
        raise ValidationFailed("The time-out is not valid.", fields={
            "timeout_seconds": f"a whole number of seconds from 1 to {MAX_TIMEOUT}"})
    return value


def _masked(secret: str) -> str:
    if len(secret) < 12:
        return "…" + secret[-2:] if len(secret) > 4 else "…"
    return f"{secret[:3]}…{secret[-4:]}"


def header_hint(value: str) -> str:
    """A masked hint that lets an admin recognise a header value without revealing it."""
    for scheme in AUTH_SCHEMES:
        if value.startswith(scheme):
            return scheme + _masked(value[len(scheme):])
    return _masked(value)


def header_hints(headers: dict[str, str]) -> dict[str, str]:
    return {name: header_hint(value) for name, value in headers.items()}
