"""The one secure way out to the network (CAT-5, LOOP-4 ``http_fetch``, STYLE 12).

Every outbound call of the catalog, the chat client and the ``http_fetch`` tool goes
through :func:`build_client`, which gives an ``httpx.Client`` that

* ignores proxy environment variables (``trust_env=False``): a stray ``HTTPS_PROXY``
  must not route provider keys through somebody else's machine;
* never follows redirects: a 3xx could point at an internal address after the guard
  approved the first URL;
* has bounded connect / read / write / pool time-outs; callers add a wall-clock deadline
  and a byte bound while reading (:func:`read_limited`), so a trickling or huge answer
  cannot hold a worker or its memory;
* sends every request through :class:`GuardedTransport`, which checks scheme, port and
  credentials, resolves the host, refuses link-local, site-local and cloud-metadata
  addresses always and private / loopback / reserved ones unless ``allow_private`` is set
  — an IPv4 address carried inside IPv6 (mapped, compatible, NAT64, 6to4, Teredo) is
  judged as the address it carries —, and then
  *pins* the connection to the address it checked (the URL is rewritten to the IP, the
  ``Host`` header and TLS SNI keep the name), so a DNS answer that changes between check
  and connect (DNS rebinding) cannot reach a refused address.

No Django here: the "allow private endpoints" setting is passed in by the caller.
"""
from __future__ import annotations

import functools
import ipaddress
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from context.surrogates import json_loads_clean
from models_catalog.errors import (
    ProviderError,
    ProviderUnavailableError,
    ResponseTooLargeError,
    UnsafeURLError,
    error_from_status,
)
from models_catalog.private_hosts import AllowPrivate, PrivateHosts
from models_catalog.url_syntax import MalformedURL, url_parse

Resolver = Callable[[str, int], list[str]]
USER_AGENT = "AgentLoom/0.1 (+self-hosted)"

# Always refused, whatever the admin switch says: instance metadata services hand out
# cloud credentials to anything that can reach them.
METADATA_HOSTNAMES = frozenset(
    {"metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal"}
)
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean…
        "169.254.170.2",  # AWS ECS task credentials
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
        "168.63.129.16",  # Azure wire server (a public address, hence listed)
    )
)
_SHARED_ADDRESS_SPACE = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT / some LANs
# IPv6 ranges that carry an IPv4 address a gateway or the host's own stack translates back
# to: an IPv4 address refused in the clear must be refused in every one of these spellings.
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated, still parsed by stacks
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # SIIT (RFC 2765)
_NAT64_WELL_KNOWN = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052
_NAT64_LOCAL_USE = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: any RFC 6052 prefix length from /48
_SITE_LOCAL = ipaddress.ip_network("fec0::/10")  # deprecated, but routed inside sites that still use it
# Ports of well-known non-HTTP services: an HTTP request there is an attack, not a model call.
DENIED_PORTS = frozenset({0, 19, 21, 22, 23, 25, 53, 110, 111, 135, 139, 143, 445, 465, 587, 993, 995,
                          2375, 2376, 2379, 3306, 5432, 6379, 11211, 27017})


@dataclass(frozen=True)
class HttpLimits:
    """Time and size bounds of one kind of call. Tests shrink them to stay fast."""

    connect_timeout: float = 5.0
    read_timeout: float = 60.0  # between two bytes; a stream may pause while the model thinks
    write_timeout: float = 10.0
    pool_timeout: float = 5.0
    total_timeout: float = 300.0  # wall clock for the whole response, checked while reading
    max_response_bytes: int = 8 * 1024 * 1024

    def httpx_timeout(self) -> httpx.Timeout:
        return httpx.Timeout(
            connect=self.connect_timeout, read=self.read_timeout, write=self.write_timeout, pool=self.pool_timeout
        )


DISCOVERY_LIMITS = HttpLimits(read_timeout=20.0, total_timeout=30.0, max_response_bytes=8 * 1024 * 1024)
CHAT_LIMITS = HttpLimits(read_timeout=120.0, total_timeout=600.0, max_response_bytes=32 * 1024 * 1024)
FETCH_LIMITS = HttpLimits(read_timeout=10.0, total_timeout=20.0, max_response_bytes=2 * 1024 * 1024)


