"""Reading a URL someone typed: one parse for every field that holds an endpoint (issue #44).

A model connection's base URL, a discovery request, a tool server's URL and every request
the outbound guard checks are read here, and only here. ``httpx.URL`` alone is not enough:
it accepts text it cannot use later — ``http://xn--/`` parses, and reading its ``host``
then raises an IDNA error; a port ``-1`` or ``99999`` parses; ``http://%zz/`` keeps the
percent signs as a host name — so each caller met a different exception in a different
place, and some of them were 500s. :func:`url_parse` reads the whole URL at once (scheme,
host, every label of the name, the port) and turns anything malformed into one
:class:`MalformedURL` whose message says what to fix in words, without echoing the URL
(an admin sometimes pastes a key into the wrong field).

This is syntax only: whether the host may be contacted (private, link-local, metadata
addresses, denied ports, credentials in the URL) is the guard's (``models_catalog.http``).
No Django here.
"""
from __future__ import annotations

import ipaddress
import re

import httpx
import idna

SCHEMES = ("http", "https")
MAX_HOST_NAME = 253  # RFC 1035, without the trailing dot
MAX_LABEL = 63
# Letters, digits and hyphens (RFC 1123), and the underscore that container and service
# names use on private networks; a percent sign, a space or anything else is no host name.
_LABEL = re.compile(r"[a-z0-9_-]+")


class MalformedURL(ValueError):
    """The URL cannot be read; ``message`` names the part to fix and never repeats the URL."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _parse_error(exc: Exception) -> MalformedURL:
    """httpx's reason in our words (its own message quotes the offending text)."""
    reason = str(exc)
    if reason.startswith("Invalid port"):
        return MalformedURL("the port must be a number from 1 to 65535")
    if reason.startswith("Invalid IPv6"):
        return MalformedURL("the host is not a valid IPv6 address (write it as [2001:db8::1])")
    if reason.startswith("Invalid IPv4"):
        return MalformedURL("the host is not a valid IPv4 address")
    if isinstance(exc, UnicodeEncodeError):  # a lone surrogate has no UTF-8 to percent-encode
        return MalformedURL("the URL holds a character that cannot be encoded")
    if reason.startswith("Invalid IDNA") or isinstance(exc, UnicodeError):
        return MalformedURL("the host name is not a valid international domain name")
    if "non-printable" in reason:
        return MalformedURL("the URL must not contain control characters")
    return MalformedURL("not a valid URL")


def _check_host_name(name: str) -> None:
    """A DNS name the resolver can be asked about: labels of letters, digits, ``-`` and
    ``_``, none empty, none over 63 characters, 253 in all; ``xn--`` labels valid IDNA."""
    name = name.removesuffix(".")  # a fully qualified name may end with the root's dot
    if len(name) > MAX_HOST_NAME:
        raise MalformedURL(f"the host name is longer than {MAX_HOST_NAME} characters")
    for label in name.split("."):
        if not label:
            raise MalformedURL("the host name has an empty part (two dots in a row, or a leading dot)")
        if len(label) > MAX_LABEL:
            raise MalformedURL(f"a part of the host name is longer than {MAX_LABEL} characters")
        if not _LABEL.fullmatch(label):
            raise MalformedURL("the host name may hold only letters, digits, hyphens, underscores and dots")
        if label.startswith("xn--"):
            try:
                idna.decode(label)
            except (idna.IDNAError, UnicodeError, ValueError):
                raise MalformedURL("the host name is not a valid international domain name") from None


def url_parse(url: str | httpx.URL) -> httpx.URL:
    """``url`` read whole: an http(s) URL with a usable host and port, or :class:`MalformedURL`.

    The text is taken as given (callers strip what a form adds). The result is the
    ``httpx.URL``, whose ``host`` and ``port`` can then be read without raising.
    """
    text = str(url) if isinstance(url, httpx.URL) else url
    if not isinstance(text, str):
        raise MalformedURL("must be text")
    if any(ord(character) < 32 or ord(character) == 127 for character in text):
        raise MalformedURL("the URL must not contain control characters")
    try:
        parsed = httpx.URL(text)
        scheme, raw_host, port = parsed.scheme, parsed.raw_host.decode("ascii"), parsed.port
        parsed.host  # noqa: B018  (decoding an ``xn--`` host is where a bad A-label raises)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:  # UnicodeError and idna's errors are ValueErrors
        raise _parse_error(exc) from None
    if scheme not in SCHEMES:
        raise MalformedURL("only http:// and https:// URLs are allowed")
    if not raw_host:
        raise MalformedURL("the URL has no host")
    if ":" in raw_host:  # an IPv6 literal: httpx checked the brackets, the address is checked here
        try:
            ipaddress.IPv6Address(raw_host)
        except ValueError:
            raise MalformedURL("the host is not a valid IPv6 address (write it as [2001:db8::1])") from None
    else:
        _check_host_name(raw_host.lower())
    if port is not None and not 1 <= port <= 65535:
        raise MalformedURL("the port must be a number from 1 to 65535")
    return parsed
