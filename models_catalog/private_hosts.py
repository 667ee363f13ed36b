"""The operator's list of private endpoints (``AGENTLOOM_PRIVATE_ENDPOINT_HOSTS``).

When the operator lists hosts, the URL guard (``models_catalog.http.check_url``, through
``private_host_problem``) lets a private, loopback or reserved address through only when the
name in the URL or the address it resolved to is on the list; it takes the list where it
takes the private-endpoint switch. No Django here: settings parse the variable with
:func:`private_hosts_parse` and hand the list to every caller of the guard.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class PrivateHosts:
    """The operator's list of the private endpoints that may be reached
    (``AGENTLOOM_PRIVATE_ENDPOINT_HOSTS``): host names (``ollama.lan``, or ``*.lan`` for every
    name under it) and addresses or networks (``10.0.0.7``, ``10.1.0.0/16``). Passed where
    ``allow_private`` is: private endpoints are on, but a private, loopback or reserved
    address is allowed only when the name typed or the address it resolved to is listed.
    Public addresses are not affected; link-local and metadata ones stay refused."""

    names: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()  # ".lan" for "*.lan"
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    def allows(self, host: str, address: str) -> bool:
        host = host.rstrip(".").lower()
        if host in self.names or any(host.endswith(suffix) for suffix in self.suffixes):
            return True
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip.version == network.version and ip in network for network in self.networks)


_HOST_NAME = re.compile(r"(?:\*\.)?(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


def private_hosts_parse(entries: list[str]) -> PrivateHosts:
    """The list from its entries; ValueError naming the first entry that is neither a host
    name (``*.`` allowed in front) nor an address or network."""
    names, suffixes, networks = set(), [], []
    for entry in entries:
        item = entry.strip().rstrip(".").lower()
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
            continue
        except ValueError:
            pass
        if not _HOST_NAME.fullmatch(item):
            raise ValueError(entry)
        if item.startswith("*."):
            suffixes.append(item[1:])
        else:
            names.add(item)
    return PrivateHosts(names=frozenset(names), suffixes=tuple(suffixes), networks=tuple(networks))


# What every caller of the URL guard is handed (settings.ALLOW_PRIVATE_MODEL_ENDPOINTS): the
# operator's switch, or, when the operator lists hosts, that list (private endpoints on).
AllowPrivate = bool | PrivateHosts
