"""LOOP-8: credentials the runtime knows become ``[REDACTED]`` before anything is written.

A model, a tool or an exception can spell a key in forms a plain substring search misses,
and an audit found each of them reaching records, events, delegated tasks and logs. So a
secret is looked for in every form it is commonly written in:

* as written, in any letter case (``SK-…``, ``sk-…``);
* behind escapes, in any mix: JSON and Python string escapes (``\\u0073k-…``, ``\\x73``,
  ``\\/``) and URL percent-encoding (``%73k-…``) — read as the characters they stand for,
  two levels deep (the JSON of a JSON string);
* as hex of its bytes, either case;
* inside base64 (standard and URL-safe), also when the secret sits at any offset inside
  the base64 of a longer text: a byte's bits land in a different place of the encoding for
  each of the three alignments, so each alignment is one more form, made of the characters
  the secret's bytes alone decide.

The forms are computed once, when the redactor is built (once per run); redacting a text
is then a few substring searches, plus a decoding pass only when the text holds a ``\\``
or a ``%`` escape. Object keys are redacted like values. Spans found in a decoded reading
are mapped back to the characters that spelled them, so JSON stays JSON.
"""
from __future__ import annotations

import base64
import json
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote

REDACTED = "[REDACTED]"
MIN_SECRET = 8  # shorter strings would redact ordinary words
DECODE_DEPTH = 2  # escapes of escapes: a JSON string inside a JSON string

# Each of these reads as exactly one character, so a decoded index maps back to one span.
_JSON_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|[\"\\/bfnrt])")
_PERCENT = re.compile(r"%[0-7][0-9a-fA-F]")  # one ASCII byte; other bytes are literal forms
_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
# An escape cut by the end of a delta: the next delta may complete it.
_OPEN_ESCAPE = re.compile(r"(?:\\(?:u[0-9a-fA-F]{0,3}|x[0-9a-fA-F]?)?|%[0-7]?)\Z")
_URLSAFE = str.maketrans("+/", "-_")
_ASCII_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}


def _json_char(match: re.Match[str]) -> str:
    escape = match.group()
    return chr(int(escape[2:], 16)) if escape[1] in "ux" else _SIMPLE[escape[1]]


def _percent_char(match: re.Match[str]) -> str:
    return chr(int(match.group()[1:], 16))


_DECODERS: tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    ("\\", _JSON_ESCAPE, _json_char), ("%", _PERCENT, _percent_char))


