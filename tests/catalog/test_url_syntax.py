"""One reading of a typed URL (issue #44 item 9): every malformed host or port is a
``MalformedURL`` saying what to fix, never an exception from deeper in httpx or idna.

Plain functions, literal inputs: no database, no network.
"""
from __future__ import annotations

import httpx
import pytest

from models_catalog.errors import UnsafeURLError, error_from_payload
from models_catalog.http import check_url
from models_catalog.manifest import normalise_base_url
from models_catalog.providers.model_lists import positive_int
from models_catalog.selectors import effective_base_url
from models_catalog.url_syntax import MalformedURL, url_parse

MALFORMED = {
    "http://xn--/v1": "international domain name",  # httpx parses it; reading .host raised IDNAError
    "http://xn--a.example/v1": "international domain name",  # an A-label that is no Punycode
    "http://\u2100.example/": "international domain name",  # a character IDNA refuses
    "http://[abc]/v1": "IPv6",
    "http://models.example:0x10/v1": "port",
    "http://models.example:1:2/v1": "port",  # a second port
    "http://models.example:-1/v1": "port",  # httpx reads it as -1
    "http://[::1]:99999/v1": "port",  # …and this as 99999
    "http://models.example:0/v1": "port",
    "http:///v1": "no host",
    "http://%zz/v1": "letters, digits",  # percent signs kept as a host name
    "http://mod els.example/": "letters, digits",
    "http://mo\x00dels.example/": "control characters",
    "http://" + "a" * 64 + ".example/": "longer than 63",
    "http://" + "a." * 127 + "example/": "longer than 253",
    "http://models..example/": "empty part",
    "http://.example/": "empty part",
    "http://256.1.1.1/": "IPv4",
    "http://models.example/\ud800": "cannot be encoded",
    "ftp://models.example/": "http:// and https://",
}


@pytest.mark.parametrize("url, says", MALFORMED.items(), ids=[repr(u)[:40] for u in MALFORMED])
def test_a_malformed_url_is_one_error_that_says_what_to_fix_and_not_the_url(url, says):
    with pytest.raises(MalformedURL) as raised:
        url_parse(url)
    assert says in raised.value.message
    assert url not in raised.value.message  # a key pasted into the field never comes back


@pytest.mark.parametrize("url, host, port", [
    ("https://api.openai.com/v1", "api.openai.com", None),
    ("http://127.0.0.1:11434/v1", "127.0.0.1", 11434),
    ("http://[::1]:8080/v1", "::1", 8080),
    ("http://ollama_box:11434", "ollama_box", 11434),  # a container name
    ("http://bücher.example/", "bücher.example", None),
    ("http://xn--bcher-kva.example/", "bücher.example", None),
    ("http://localhost./v1", "localhost.", None),  # the root's dot
    ("http://2852039166/", "2852039166", None),  # a legacy IPv4 spelling: syntax, the guard judges it
    ("HTTPS://API.EXAMPLE.COM:443/v1", "api.example.com", 443),
])
def test_a_usable_url_reads_whole(url, host, port):
    parsed = url_parse(url)
    assert (parsed.host, parsed.port) == (host, port)


def test_an_httpx_url_is_read_the_same_way():
    assert url_parse(httpx.URL("http://127.0.0.1:9/v1")).port == 9
    with pytest.raises(MalformedURL):
        url_parse(httpx.URL("http://xn--/v1"))


@pytest.mark.parametrize("url", ["http://xn--/v1", "http://[abc]/v1", "http://h:0x10/v1", "http://h:1:2/",
                                 "http://%zz/", "http://h:-1/"])
def test_the_outbound_guard_refuses_a_malformed_url_as_unsafe(url):
    with pytest.raises(UnsafeURLError, match="The URL is not valid: "):
        check_url(url, allow_private=True, resolver=lambda host, port: ["93.184.216.34"])


@pytest.mark.parametrize("url", ["http://xn--/v1", "http://[abc]/v1", "http://h:1:2/v1"])
def test_comparing_endpoints_never_raises_on_a_malformed_url(url):
    assert normalise_base_url(url) == url.rstrip("/")
    assert effective_base_url(provider="anthropic", base_url=url) == url  # no /v1 added to what cannot be read


def test_a_providers_status_written_in_other_digits_is_not_a_status():
    # "²".isdigit() is True and int("²") raises: a provider's body is input too.
    error = error_from_payload({"error": {"status": "²", "message": "boom"}})
    assert error.status is None
    assert positive_int("²") is None and positive_int("9" * 5000) is None and positive_int(" 4096 ") == 4096
