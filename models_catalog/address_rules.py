"""Which addresses the way out may reach (CAT-5, STYLE 12): cloud metadata services and
link-local addresses never, private, loopback and reserved ones only when the operator
allows self-hosted endpoints (and, with a list, only the listed ones), and an IPv4
address carried inside IPv6 judged as the address it carries. ``models_catalog.http``
asks these rules of every address it resolves before it connects. Pure: no I/O.
"""
from __future__ import annotations

import ipaddress

from models_catalog.private_hosts import AllowPrivate, PrivateHosts

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
