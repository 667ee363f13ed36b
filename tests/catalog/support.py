"""Shared constants and helpers of the catalog tests."""
from __future__ import annotations

from models_catalog.http import HttpLimits

# Bounds for calls that are not about time: roomy, because a busy 2-core machine can pause a
# fake server for seconds while it checks a long transcript. A small byte cap keeps the size
# tests small.
FAST = HttpLimits(connect_timeout=10.0, read_timeout=30.0, write_timeout=10.0, pool_timeout=10.0,
                  total_timeout=60.0, max_response_bytes=256 * 1024)
# The one test of a server that never answers waits for this read time-out.
HANGING = HttpLimits(connect_timeout=10.0, read_timeout=0.5, write_timeout=10.0, pool_timeout=10.0,
                     total_timeout=60.0, max_response_bytes=256 * 1024)
API_KEY = "sk-test-SECRET-1234567890"
OFFICIAL_IP = "93.184.216.34"  # a public address the guard accepts; the forwarding transport ignores it
SECRET_BODY = "PROVIDER-BODY-SECRET-do-not-echo"


def public_resolver(host: str, port: int) -> list[str]:
    """DNS for tests that pretend to call an official endpoint (see forwarding_transport)."""
    return [OFFICIAL_IP]