def _fold(text: str) -> str:
    """The text in lower case with every index kept (``str.lower`` may lengthen a few
    non-ASCII letters; then only ASCII is folded, which is all a key is made of)."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


class _View:
    """One reading of a text: the root is the text itself; a decoded view reads each
    escape of its parent as the character it stands for and remembers where it came from."""

    __slots__ = ("text", "parent", "at", "starts", "ends", "children")

    def __init__(self, text: str, parent: _View | None = None, at: list[int] | None = None,
                 starts: list[int] | None = None, ends: list[int] | None = None) -> None:
        self.text, self.parent = text, parent
        self.at, self.starts, self.ends = at or [], starts or [], ends or []
        self.children: list[_View] = []  # its decoded readings: their escapes are spans of this text
        if parent is not None:
            parent.children.append(self)

    @classmethod
    def decoded(cls, parent: _View, matches: list[re.Match[str]], decode: Callable[[re.Match[str]], str]) -> _View:
        pieces, at, starts, ends = [], [], [], []
        done = length = 0
        for match in matches:
            literal = parent.text[done:match.start()]
            pieces.append(literal)
            length += len(literal)
            at.append(length)
            starts.append(match.start())
            ends.append(match.end())
            pieces.append(decode(match))
            length += 1
            done = match.end()
        pieces.append(parent.text[done:])
        return cls("".join(pieces), parent, at, starts, ends)

    def _source(self, index: int, *, end: bool) -> int:
        """Where decoded character ``index`` starts (or ends) in the parent's text."""
        i = bisect_right(self.at, index) - 1
        if i >= 0 and self.at[i] == index:
            return self.ends[i] if end else self.starts[i]
        offset = self.ends[i] - self.at[i] - 1 if i >= 0 else 0
        return offset + index + (1 if end else 0)

    def _widened(self, start: int, end: int) -> tuple[int, int]:
        """The span grown to whole escapes: a secret found across half of ``\\u0030`` is
        replaced with all of it, so the text stays valid JSON (or a valid URL)."""
        for child in self.children:
            i = bisect_right(child.starts, start) - 1
            if i >= 0 and child.starts[i] < start < child.ends[i]:
                start = child.starts[i]
            i = bisect_right(child.starts, end - 1) - 1
            if i >= 0 and child.starts[i] < end < child.ends[i]:
                end = child.ends[i]
        return start, end

    def to_root(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that spells ``[start, end)`` of this view, grown
        at every level to whole escapes."""
        view: _View = self
        while True:
            start, end = view._widened(start, end)
            if view.parent is None:
                return start, end
            if end > start:
                start, end = view._source(start, end=False), view._source(end - 1, end=True)
            else:
                start = end = view._source(start, end=False)
            view = view.parent


def _views(text: str) -> list[_View]:
    """The text and its decoded readings, DECODE_DEPTH levels deep; a reading is made only
    when the text holds an escape it would decode."""
    views = frontier = [_View(text)]
    for _ in range(DECODE_DEPTH):
        deeper = []
        for view in frontier:
            for trigger, pattern, decode in _DECODERS:
                if trigger in view.text:
                    matches = list(pattern.finditer(view.text))
                    if matches:
                        deeper.append(_View.decoded(view, matches, decode))
        if not deeper:
            break
        views = [*views, *deeper]
        frontier = deeper
    return views


def _base64_forms(raw: bytes) -> set[str]:
    """The characters only ``raw``'s bytes decide in the base64 of any text holding it, for
    each of the three alignments, in both alphabets."""
    forms = set()
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode()
        first = -(-8 * shift // 6)  # characters that hold bits of the bytes before it
        last = 8 * (shift + len(raw)) // 6  # the rest hold bits of the bytes after it
        core = encoded[first:last]
        forms |= {core, core.translate(_URLSAFE)}
    return forms


def secret_forms(secret: str) -> tuple[set[str], set[str]]:
    """(forms compared case-insensitively, forms compared exactly) of one secret; the
    escaped forms are found by decoding the text instead (any mix of escapes)."""
    raw = secret.encode()
    folded = {raw.hex()}
    exact = _base64_forms(raw)
    if secret.isascii():
        folded.add(_fold(secret))
    else:  # a letter's case beyond ASCII is left alone; its bytes may be percent-encoded
        quoted = quote(secret, safe="")
        exact |= {secret, quoted, re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), quoted)}
    return folded, exact


def _find(haystack: str, needle: str, spans: list[tuple[int, int]]) -> None:
    at = haystack.find(needle)
    while at >= 0:
        spans.append((at, at + len(needle)))
        at = haystack.find(needle, at + 1)


def _open_prefix(haystack: str, end: int, form: str) -> int | None:
    """Where the longest tail of ``haystack[:end]`` that begins ``form`` (and is shorter) starts."""
    at = haystack.find(form[0], max(0, end - len(form) + 1), end)
    while at >= 0:
        if form.startswith(haystack[at:end]):
            return at
        at = haystack.find(form[0], at + 1, end)
    return None


def _merged(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


class Redactor:
    """The secrets of one run and every form of each, computed once (pure: no I/O)."""

    def __init__(self, secrets: list[str]) -> None:
        self.secrets = sorted({s for s in secrets if s and len(s) >= MIN_SECRET}, key=len, reverse=True)
        # A secret that holds another (``Bearer <token>`` and the token) is found by the
        # other's forms in every reading, all three base64 alignments included: looking
        # for it too would only cost.
        searched = [s for s in self.secrets if not any(o != s and o in s for o in self.secrets)]
        folded: set[str] = set()
        exact: set[str] = set()
        for secret in searched:
            more_folded, more_exact = secret_forms(secret)
            folded |= more_folded
            exact |= more_exact
        self._folded = tuple(sorted(folded, key=len, reverse=True))
        self._exact = tuple(sorted(exact - folded, key=len, reverse=True))
        self._shortest = min(map(len, (*self._folded, *self._exact)), default=0)

    def _spans(self, view: _View | str, end: int | None = None) -> list[tuple[int, int]]:
        """Every form in the view (within ``[0, end)``), as spans of the view."""
        text = view if isinstance(view, str) else view.text
        text = text if end is None else text[:end]
        spans: list[tuple[int, int]] = []
        if len(text) < self._shortest:
            return spans
        folded = _fold(text)
        for form in self._folded:
            if form in folded:
                _find(folded, form, spans)
        for form in self._exact:
            if form in text:
                _find(text, form, spans)
        return spans

    def spans(self, value: str) -> list[tuple[int, int]]:
        """The spans of ``value`` that spell a secret, in any of its forms, merged."""
        if not self._shortest or len(value) < self._shortest:
            return []
        if "\\" not in value and "%" not in value:  # the usual text: nothing to decode
            return _merged(self._spans(value))
        found = [view.to_root(*span) for view in _views(value) for span in self._spans(view)]
        return _merged(found)

    def text(self, value: str) -> str:
        """``value`` with each span that spells a secret replaced by ``[REDACTED]``."""
        spans = self.spans(value)
        if not spans:
            return value
        pieces, done = [], 0
        for start, end in spans:
            pieces += [value[done:start], REDACTED]
            done = end
        pieces.append(value[done:])
        return "".join(pieces)

    def hold(self, value: str) -> int:
        """How many characters at the end of ``value`` a stream must keep back: the longest
        tail that could still grow into a secret in one of its forms (with an escape the
        next delta may complete), and never a cut through a secret already there."""
        if not self._shortest or not value:
            return 0
        opened = _OPEN_ESCAPE.search(value)
        body = value[:opened.start()] if opened else value
        cut = len(body)
        complete: list[tuple[int, int]] = []
        for view in _views(body):
            end = len(view.text)
            inner = _OPEN_ESCAPE.search(view.text) if view.parent is not None else None
            if inner is not None:  # an escape of an escape, cut short by the delta
                end = inner.start()
                cut = min(cut, view.to_root(end, len(view.text))[0])
            folded = _fold(view.text)
            for haystack, forms in ((folded, self._folded), (view.text, self._exact)):
                for form in forms:
                    start = _open_prefix(haystack, end, form)
                    if start is not None:
                        cut = min(cut, view.to_root(start, end)[0])
            complete += [view.to_root(*span) for span in self._spans(view, end)]
        for start, end in _merged(complete):  # disjoint: at most one holds the cut
            if start < cut < end:
                cut = start
        return len(value) - cut

    def content(self, value: Any) -> Any:
        """A JSON value with every string redacted: values and object keys alike."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.content(item) for item in value]
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            for key, item in value.items():
                if isinstance(key, str):
                    key = self.text(key)
                    base, n = key, 1
                    while key in out:  # two keys that differed only by a secret both stay
                        n += 1
                        key = f"{base} ({n})"
                out[key] = self.content(item)
            return out
        return value

    def arguments(self, raw: str) -> str:
        """Tool-call arguments with every secret removed, in any form, keys included. The
        spans are replaced in the JSON text itself, so what the model wrote keeps its shape;
        should a replacement ever break the JSON, the arguments are written back as JSON of
        the redacted values (what they mean is kept; their spelling is not)."""
        redacted = self.text(raw)
        if redacted == raw:
            return raw
        try:
            json.loads(redacted)
            return redacted
        except ValueError:
            pass
        try:
            decoded = json.loads(raw)
        except ValueError:
            return redacted  # not JSON to begin with
        return json.dumps(self.content(decoded), ensure_ascii=False)

    def message(self, message: dict[str, Any]) -> dict[str, Any]:
        if not self.secrets:
            return message
        redacted = self.content(message)
        for call in redacted.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                function["arguments"] = self.arguments(function["arguments"])
        return redacted
