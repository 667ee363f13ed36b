"""Who is calling: the address every rate limit keys on (SPEC §11).

The peer of the TCP connection is the client, unless that peer is one of the reverse
proxies listed in ``AGENTLOOM_TRUSTED_PROXIES``. Then ``X-Forwarded-For`` is read from the
right — each proxy appends the address it saw — skipping trusted proxies, and the first
address no trusted proxy vouches for is the client. Anything a client writes into the
header itself sits to the left of that and is never reached. With no proxy configured
the header is ignored entirely, so a client cannot choose its own rate-limit bucket.
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


def client_address(request) -> str:
    """The client's address, as far as this server can vouch for it."""
    peer = str(request.META.get("REMOTE_ADDR") or "")
    networks = _networks(tuple(settings.AGENTLOOM_TRUSTED_PROXIES))
    if not networks or not _trusted(peer, networks):
        return peer
    hops = [hop.strip() for hop in str(request.META.get("HTTP_X_FORWARDED_FOR") or "").split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, networks):
            return hop
    return hops[0] if hops else peer


class ClientThrottle(SimpleRateThrottle):
    """DRF's rate throttle, identifying anonymous callers by :func:`client_address`."""

    def get_ident(self, request) -> str:
        return client_address(request)
