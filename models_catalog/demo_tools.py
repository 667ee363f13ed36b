"""The offline demo model's tool calls: which offered tool a question asks for, and
arguments for it built from the tool's JSON Schema. Pure and deterministic: no Django, no
I/O, no randomness — a question, the tools and the day always give the same call.

Choosing (``choose_tool``): the words of the question are matched against each tool's
name (a name word counts 3) and description (a word counts 1); the best tool with at least
3 points is called. Ties go to a server's tool (its wire name holds ``__``: the author added
it on purpose), then to the tool needing fewer arguments, then to the order offered. The
``calculator`` is never chosen by words: only an arithmetic expression calls it.

Arguments for the chosen tool: ``models_catalog.demo_arguments``.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

CALCULATOR = "calculator"
NAME_WEIGHT = 3
CHOSEN_AT = 3  # points a tool needs: one word of its name, or three of its description

# Words that say nothing about which tool is meant.
STOP_WORDS = frozenset("""
a about after again all also am an and any are as at be been before being between both but by can could
did do does doing done each else for from further had has have having he her here hers him his how i if in
into is it its itself just me more most my no nor not now of off on once only or other our out over own
please same she should so some such than that the their them then there these they this those through to
too under until up very was we were what when where which while who whom why will with would you your
yours give tell let lets show me want need like know use using given
""".split())
# Name words that most tools share: a question saying "get" asks for no tool in particular.
GENERIC_NAME_WORDS = frozenset({"get", "set", "read", "list", "create", "current", "run", "do", "make", "show",
                                "update", "tool", "tools", "new", "info", "data", "by", "to", "of", "for"})

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[a-z0-9]+")
# --- choosing a tool ---------------------------------------------------------------------

def words(text: str) -> set[str]:
    """The telling words of ``text``: lower case, camelCase and snake_case split, stop words
    dropped, a plural's ``s`` cut."""
    found = _WORD.findall(_CAMEL.sub(" ", text or "").replace("_", " ").lower())
    return {_stem(word) for word in found if word not in STOP_WORDS and len(word) > 1}


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def tool_score(question_words: set[str], name: str, function: Mapping[str, Any]) -> int:
    """How plainly a question with ``question_words`` asks for the tool ``name``."""
    name_words = {w for w in words(name.replace("__", " ")) if w not in GENERIC_NAME_WORDS}
    description = function.get("description")
    described = words(description if isinstance(description, str) else "") - name_words
    return NAME_WEIGHT * len(question_words & name_words) + len(question_words & described)


def _required_count(function: Mapping[str, Any]) -> int:
    parameters = function.get("parameters")
    required = parameters.get("required") if isinstance(parameters, Mapping) else None
    return len(required) if isinstance(required, list) else 0


def choose_tool(question: str, tools: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The name of the offered tool ``question`` asks for, or None (see the module)."""
    asked = words(question)
    best: tuple[int, int, int, int] | None = None
    chosen = None
    for position, (name, function) in enumerate(tools.items()):
        if name == CALCULATOR:
            continue
        score = tool_score(asked, name, function)
        if score < CHOSEN_AT:
            continue
        rank = (score, 1 if "__" in name else 0, -_required_count(function), -position)
        if best is None or rank > best:
            best, chosen = rank, name
    return chosen
