"""What a failure to reach an address may tell, and to whom (SPEC §11: the private network is no map).

Discovery, the console's Test connection and a tool server's registration call a URL a
space admin typed. Had each failure said how it ended — the name does not resolve or
resolves to a refused address, nothing listens at the port, no answer in time, HTTP 404 or
401, an answer that is not JSON or not the protocol — any space admin could map which hosts
and ports are alive behind the firewall, one request at a time, by reading the words, the
status or the code. So a person who is not an operator (staff) gets one answer for every
such failure: the same message, status (400) and code (``unreachable``), naming the URL
field. Operators read the details, and the details always go to the log (``agentloom.catalog``
and ``toolservers`` loggers, never a key or a header value).

What the input alone decides is said to everyone, since it tells nothing about the network:
a scheme, a port of a non-HTTP service, a user name or password in the URL, a metadata host
name, a literal address that is refused, a missing key. So is everything at a provider's
official endpoint (``api.openai.com`` …): it is public and fixed, so a refused key there
still says so to every space admin.
"""
from __future__ import annotations

from models_catalog.errors import ProviderError, ProviderUnavailableError, ResponseTooLargeError, UnsafeURLError
from models_catalog.http import check_url
from models_catalog.manifest import load_manifest
from models_catalog.private_hosts import AllowPrivate
from models_catalog.providers import find_provider

UNREACHED_CODE = "unreachable"
UNREACHED_MODELS = ("No working model server was reached at this base URL. Check the URL and the API key; if "
                    "both are right, an operator can read why in the server's log.")
UNREACHED_TOOLS = ("No working tool server was reached at this URL. Check the URL and the headers; if both "
                   "are right, an operator can read why in the server's log.")


class _NoLookup(Exception):
    """Raised instead of resolving a name: what the guard decides without DNS is the input's."""


def _no_lookup(host: str, port: int) -> list[str]:
    raise _NoLookup()


def refused_by_input(url: str, *, allow_private: AllowPrivate) -> bool:
    """Whether the URL guard refuses ``url`` by what it spells alone, before any name is
    looked up: its scheme, port, credentials, a metadata name, a literal address refused."""
    try:
        check_url(url, allow_private=allow_private, resolver=_no_lookup)
    except _NoLookup:
        return False
    except UnsafeURLError:
        return True
    except ProviderError:  # nothing else is raised before a lookup; a new kind is the network's
        return False
    return False


def official_endpoint(*, provider: str, base_url: str | None) -> bool:
    """Whether discovery goes to the provider's own public endpoint (none typed: its default)."""
    spec = find_provider(provider)
    entered = (base_url or (spec.default_base_url if spec is not None else "") or "").strip()
    if spec is None or not entered:
        return False
    manifest = load_manifest()
    return any(manifest.endpoint_provider(form) is not None for form in {entered, spec.base_url_form(entered)})


def discovery_failure_is_the_networks(exc: ProviderError, *, url: str, allow_private: AllowPrivate) -> bool:
    """Whether a discovery failure's words depend on what answered at ``url`` (or whether
    anything did): an HTTP status, a connection or answer that failed, an address the name
    resolved to. Errors raised before any request — a missing key or base URL, a URL the
    guard refuses by its spelling — are the input's."""
    if isinstance(exc, UnsafeURLError):
        return not refused_by_input(url, allow_private=allow_private)
    return exc.status is not None or isinstance(exc, (ProviderUnavailableError, ResponseTooLargeError))
