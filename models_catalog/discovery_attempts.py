"""What a model listing tried, for the admin reading a failure (CAT-5): each request's URL
and how it ended — refused, timed out, an HTTP status, not JSON — never a body, a key or
a query string. Pure adapter code: no Django, no storage."""
from __future__ import annotations

import copy
import errno
import ssl
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import httpx

from models_catalog.errors import ProviderError, UnsafeURLError
from models_catalog.http import HttpLimits

MAX_ATTEMPTS_SHOWN = 4


@dataclass
class Attempt:
    """One request of a listing and what came back: its status line and the kind of body,
    never the body itself (CAT-5: a provider's answer may quote the key or other data)."""

    method: str
    url: str
    status: int | None = None
    reason_phrase: str = ""
    content_type: str = ""
    length: str = ""


@dataclass
class Attempts:
    """Records a listing's requests through the client's event hooks, so a failure can say
    which URLs were tried and how each ended: refused, timed out, an HTTP status, not JSON.
    The URL is recorded before the guard pins it to an address, without its user name,
    password, query or fragment (where a pasted key would be); keys travel in headers,
    which are never recorded."""

    limits: HttpLimits
    base_url: str = ""  # the base the listing asked under: a 404 there may be a missing or extra /v1
    tried: list[Attempt] = field(default_factory=list)

    def on_request(self, request: httpx.Request) -> None:
        url = request.url.copy_with(userinfo=b"", query=None, fragment=None)
        self.tried.append(Attempt(method=request.method, url=str(url)))

    def on_response(self, response: httpx.Response) -> None:
        if self.tried:
            attempt = self.tried[-1]
            attempt.status, attempt.reason_phrase = response.status_code, response.reason_phrase
            attempt.content_type = response.headers.get("content-type", "").split(";", 1)[0].strip()
            attempt.length = response.headers.get("content-length", "")

    def explained(self, exc: ProviderError) -> ProviderError:
        """``exc`` with what was tried added to its message (same class, code and status)."""
        if not self.tried:
            return exc
        cause = _transport_reason(exc, self.limits)
        # Requests that ended alike are named together: "GET a and GET b: refused".
        groups: dict[str, list[str]] = {}
        for attempt in self.tried[:MAX_ATTEMPTS_SHOWN]:
            groups.setdefault(_outcome(attempt, exc=exc, cause=cause), []).append(f"{attempt.method} {attempt.url}")
        lines = [f"{' and '.join(urls)}: {outcome}" for outcome, urls in groups.items()]
        more = len(self.tried) - MAX_ATTEMPTS_SHOWN
        if more > 0:
            lines.append(f"{more} more request{'s' if more > 1 else ''}")
        explained = copy.copy(exc)
        explained.message = f"{exc.message} Tried {'; '.join(lines)}.{_version_path_hint(self.tried, self.base_url)}"
        explained.args = (explained.message,)
        return explained


def _version_path_hint(tried: list[Attempt], base_url: str) -> str:
    """What to try when the listing's own request under ``base_url`` got a 404 and the base's
    path looks wrong for an OpenAI-style API: no ``/v1`` at all, a full endpoint pasted
    (``/v1/chat/completions``), or ``/v1`` twice. "" when the path looks right."""
    base = base_url.rstrip("/")
    found = next((a for a in tried if a.status == 404 and base and a.url.startswith(base + "/")), None)
    if found is None:
        return ""
    parts = urlsplit(base)
    segments = [segment for segment in parts.path.split("/") if segment]
    said = f" The server answered 404 at {found.url}."

    def with_path(path: str) -> str:
        return urlunsplit((parts.scheme, parts.netloc, path, "", ""))

    if "v1" not in segments:
        return f"{said} OpenAI-compatible servers usually serve under /v1 — try {base}/v1."
    if segments[-2:] == ["v1", "v1"]:
        return f"{said} The base URL has /v1 twice — try {with_path('/' + '/'.join(segments[:-1]))}."
    if segments[-1] != "v1":
        cut = "/" + "/".join(segments[:segments.index("v1") + 1])
        return f"{said} The base URL ends at /v1, without the endpoint's own path — try {with_path(cut)}."
    return ""


def _outcome(attempt: Attempt, *, exc: ProviderError, cause: str | None) -> str:
    if attempt.status is None:
        if isinstance(exc, UnsafeURLError):
            return "not contacted (refused by the outbound address rules)"
        return cause or "no answer"
    text = f"HTTP {attempt.status} {attempt.reason_phrase}".rstrip()
    kind = attempt.content_type or "no content type"
    size = f", {int(attempt.length):,} bytes" if attempt.length.isdigit() else ""
    if 200 <= attempt.status < 300 and "json" not in kind:
        return f"{text}, but {kind}{size}, not JSON (is the base URL the API's, e.g. ending in /v1?)"
    return f"{text} ({kind}{size})"


def _transport_reason(exc: BaseException, limits: HttpLimits) -> str | None:
    """Why the connection failed, read from the exception chain (no provider text)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current).lower()
        if isinstance(current, ConnectionRefusedError) or "connection refused" in text:
            return ("the connection was refused: nothing listens at that address and port "
                    "(is the server running, and is the port right?)")
        if isinstance(current, httpx.ConnectTimeout):
            return (f"no connection within {limits.connect_timeout:g} s: the host is unreachable "
                    "or a firewall drops the traffic")
        if isinstance(current, httpx.TimeoutException):
            return f"connected, but no answer within {limits.read_timeout:g} s"
        if isinstance(current, OSError) and current.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return "the host is unreachable from this server"
        if isinstance(current, ssl.SSLError) or "certificate verify failed" in text:
            return "its TLS certificate could not be verified"
        current = current.__cause__ or current.__context__
    return None
