"""Fixtures of the security suite (issue 9, SPEC §11).

People come from tests/conftest.py: alice administers Acme and owns sessions, bob is a
member of Acme, mallory is an outsider with her own space. ``carol`` is a second admin of
Acme, to show that administering a space never opens its members' sessions.
"""
from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.conftest import token_for  # noqa: F401  (the security suite's tests import it from here)

SECRET_KEY_OF_PROVIDER = "sk-live-SECURITY-SUITE-KEY-7781"


@pytest.fixture
def carol(django_user_model, space):
    from core.spaces.models import Membership
    from core.spaces.services import membership_add

    user = django_user_model.objects.create_user(username="carol", password="carol-password-1")
    membership_add(space=space, user=user, role=Membership.Role.ADMIN)
    return user


@pytest.fixture
def api():
    def make(user: Any = None) -> APIClient:
        client = APIClient()
        if user is not None:
            client.force_authenticate(user)
        return client

    return make


def assert_error_shape(response, status: int | None = None) -> dict:
    """``{"error": {"code", "message", "fields"?}}`` and nothing else (SPEC §9)."""
    if status is not None:
        assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) <= {"code", "message", "fields"} and {"code", "message"} <= set(error), error
    assert isinstance(error["code"], str) and error["code"] and isinstance(error["message"], str) and error["message"]
    if "fields" in error:
        assert isinstance(error["fields"], dict) and all(isinstance(v, str) for v in error["fields"].values()), error
    return error


class OutboundGuard:
    """Only loopback is reachable and only ``names`` resolve: a refused URL that slipped
    through the product's guard would show up here, never on the network."""

    def __init__(self, names: dict[str, list[str]]) -> None:
        self.names = names
        self.attempts: list[str] = []
        self.lookups: list[str] = []

    def getaddrinfo(self, host, port, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else str(host)
        self.lookups.append(name)
        try:
            addresses = [str(ipaddress.ip_address(name.strip("[]")))]
        except ValueError:
            addresses = self.names.get(name.lower().rstrip("."))
            if addresses is None:
                try:  # legacy IPv4 spellings the C resolver accepts too: 2852039166, 0xA9FEA9FE, 0251.0376…
                    addresses = [str(ipaddress.IPv4Address(socket.inet_aton(name)))]
                except OSError:
                    addresses = None
        if not addresses:
            raise socket.gaierror(socket.EAI_NONAME, f"{name} is not resolvable in tests")
        infos = []
        for address in addresses:
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            sockaddr = (address, port or 0, 0, 0) if family == socket.AF_INET6 else (address, port or 0)
            infos.append((family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", sockaddr))
        return infos


@pytest.fixture
def outbound(monkeypatch) -> OutboundGuard:
    """Patch name resolution and ``connect``: no test here can reach past 127.0.0.1."""
    guard = OutboundGuard({"localhost": ["127.0.0.1"]})
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def allowed(address) -> bool:
        if isinstance(address, tuple) and address:
            try:
                return ipaddress.ip_address(str(address[0]).split("%")[0]).is_loopback
            except ValueError:
                return False
        return isinstance(address, (str, bytes))  # unix sockets (none expected)

    def connect(sock, address):
        if not allowed(address):
            guard.attempts.append(str(address))
            raise ConnectionRefusedError(f"test guard: no connection to {address!r}")
        return real_connect(sock, address)

    def connect_ex(sock, address):
        if not allowed(address):
            guard.attempts.append(str(address))
            return 111
        return real_connect_ex(sock, address)

    monkeypatch.setattr(socket, "getaddrinfo", guard.getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    return guard
