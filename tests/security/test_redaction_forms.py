"""LOOP-8, the pure redactor: a known secret is found in every form it is written in.

Each property builds a text that holds the secret in one form, at any offset, amid any
other text, and checks the redacted text with a decoder of its own (``json.loads``,
``urllib.parse.unquote``, ``base64``): whatever reading a reader applies, the secret is
not there. A stream is checked the same way: cut into any deltas, what the stream lets
out, delta by delta, never holds a form of the secret.
"""
from __future__ import annotations

import base64
import binascii
import json
import os
import re
import string
from urllib.parse import quote, unquote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.redaction import REDACTED, Redactor
from tests.security.leaks import readings_with_secret, written_forms

CI = os.environ.get("HYPOTHESIS_PROFILE") == "ci"
KEY_ALPHABET = string.ascii_letters + string.digits + "-_."
secrets = st.text(KEY_ALPHABET, min_size=8, max_size=48)
# Any text around it, including escapes, quotes, percent signs and letters of every script.
around = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
PROPERTY = settings(max_examples=600 if CI else 300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _case(draw_case: int, secret: str) -> str:
    return (secret, secret.lower(), secret.upper(), secret.swapcase())[draw_case]


def _recovered_as_written(text: str, secret: str) -> bool:
    return secret.lower() in text.lower()


def _base64_runs(text: str) -> list[bytes]:
    """Every byte string a reader could decode from the text, in either alphabet, at every
    alignment of every run of base64 characters."""
    out = []
    for alphabet, decode in ((r"[A-Za-z0-9+/]+", base64.b64decode), (r"[A-Za-z0-9_-]+", base64.urlsafe_b64decode)):
        for run in re.findall(alphabet, text):
            for offset in range(4):
                chunk = run[offset:]
                for candidate in (chunk[:len(chunk) - len(chunk) % 4], chunk + "=" * (-len(chunk) % 4)):
                    try:
                        out.append(decode(candidate))
                    except (binascii.Error, ValueError):
                        pass
    return out


@PROPERTY
@given(secret=secrets, before=around, after=around, case=st.integers(0, 3))
def test_loop8_a_secret_in_any_letter_case_is_redacted(secret, before, after, case):
    out = Redactor([secret]).text(before + _case(case, secret) + after)
    assert not _recovered_as_written(out, secret) and REDACTED in out


@PROPERTY
@given(secret=secrets, before=around, after=around, escaped=st.lists(st.booleans(), min_size=48, max_size=48),
       nested=st.booleans(), case=st.integers(0, 3))
def test_loop8_a_secret_behind_any_mix_of_json_escapes_is_redacted(secret, before, after, escaped, nested, case):
    written = _case(case, secret)
    spelled = "".join(f"\\u{ord(ch):04x}" if escaped[i] else json.dumps(ch)[1:-1] for i, ch in enumerate(written))
    document = '{"k": "' + json.dumps(before)[1:-1] + spelled + json.dumps(after)[1:-1] + '"}'
    if nested:  # the JSON text itself inside a JSON string (a tool's arguments in a record)
        document = json.dumps({"arguments": document})
    out = Redactor([secret]).text(document)
    value = json.loads(out)
    if nested:
        value = json.loads(value["arguments"])
    assert not _recovered_as_written(value["k"], secret) and not _recovered_as_written(out, secret)


@PROPERTY
@given(secret=secrets, before=around, after=around, encoded=st.lists(st.booleans(), min_size=48, max_size=48),
       upper_hex=st.booleans())
def test_loop8_a_secret_behind_any_mix_of_percent_escapes_is_redacted(secret, before, after, encoded, upper_hex):
    spelled = "".join((f"%{ord(ch):02X}" if upper_hex else f"%{ord(ch):02x}") if encoded[i] else ch
                      for i, ch in enumerate(secret))
    out = Redactor([secret]).text(quote(before, safe="") + spelled + quote(after, safe=""))
    assert not _recovered_as_written(unquote(out), secret) and REDACTED in out


@PROPERTY
@given(secret=secrets, before=st.binary(max_size=40), after=st.binary(max_size=40), urlsafe=st.booleans(),
       framing=st.tuples(around, around))
def test_loop8_a_secret_inside_base64_of_a_longer_text_at_any_offset_is_redacted(secret, before, after, urlsafe,
                                                                                 framing):
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    text = framing[0] + encode(before + secret.encode() + after).decode() + framing[1]
    assert any(secret.encode() in decoded for decoded in _base64_runs(text))  # the reader's decoder finds it
    out = Redactor([secret]).text(text)
    assert not any(secret.encode() in decoded for decoded in _base64_runs(out)) and REDACTED in out


@PROPERTY
@given(secret=secrets, before=around, after=around, upper=st.booleans())
def test_loop8_a_secret_as_hex_of_its_bytes_is_redacted(secret, before, after, upper):
    written = secret.encode().hex()
    out = Redactor([secret]).text(before + (written.upper() if upper else written) + after)
    assert secret.encode().hex() not in out.lower() and REDACTED in out


@PROPERTY
@given(secret=secrets, other=secrets, case=st.integers(0, 3))
def test_loop8_a_secret_used_as_an_object_key_is_redacted_and_no_other_key_is_lost(secret, other, case):
    value = {_case(case, secret): 1, "nested": [{secret: {"x": secret}}], "plain": other}
    out = Redactor([secret]).content(value)
    assert not _recovered_as_written(json.dumps(out), secret) and len(out) == 3


def _every_form(secret: str, before: str, after: str, form: int) -> str:
    if form == 0:
        return before + secret.upper() + after
    if form == 1:
        return json.dumps(before)[:-1] + f"\\u{ord(secret[0]):04x}" + secret[1:] + json.dumps(after)[1:]
    if form == 2:
        return before + quote(secret, safe="").replace(secret[0], f"%{ord(secret[0]):02X}", 1) + after
    if form == 3:
        return before + base64.b64encode(b"ab" + secret.encode()).decode() + after
    return before + secret.encode().hex() + after


def _no_form_left(text: str, secret: str) -> bool:
    decoded = text.encode().decode("unicode_escape", errors="ignore") if "\\" in text else text
    return not (_recovered_as_written(text, secret) or _recovered_as_written(unquote(text), secret)
                or _recovered_as_written(decoded, secret) or secret.encode().hex() in text.lower()
                or any(secret.encode() in d for d in _base64_runs(text)))


@PROPERTY
@given(secret=secrets, before=st.text(string.ascii_letters + " .,", max_size=30),
       after=st.text(string.ascii_letters + " .,", max_size=30), form=st.integers(0, 4),
       cuts=st.lists(st.integers(0, 400), max_size=12))
def test_loop8_a_stream_cut_anywhere_never_lets_out_a_form_of_the_secret(secret, before, after, form, cuts):
    """What a ``DeltaBuffer`` does at each flush: let out the redacted text up to the held
    tail. Every piece let out, and all of them together, hold no form of the secret."""
    redactor = Redactor([secret])
    text = _every_form(secret, before, after, form)
    points = sorted({min(c, len(text)) for c in cuts}) + [len(text)]
    buffered, out, done = "", [], 0
    for point in points:
        buffered += text[done:point]
        done = point
        cut = len(buffered) - redactor.hold(buffered)
        out.append(redactor.text(buffered[:cut]))
        buffered = buffered[cut:]
    out.append(redactor.text(buffered))  # the final flush lets everything out
    assert all(_no_form_left(piece, secret) for piece in out)
    assert _no_form_left("".join(out), secret)


def test_loop8_ordinary_text_is_left_alone_and_never_held_back():
    redactor = Redactor(["sk-fake-provider-key-0123456789", "mcp-test-token-4f1d2c3b5a69"])
    text = 'Plain words, 50 % of {"a": "b\\n"} and aGVsbG8gd29ybGQ= are not a key.'
    assert redactor.text(text) == text and redactor.content({"a": [text]}) == {"a": [text]}
    assert redactor.hold("Plain words.") == 0
    assert redactor.hold("ends with s") == 1  # could be the key's first letter
    assert Redactor([]).text(text) == text and Redactor(["short"]).text("short") == "short"


def test_loop8_a_header_value_and_its_bare_token_are_redacted_in_every_form_of_either():
    """A tool server's ``Authorization`` value and the token alone are both secrets; the
    longer is found through the shorter's forms (it holds it), in every reading."""
    header = "Bearer mcp-test-token-4f1d2c3b5a69"
    token = header.split(" ", 1)[1]
    redactor = Redactor([header, token])
    for secret in (header, token):
        for name, form in written_forms(secret).items():
            out = redactor.text(f"sent {form} here")
            assert readings_with_secret(out, token) == [], (secret, name, out)
