"""LOOP-8 test helpers: a secret written in every form an audit saw, and every reading a
person or a script could apply to find it again.

``written_forms`` is what a model, a tool or an exception writes; ``readings`` decodes a
text with Python's own decoders (``unicode_escape``, ``unquote``, ``base64``), not with the
redactor's, so a redactor that misses a form is caught by a reader it does not share code
with.
"""
from __future__ import annotations

import base64
import binascii
import io
import json
import logging
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote


def written_forms(secret: str) -> dict[str, str]:
    """The forms a secret reached records, events and logs in, by name."""
    raw = secret.encode()
    return {
        "as written": secret,
        "upper-cased": secret.upper(),
        "JSON-escaped first letter": f"\\u{ord(secret[0]):04x}" + secret[1:],
        "JSON-escaped": "".join(f"\\u{ord(ch):04X}" for ch in secret),
        "URL-encoded": "".join(f"%{byte:02X}" for byte in raw),
        "URL-encoded dashes": secret.replace("-", "%2d"),
        "base64": base64.b64encode(raw).decode(),
        "base64 of a Bearer header (offset 7)": base64.b64encode(b"Bearer " + raw).decode(),
        "URL-safe base64 of a header line (offset 11)": base64.urlsafe_b64encode(b"x-api-key: " + raw + b"!").decode(),
        "base64 of Basic credentials (offset 5)": base64.b64encode(b"user:" + raw).decode(),
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
    }


def _unescaped(text: str) -> str:
    # Any text may hold a backslash that is no escape; the codec warns on each, and that is
    # the text's business, not the test's.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return text.encode("ascii", "backslashreplace").decode("unicode_escape")
        except (UnicodeDecodeError, ValueError):
            return text


def _base64_decodings(text: str) -> Iterator[bytes]:
    readers = ((r"[A-Za-z0-9+/]{8,}", base64.b64decode), (r"[A-Za-z0-9_-]{8,}", base64.urlsafe_b64decode))
    for alphabet, decode in readers:
        for run in re.findall(alphabet, text):
            for offset in range(4):
                chunk = run[offset:]
                for candidate in (chunk[:len(chunk) - len(chunk) % 4], chunk + "=" * (-len(chunk) % 4)):
                    try:
                        yield decode(candidate)
                    except (binascii.Error, ValueError):
                        pass


def readings_with_secret(text: str, secret: str) -> list[str]:
    """The readings of ``text`` in which ``secret`` is found (empty: it is nowhere)."""
    once = _unescaped(text)
    texts = {"as it is": text, "URL-decoded": unquote(text), "unescaped": once, "unescaped twice": _unescaped(once),
             "unescaped, then URL-decoded": unquote(once)}
    found = [name for name, reading in texts.items() if secret.lower() in reading.lower()]
    if secret.encode().hex() in text.lower():
        found.append("hex-decoded")
    if any(secret.encode() in decoded for reading in (text, once) for decoded in _base64_decodings(reading)):
        found.append("base64-decoded")
    return found


def strings(value: Any) -> Iterator[str]:
    """Every string of a JSON value, object keys too, and the strings inside strings that
    are JSON themselves (a tool call's arguments)."""
    if isinstance(value, str):
        yield value
        try:
            inner = json.loads(value)
        except ValueError:
            return
        if not isinstance(inner, str):
            yield from strings(inner)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(key)
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def leaks(places: dict[str, Any], secret: str) -> dict[str, list[str]]:
    """``{place: readings that find the secret}`` for each place that leaks it. A place is
    a text (a log, a page) or a JSON value, read string by string and as a whole."""
    found: dict[str, list[str]] = {}
    for where, value in places.items():
        texts = [value] if isinstance(value, str) else [json.dumps(value), *strings(value)]
        readings = sorted({reading for text in texts for reading in readings_with_secret(text, secret)})
        if readings:
            found[where] = readings
    return found


@contextmanager
def process_log() -> Iterator[io.StringIO]:
    """What the process's own log handler (``settings.LOGGING``'s console) writes, here."""
    from core.log_redaction import SecretsFilter

    handlers = [h for h in logging.getLogger().handlers if any(isinstance(f, SecretsFilter) for f in h.filters)]
    assert handlers, "settings.LOGGING installs the secrets filter on the root logger's handler"
    buffer = io.StringIO()
    previous = [handler.setStream(buffer) for handler in handlers]
    try:
        yield buffer
    finally:
        for handler, stream in zip(handlers, previous):
            handler.setStream(stream)