@dataclass(frozen=True)
class GuardedTarget:
    """A URL the guard accepted, with the addresses it checked (the first is used)."""

    url: str
    scheme: str
    host: str
    port: int
    addresses: tuple[str, ...] = field(default_factory=tuple)


def system_resolver(host: str, port: int) -> list[str]:
    """All addresses of ``host`` (A and AAAA), in the system resolver's order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    seen: list[str] = []
    for info in infos:
        addr = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 zone id
        if addr not in seen:
            seen.append(addr)
    return seen


def _bits(value: int, first: int, last: int) -> int:
    """Bits ``first``..``last`` (inclusive, 0 = the most significant) of a 128-bit address."""
    return (value >> (127 - last)) & ((1 << (last - first + 1)) - 1)


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """Every IPv4 address ``ip`` may stand for once translated: IPv4-mapped, -compatible and
    -translated, NAT64 (the well-known prefix, and each RFC 6052 position inside the
    local-use /48), 6to4, and both Teredo fields (the client's is stored inverted)."""
    value = int(ip)
    found: list[int] = []
    if ip.ipv4_mapped is not None or ip in _IPV4_TRANSLATED or ip in _NAT64_WELL_KNOWN:
        found.append(_bits(value, 96, 127))
    elif ip in _IPV4_COMPATIBLE and value > 1:  # :: and ::1 are not IPv4 addresses
        found.append(_bits(value, 96, 127))
    elif ip in _NAT64_LOCAL_USE:
        found += [
            (_bits(value, 48, 63) << 16) | _bits(value, 72, 87),  # /48, around the u-octet (bits 64-71)
            (_bits(value, 56, 63) << 24) | _bits(value, 72, 95),  # /56
            _bits(value, 72, 103),  # /64
            _bits(value, 96, 127),  # /96
        ]
    elif ip.sixtofour is not None:
        found.append(int(ip.sixtofour))
    elif ip.teredo is not None:
        found += [int(address) for address in ip.teredo]
    return [ipaddress.IPv4Address(number) for number in found]


def address_problem(address: str, *, allow_private: bool) -> str | None:
    """Why ``address`` may not be contacted, or None when it may.

    An IPv6 address that carries an IPv4 one is judged by what it carries as well:
    ``64:ff9b::a9fe:a9fe`` reaches the metadata service through any NAT64 gateway.
    """
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return "not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _SITE_LOCAL:
            return "a site-local address"
        for inner in embedded_ipv4(ip):
            problem = address_problem(str(inner), allow_private=allow_private)
            if problem:
                return problem
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped  # judged as the IPv4 address it is
        elif ip in _NAT64_LOCAL_USE and not allow_private:
            return "a private, loopback or reserved address (allowed only when private endpoints are enabled)"
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_unspecified or ip.is_multicast:
        return "not a unicast address"
    if ip.is_global and ip not in _SHARED_ADDRESS_SPACE:
        return None
    if allow_private and (ip.is_loopback or (ip.is_private or ip in _SHARED_ADDRESS_SPACE) and not ip.is_reserved):
        return None  # ::1 sits inside the reserved ::/8, hence loopback is checked first
    return "a private, loopback or reserved address (allowed only when private endpoints are enabled)"


def private_host_problem(host: str, address: str, allow_private: AllowPrivate) -> str | None:
    """Why a private ``address`` of ``host`` is refused by the operator's list, or None (no
    list, a public address, or a listed one). Called for addresses ``address_problem`` let
    through."""
    if not isinstance(allow_private, PrivateHosts) or address_problem(address, allow_private=False) is None:
        return None
    if allow_private.allows(host, address):
        return None
    return "a private address that is not on the operator's list of private endpoints"


def check_url(url: str | httpx.URL, *, allow_private: AllowPrivate = False,
              resolver: Resolver | None = None) -> GuardedTarget:
    """Validate ``url`` and resolve its host; raise :class:`UnsafeURLError` if refused."""
    try:
        parsed = url_parse(url)
    except MalformedURL as exc:
        raise UnsafeURLError(f"The URL is not valid: {exc.message}.") from None
    if parsed.userinfo:
        raise UnsafeURLError("URLs with a user name or password are not allowed; use the API key field.")
    host = (parsed.host or "").rstrip(".").lower()
    if not host:
        raise UnsafeURLError("The URL has no host.")
    if host in METADATA_HOSTNAMES:
        raise UnsafeURLError("The URL points at a cloud metadata service, which is never contacted.")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    if port in DENIED_PORTS:
        raise UnsafeURLError(f"Port {port} belongs to a non-HTTP service and is not allowed.")
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:
        try:
            addresses = (resolver or system_resolver)(host, port)
        except (OSError, UnicodeError):
            raise ProviderUnavailableError(f"The host name {host!r} could not be resolved.") from None
    if not addresses:
        raise ProviderUnavailableError(f"The host name {host!r} could not be resolved.")
    for address in addresses:
        problem = address_problem(address, allow_private=bool(allow_private)) or private_host_problem(
            host, address, allow_private)
        if problem:
            # Any refused address refuses the name: a mixed answer is a rebinding trick.
            raise UnsafeURLError(f"The host {host!r} points to {problem}, which is refused.")
    return GuardedTarget(url=str(parsed), scheme=parsed.scheme, host=host, port=port, addresses=tuple(addresses))


class GuardedTransport(httpx.BaseTransport):
    """Checks every request with :func:`check_url` and pins it to the checked address."""

    def __init__(self, inner: httpx.BaseTransport, *, allow_private: AllowPrivate,
                 resolver: Resolver | None = None) -> None:
        self._inner = inner
        self._allow_private = allow_private
        self._resolver = resolver

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        target = check_url(request.url, allow_private=self._allow_private, resolver=self._resolver)
        original_host = request.url.host
        # The Host header was set from the original URL by the client; keep it.
        request.headers.setdefault("Host", request.url.netloc.decode("ascii"))
        last_error: httpx.ConnectError | None = None
        # Every address was checked; try them in order so "localhost" → ::1 then
        # 127.0.0.1 still reaches a server that listens on IPv4 only.
        for address in target.addresses:
            if address != original_host:
                if target.scheme == "https":
                    request.extensions = {**request.extensions, "sni_hostname": target.host}
                request.url = request.url.copy_with(host=address)
            try:
                return self._inner.handle_request(request)
            except httpx.ConnectError as exc:
                last_error = exc
        assert last_error is not None
        raise last_error

    def close(self) -> None:
        self._inner.close()


@functools.lru_cache(maxsize=1)
def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context for the process: loading the CA bundle costs ~40 ms,
    too much to pay on every model call. Certificates and host names are still checked."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def build_client(
    *,
    allow_private: AllowPrivate = False,
    limits: HttpLimits | None = None,
    transport: httpx.BaseTransport | None = None,
    resolver: Resolver | None = None,
    headers: Mapping[str, str] | None = None,
) -> httpx.Client:
    """An ``httpx.Client`` with every CAT-5 property. Use it as a context manager.

    ``transport`` replaces the network transport (tests, benchmarks) but is still
    wrapped in the guard, so no caller can opt out of the URL checks by accident.
    """
    limits = limits or HttpLimits()
    inner = transport or httpx.HTTPTransport(retries=0, verify=_tls_context())
    return httpx.Client(
        transport=GuardedTransport(inner, allow_private=allow_private, resolver=resolver),
        trust_env=False,
        follow_redirects=False,
        timeout=limits.httpx_timeout(),
        headers={"User-Agent": USER_AGENT, **(headers or {})},
    )


