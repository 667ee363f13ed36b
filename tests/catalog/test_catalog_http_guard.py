"""The secure HTTP client and URL guard (CAT-5, LOOP-4 http_fetch, SPEC §11 no SSRF)."""
from __future__ import annotations

import pytest

from models_catalog.discovery import discover_models
from models_catalog.errors import ProviderUnavailableError, ResponseTooLargeError, UnsafeURLError
from models_catalog.http import HttpLimits, build_client, check_url, fetch_url, request_json
from tests.catalog.support import FAST
from tests.fakes.fake_provider import JSONResponse, RawResponse, models_list, redirect, route

DEAD_PROXY = "http://127.0.0.1:9"  # nothing listens there: a call through it would fail


def test_cat5_proxy_environment_variables_are_ignored(fake, monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, DEAD_PROXY)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    fake.handler = route({"GET /v1/models": models_list(["m"])})
    result = discover_models(provider="openai_compatible", base_url=fake.base_url, allow_private=True, limits=FAST)
    assert [m.id for m in result.models] == ["m"]
    assert fake.requests[0].path == "/v1/models"  # reached directly, not via a proxy


def test_cat5_a_302_is_not_followed(fake):
    fake.handler = route({"GET /v1/models": redirect("http://169.254.169.254/latest/meta-data/")})
    with pytest.raises(Exception) as caught:
        discover_models(provider="openai_compatible", base_url=fake.base_url, allow_private=True, limits=FAST)
    assert getattr(caught.value, "code", None) == "redirect_refused"
    assert len(fake.requests) == 2  # /v1/models and the /api/tags probe; the Location was never fetched
    assert all(r.path != "/latest/meta-data/" for r in fake.requests)


def test_cat5_an_oversized_body_is_refused_while_reading(fake):
    limits = HttpLimits(read_timeout=30.0, total_timeout=60.0, max_response_bytes=1_000)
    fake.handler = lambda r: RawResponse(b'{"data": [' + b" " * 5_000 + b"]}", content_length=False)
    with build_client(allow_private=True, limits=limits) as client, pytest.raises(ResponseTooLargeError):
        request_json(client, "GET", fake.base_url + "/models", limits=limits)


def test_cat5_a_declared_oversized_body_is_refused_before_reading(fake):
    limits = HttpLimits(max_response_bytes=1_000)
    fake.handler = lambda r: JSONResponse({"data": ["x" * 5_000]})
    with build_client(allow_private=True, limits=limits) as client, pytest.raises(ResponseTooLargeError):
        request_json(client, "GET", fake.base_url + "/models", limits=limits)


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://169.254.10.10:8080/",
    "http://[fe80::1]/",
    "http://[::ffff:169.254.169.254]/",
    "http://100.100.100.200/",
])
def test_cat5_link_local_and_metadata_are_refused_even_with_private_allowed(url):
    with pytest.raises(UnsafeURLError):
        check_url(url, allow_private=True)


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:11434/v1", "http://localhost:8000/v1", "http://10.1.2.3/v1", "http://192.168.1.5/v1",
    "http://[::1]:8000/v1", "http://0.0.0.0:8000/",
])
def test_cat5_private_and_loopback_are_refused_without_the_switch(url):
    with pytest.raises(UnsafeURLError):
        check_url(url, allow_private=False)


def test_cat5_loopback_is_refused_on_the_wire_without_allow_private(fake):
    with pytest.raises(UnsafeURLError):
        discover_models(provider="openai_compatible", base_url=fake.base_url, limits=FAST)
    assert fake.requests == []


@pytest.mark.parametrize("url", [
    "ftp://example.com/", "file:///etc/passwd", "gopher://example.com/", "http://user:pw@example.com/",
    "http://example.com:22/", "http://example.com:6379/",
])
def test_cat5_bad_schemes_credentials_and_service_ports_are_refused(url):
    with pytest.raises(UnsafeURLError):
        check_url(url, allow_private=True, resolver=lambda host, port: ["93.184.216.34"])


def test_cat5_a_name_with_any_refused_address_is_refused():
    with pytest.raises(UnsafeURLError):
        check_url("https://rebind.example/", resolver=lambda host, port: ["93.184.216.34", "10.0.0.5"])


def test_cat5_the_connection_is_pinned_to_the_checked_address(fake):
    # A name that resolves (for the guard) to loopback: the request must go to that
    # address, with the original name kept in the Host header.
    fake.handler = lambda r: JSONResponse({"ok": True})
    url = f"http://provider.test:{fake.port}/v1/models"
    with build_client(allow_private=True, resolver=lambda host, port: ["127.0.0.1"]) as client:
        assert request_json(client, "GET", url) == {"ok": True}
    assert fake.requests[0].headers["host"] == f"provider.test:{fake.port}"


def test_an_unresolvable_host_is_a_transient_error():
    def no_dns(host, port):
        raise OSError("no such host")

    with pytest.raises(ProviderUnavailableError):
        check_url("https://nowhere.invalid/", resolver=no_dns)


def test_loop4_fetch_url_is_bounded_and_reports_redirects(fake):
    limits = HttpLimits(read_timeout=30.0, total_timeout=60.0, max_response_bytes=100)
    fake.handler = route({
        "GET /big": RawResponse(b"a" * 1_000, headers={"Content-Type": "text/plain"}, content_length=False),
        "GET /moved": redirect("http://example.com/elsewhere", status=301),
    })
    result = fetch_url(fake.url + "/big", allow_private=True, limits=limits)
    assert (result.status, len(result.body), result.truncated) == (200, 100, True)
    moved = fetch_url(fake.url + "/moved", allow_private=True, limits=limits)
    assert (moved.status, moved.redirect_location) == (301, "http://example.com/elsewhere")
    with pytest.raises(ResponseTooLargeError):
        fetch_url(fake.url + "/big", allow_private=True, limits=limits, truncate=False)


def test_loop4_fetch_url_refuses_private_addresses_by_default(fake):
    with pytest.raises(UnsafeURLError):
        fetch_url(fake.url + "/big")
    assert fake.requests == []


def test_cat5_a_pinned_name_falls_back_to_its_next_checked_address(fake):
    # "localhost" often resolves to ::1 first while a self-hosted server listens on IPv4 only.
    fake.handler = lambda r: JSONResponse({"ok": True})
    url = f"http://localhost:{fake.port}/v1/models"
    with build_client(allow_private=True, resolver=lambda host, port: ["::1", "127.0.0.1"]) as client:
        assert request_json(client, "GET", url) == {"ok": True}
