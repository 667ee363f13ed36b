"""Who is calling: the address every rate limit keys on (SPEC §11).

The peer of the TCP connection is the client, unless that peer is one of the reverse
proxies listed in ``AGENTLOOM_TRUSTED_PROXIES``. Then ``X-Forwarded-For`` is read from the
right — each proxy appends the address it saw — skipping trusted proxies, and the first
address no trusted proxy vouches for is the client. Anything a client writes into the
header itself sits to the left of that and is never reached. With no proxy configured
the header is ignored entirely, so a client cannot choose its own rate-limit bucket.

Bounds on what one client holds at once (connections, requests in flight: issue #44)
count by :func:`address_bucket`: an IPv4 address, or the /64 network of an IPv6 one.
"""
from __future__ import annotations

import functools
import ipaddress

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@functools.lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


def _trusted(address: str, networks: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip.version == network.version and ip in network for network in networks)


def trusted_proxy(address: str) -> bool:
    """Whether ``address`` is one of ``AGENTLOOM_TRUSTED_PROXIES``: it speaks for many clients."""
    entries = settings.AGENTLOOM_TRUSTED_PROXIES
    return bool(entries) and _trusted(address, _networks(tuple(entries)))


def client_of(peer: str, forwarded_for: str) -> str:
    """The client behind a connection from ``peer`` that sent ``X-Forwarded-For: forwarded_for``."""
    networks = _networks(tuple(settings.AGENTLOOM_TRUSTED_PROXIES))
    if not networks or not _trusted(peer, networks):
        return peer
    hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, networks):
            return hop
    return hops[0] if hops else peer


def client_address(request) -> str:
    """The client's address, as far as this server can vouch for it."""
    return client_of(str(request.META.get("REMOTE_ADDR") or ""), str(request.META.get("HTTP_X_FORWARDED_FOR") or ""))


@functools.lru_cache(maxsize=4096)
def _ipv6_bucket(address: str) -> str:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def address_bucket(address: str) -> str:
    """One client, for bounds on what it may hold at once: an IPv4 address as it is, an IPv6
    one as its /64 network. A single IPv6 host is commonly handed a whole /64 (2^64
    addresses), so counting single addresses would bound nothing; a /64 is one site's LAN."""
    return _ipv6_bucket(address) if ":" in address else address


class ClientThrottle(SimpleRateThrottle):
    """DRF's rate throttle, identifying anonymous callers by :func:`client_address`."""

    def get_ident(self, request) -> str:
        return client_address(request)