def read_bounded(response: httpx.Response, *, max_bytes: int, deadline: float | None = None) -> tuple[bytes, bool]:
    """Read at most ``max_bytes`` of a streamed body; return it and whether there was more.

    ``deadline`` is a ``time.monotonic()`` value. The bound is enforced while reading,
    so a lying or missing Content-Length cannot make us buffer more than the bound.
    """
    chunks: list[bytes] = []
    total = 0
    for chunk in response.iter_bytes():
        if deadline is not None and time.monotonic() > deadline:
            raise ProviderUnavailableError("The response took longer than the time limit.")
        if total + len(chunk) > max_bytes:
            chunks.append(chunk[: max_bytes - total])
            return b"".join(chunks), True
        total += len(chunk)
        chunks.append(chunk)
    return b"".join(chunks), False


def read_limited(response: httpx.Response, *, max_bytes: int, deadline: float | None = None) -> bytes:
    """The whole body, or :class:`ResponseTooLargeError` past ``max_bytes``."""
    declared = response.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise ResponseTooLargeError(f"The response is larger than the {max_bytes:,}-byte limit.")
    body, overflowed = read_bounded(response, max_bytes=max_bytes, deadline=deadline)
    if overflowed:
        raise ResponseTooLargeError(f"The response is larger than the {max_bytes:,}-byte limit.")
    return body


