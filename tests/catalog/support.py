"""Shared constants and helpers of the catalog tests."""
from __future__ import annotations

from models_catalog.http import HttpLimits

# Small bounds keep the time-out tests fast (the whole suite must stay well under 30 s).
FAST = HttpLimits(connect_timeout=1.0, read_timeout=0.5, write_timeout=1.0, pool_timeout=1.0,
                  total_timeout=5.0, max_response_bytes=256 * 1024)
API_KEY = "sk-test-SECRET-1234567890"
OFFICIAL_IP = "93.184.216.34"  # a public address the guard accepts; the forwarding transport ignores it
SECRET_BODY = "PROVIDER-BODY-SECRET-do-not-echo"


def public_resolver(host: str, port: int) -> list[str]:
    """DNS for tests that pretend to call an official endpoint (see forwarding_transport)."""
    return [OFFICIAL_IP]
