"""Lone surrogates replaced with U+FFFD: the one home of text that must encode to UTF-8.

JSON lets a string hold any UTF-16 code unit as an escape, so ``"\\ud800"`` decodes in
Python to a string holding a lone surrogate. Such a string pickles, encrypts and stores,
and then breaks everything that encodes it — every page and API answer that shows it, and
every request body that carries it to a model — so one character would break a session
for good. Text from outside (imports, questions, titles, a model's streamed deltas, tool
arguments and results, a file's extracted text) passes :func:`replace_lone_surrogates`
where it enters; stored text read back passes it too (``core.crypto``), for rows
written before this rule.

Surrogate *pairs*. In a Python string an astral character (``"😀"``) is one code point;
two surrogate code points side by side (``"\\ud83d\\ude00"``) are not valid UTF-8 either.
A high surrogate directly followed by a low one is joined into the character the pair
encodes, as JSON decoders do for an escaped pair; every other surrogate (a high one not
followed by a low one, a low one alone, a low one before a high one) becomes U+FFFD, one
for each. Text with no surrogate code point comes back unchanged — the same object.

Dict keys are strings too and are replaced the same way. Two keys that differ only by
their lone surrogates become equal: the later one wins, as a JSON object's repeated key does.

The common case is text with none, and this runs on every streamed delta, so it must cost
next to nothing then: an ASCII string is answered from a flag CPython keeps, any other
from one C-speed encode; the rewriting (and any copying) happens only when there is
something to replace. Where the text arrives as JSON, :func:`may_hold_surrogates` on the
raw text decides whether the decoded value needs a walk at all; :func:`json_loads_clean`
is ``json.loads`` with both.

JSON text kept *as text* (a tool call's ``arguments``) can hold the escape itself, ASCII
and harmless until someone decodes it: :func:`replace_lone_surrogate_escapes` rewrites a
lone one to ``\\ufffd`` in place, keeping the rest of the text byte for byte (a
malformed text is kept as the model wrote it, CTX-6).
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

__all__ = ["REPLACEMENT", "json_loads_clean", "may_hold_surrogates", "replace_lone_surrogate_escapes",
           "replace_lone_surrogates"]

REPLACEMENT = "\ufffd"

T = TypeVar("T")

# What can decode to a surrogate: a ``\uD800``–``\uDFFF`` escape in JSON text, a surrogate
# code point in a string, or its three-byte form in bytes decoded with ``surrogatepass``
# (``json.loads`` of bytes does that, and so does pickle for every string it stores).
_ESCAPE_IN_TEXT = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_ESCAPE_IN_BYTES = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_FORM_IN_BYTES = re.compile(rb"\xed[\xa0-\xbf]")  # valid UTF-8 follows ED with 80..9F only
# Any escape of JSON text, taken left to right so that an escaped backslash is consumed
# whole and a ``ud800`` after it stays plain text; a surrogate escape is captured with the
# low-surrogate escape that may follow it.
_ANY_ESCAPE = re.compile(r"\\(?:u([dD][89a-fA-F][0-9a-fA-F]{2})(\\u[dD][c-fC-F][0-9a-fA-F]{2})?|.)", re.DOTALL)
_ESCAPED_REPLACEMENT = "\\ufffd"


def may_hold_surrogates(raw: str | bytes | bytearray) -> bool:
    """Whether ``raw`` (JSON text, or bytes decoded with ``surrogatepass`` such as a pickle)
    may decode to a string holding a surrogate code point.

    False means certainly not, and the decoded value needs no walk. True may be a false
    alarm (a text that spells a backslash-u escape literally); the walk then changes nothing.
    """
    # A one-character ``in`` is a memchr (a longer needle is not): most text pays two such
    # passes and no regex. Text in scripts whose UTF-8 starts with ED (Hangul) pays the regex.
    if isinstance(raw, str):
        if not raw.isascii() and not _encodes(raw):
            return True
        return "\\" in raw and _ESCAPE_IN_TEXT.search(raw) is not None
    if b"\\" in raw and _ESCAPE_IN_BYTES.search(raw) is not None:
        return True
    return b"\xed" in raw and _FORM_IN_BYTES.search(raw) is not None


def json_loads_clean(raw: str | bytes | bytearray) -> Any:
    """``json.loads(raw)`` with lone surrogates replaced: the decoder of JSON from outside
    (a provider's answer, a tool server's result). Raises what ``json.loads`` raises."""
    value = json.loads(raw)
    return replace_lone_surrogates(value) if may_hold_surrogates(raw) else value


def replace_lone_surrogates(value: T) -> T:
    """``value`` with every lone surrogate of every string in it replaced by U+FFFD.

    ``value`` is a string or JSON-like data (dicts, lists, tuples, any depth; keys included);
    other values pass through. Valid pairs of surrogate code points are joined into the
    character they encode. When nothing needs replacing the same object is returned, and
    a container is copied only along the path to what changed. Iterative: a value as deep
    as any decoder produced cannot exhaust the interpreter's stack here.
    """
    if isinstance(value, str):
        return _text(value)  # type: ignore[return-value]
    if isinstance(value, (dict, list, tuple)) and _holds_surrogate(value):
        return _nested(value)  # type: ignore[no-any-return]
    return value


def replace_lone_surrogate_escapes(json_text: str) -> str:
    """JSON text with each escape of a lone surrogate (``\\ud800``) rewritten to ``\\ufffd``,
    and any lone surrogate code point in it replaced as :func:`replace_lone_surrogates` does.

    An escaped pair (``\\ud83d\\ude00``) is kept: it decodes to one valid character. The
    text need not be valid JSON; everything else in it is kept as it was. The same object
    when nothing changed."""
    json_text = _text(json_text)
    if "\\" not in json_text or _ESCAPE_IN_TEXT.search(json_text) is None:
        return json_text
    replaced = _ANY_ESCAPE.sub(_escape_replaced, json_text)
    return json_text if replaced == json_text else replaced  # escaped pairs only: nothing was lone


def _escape_replaced(match: re.Match[str]) -> str:
    first, low = match.group(1), match.group(2)
    if first is None:
        return match.group(0)  # another escape, or a surrogate escape's backslash escaped
    if low is not None and first[1].lower() in "89ab":
        return match.group(0)  # a high surrogate then a low one: a pair
    return _ESCAPED_REPLACEMENT * (2 if low is not None else 1)


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _holds_surrogate(root: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> bool:
    # A scan before any rebuilding: a seventh of the rebuild's cost on clean data.
    stack: list[Any] = [root]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not (item.isascii() or _encodes(item)):
                return True
        elif isinstance(item, dict):
            stack.extend(item)  # the keys
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def _text(text: str) -> str:
    if text.isascii() or _encodes(text):
        return text
    # UTF-16 round trip: ``surrogatepass`` writes each surrogate as its own code unit, the
    # decoder then reads a high + low pair as the character and any other as U+FFFD.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


class _Frame:
    """One container being rebuilt: its entries, how far the walk is, what it has so far."""

    __slots__ = ("built", "changed", "container", "entries", "index")

    def __init__(self, container: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> None:
        self.container = container
        self.entries: list[tuple[Any, Any]] = (
            list(container.items()) if isinstance(container, dict) else list(enumerate(container)))
        self.index = 0
        self.built: list[tuple[Any, Any]] = []
        self.changed = False

    def accept(self, value: Any) -> None:
        key, original = self.entries[self.index]
        if isinstance(self.container, dict) and isinstance(key, str):
            new_key = _text(key)
            self.changed = self.changed or new_key is not key
            key = new_key
        self.changed = self.changed or value is not original
        self.built.append((key, value))
        self.index += 1

    def result(self) -> Any:
        if not self.changed:
            return self.container
        if isinstance(self.container, dict):
            return dict(self.built)
        values = [value for _key, value in self.built]
        return tuple(values) if isinstance(self.container, tuple) else values


def _nested(root: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> Any:
    stack = [_Frame(root)]
    while True:
        frame = stack[-1]
        if frame.index < len(frame.entries):
            child = frame.entries[frame.index][1]
            if isinstance(child, (dict, list, tuple)):
                stack.append(_Frame(child))
            else:
                frame.accept(_text(child) if isinstance(child, str) else child)
            continue
        done = frame.result()
        stack.pop()
        if not stack:
            return done
        stack[-1].accept(done)
