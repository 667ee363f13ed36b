"""Function names for server tools that every provider accepts (TOOL-3).

A server tool is chosen as ``"<server>.<tool>"``, but providers take function names that
match ``^[a-zA-Z0-9_-]{1,64}$`` (OpenAI's rule; Anthropic allows 128) and must be unique
in a request. ``function_names`` turns each chosen tool into ``<server>__<tool>``:

* every character outside ``[a-zA-Z0-9_-]`` becomes ``_`` (dots, spaces, accents);
* past 64 characters the name is shortened **from the front**, so it still ends with the
  tool's own name — what a model reads to pick a tool;
* a name already taken in the request (a built-in, or an earlier tool that sanitized the
  same way) gets a short stable prefix from a hash of its reference, again cut from the
  front of the rest to fit.

The result depends only on the references, their order and the names reserved, so a
published version names its tools the same way in every request (stable prompt caches).
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence

MAX_FUNCTION_NAME = 64
FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_OUTSIDE = re.compile(r"[^a-zA-Z0-9_-]")


def _fit(name: str, limit: int = MAX_FUNCTION_NAME) -> str:
    return name[-limit:] if len(name) > limit else name


def function_name(server: str, tool: str) -> str:
    """The plain function name of one server tool: sanitized and fitted, not yet unique."""
    return _fit(_OUTSIDE.sub("_", f"{server}__{tool}") or "_")


def function_names(refs: Sequence[tuple[str, str]], *, reserved: Iterable[str] = ()) -> list[str]:
    """One valid, unique function name per ``(server, tool)`` reference, in order.

    ``reserved`` are names the request already uses (the built-in tools). Every name
    matches ``FUNCTION_NAME`` and none repeats, whatever the references are.
    """
    taken = set(reserved)
    out: list[str] = []
    for server, tool in refs:
        name = function_name(server, tool)
        salt = 0
        while name in taken:
            digest = hashlib.sha1(f"{server}\x00{tool}\x00{salt}".encode()).hexdigest()[:6]
            name = f"{digest}_" + _fit(function_name(server, tool), MAX_FUNCTION_NAME - 7)
            salt += 1
        taken.add(name)
        out.append(name)
    return out