def transport_error(exc: httpx.HTTPError, *, provider_label: str = "The model provider") -> ProviderError:
    """Translate an httpx failure into the hierarchy, with a message free of details."""
    if isinstance(exc, httpx.TimeoutException):
        return ProviderUnavailableError(f"{provider_label} did not answer in time.")
    if isinstance(exc, httpx.ConnectError):
        return ProviderUnavailableError(f"Could not connect to {provider_label.lower().removeprefix('the ')}.")
    if isinstance(exc, httpx.UnsupportedProtocol):
        return UnsafeURLError("Only http and https URLs are allowed.")
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
        return ProviderUnavailableError(f"The connection to {provider_label.lower().removeprefix('the ')} was cut.")
    return ProviderUnavailableError(f"{provider_label} could not be reached.")


def request_json(
    client: httpx.Client,
    method: str,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    json_body: Any = None,
    limits: HttpLimits | None = None,
    provider_label: str = "The model provider",
) -> Any:
    """Send one request and return its parsed JSON body; non-2xx raise mapped errors."""
    limits = limits or HttpLimits()
    deadline = time.monotonic() + limits.total_timeout
    try:
        with client.stream(method, url, headers=dict(headers or {}), json=json_body) as response:
            if not 200 <= response.status_code < 300:
                body = _read_for_classification(response)
                raise error_from_status(
                    response.status_code, headers=response.headers, body=body, provider_label=provider_label
                )
            raw = read_limited(response, max_bytes=limits.max_response_bytes, deadline=deadline)
    except httpx.HTTPError as exc:
        raise transport_error(exc, provider_label=provider_label) from exc
    try:
        return json_loads_clean(raw)  # model names and fields land in plain columns and pages
    except ValueError:
        raise ProviderUnavailableError(
            f"{provider_label} answered with something that is not JSON. Check the base URL."
        ) from None


def _read_for_classification(response: httpx.Response, limit: int = 64 * 1024) -> bytes:
    """At most ``limit`` bytes of an error body: enough to classify, never echoed."""
    data = b""
    try:
        for chunk in response.iter_bytes():
            data += chunk
            if len(data) >= limit:
                break
    except httpx.HTTPError:
        pass
    return data[:limit]


read_error_body = _read_for_classification


@dataclass(frozen=True)
class FetchResult:
    """What :func:`fetch_url` got: the tool turns ``body`` into text (not our job)."""

    url: str
    status: int
    content_type: str
    body: bytes
    truncated: bool = False
    redirect_location: str | None = None


def fetch_url(
    url: str,
    *,
    allow_private: AllowPrivate = False,
    limits: HttpLimits = FETCH_LIMITS,
    headers: Mapping[str, str] | None = None,
    truncate: bool = True,
    transport: httpx.BaseTransport | None = None,
    resolver: Resolver | None = None,
) -> FetchResult:
    """A guarded, bounded GET for the ``http_fetch`` tool (LOOP-4).

    Redirects are not followed but reported in ``redirect_location`` so the tool can
    decide to fetch that URL (guarded again). With ``truncate`` an oversized body is
    cut at the bound and flagged; without it :class:`ResponseTooLargeError` is raised.
    """
    deadline = time.monotonic() + limits.total_timeout
    with build_client(allow_private=allow_private, limits=limits, transport=transport, resolver=resolver) as client:
        try:
            with client.stream("GET", url, headers=dict(headers or {})) as response:
                body, truncated = read_bounded(response, max_bytes=limits.max_response_bytes, deadline=deadline)
                if truncated and not truncate:
                    raise ResponseTooLargeError(
                        f"The page is larger than the {limits.max_response_bytes:,}-byte limit."
                    )
                location = response.headers.get("location") if 300 <= response.status_code < 400 else None
                return FetchResult(
                    url=url,
                    status=response.status_code,
                    content_type=response.headers.get("content-type", ""),
                    body=body,
                    truncated=truncated,
                    redirect_location=location,
                )
        except httpx.HTTPError as exc:
            raise transport_error(exc, provider_label="The web site") from exc
