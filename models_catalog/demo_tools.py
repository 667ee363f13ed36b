"""The offline demo model's tool calls: which offered tool a question asks for, and
arguments for it built from the tool's JSON Schema. Pure and deterministic: no Django, no
I/O, no randomness — a question, the tools and the day always give the same call.

Choosing (``choose_tool``): the words of the question are matched against each tool's
name (a name word counts 3) and description (a word counts 1); the best tool with at least
3 points is called. Ties go to a server's tool (its wire name holds ``__``: the author added
it on purpose), then to the tool needing fewer arguments, then to the order offered. The
``calculator`` is never chosen by words: only an arithmetic expression calls it.

Arguments (``tool_arguments``): every required property, and an optional one when the
question names a value of its kind (a time zone, a URL, a date…). Each value is the first
of these that validates against the property's schema: a value of the question (an enum
member it mentions; of the property's kind: a URL, an e-mail address, a time zone — an
IANA name or a city of one —, a date, a time, a path, a number; a quoted string; else the
question itself), the schema's ``default``, its ``examples``, and a value made to fit its
type and bounds. ``$ref`` within the schema, ``allOf``, ``anyOf`` and ``oneOf`` are read;
a ``pattern`` is honoured when some word of the question matches it.
"""
from __future__ import annotations

import math
import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from functools import lru_cache
from typing import Any

CALCULATOR = "calculator"
NAME_WEIGHT = 3
CHOSEN_AT = 3  # points a tool needs: one word of its name, or three of its description
MAX_DEPTH = 8  # how deep a schema is followed (nested objects, references)
MAX_ITEMS = 3  # items made for an array beyond its minItems: none; this caps minItems' cost

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
_URL = re.compile(r"https?://[^\s<>\"'`)\]]+")
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_DATETIME = re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2})?(?:Z|[+-]\d{2}:\d{2})?")
_TIME = re.compile(r"(?<![\d:])([01]?\d|2[0-3]):([0-5]\d)(?![\d:])")
_ZONE = re.compile(r"\b(?:[A-Z][A-Za-z_+-]*/)+[A-Za-z_+-][A-Za-z0-9_+-]*\b|\b(?:UTC|GMT)\b")
_QUOTED = re.compile(r"(?:^|(?<=[\s(:]))[\"“‘'`]([^\"”’'`\n]{1,200})[\"”’'`]")
_PATH = re.compile(r"(?:^|(?<=\s))(?:~|\.{1,2})?/?[\w.-]+(?:/[\w.-]+)+/?|(?:^|(?<=\s))[\w-]+\.[A-Za-z0-9]{1,5}\b")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")


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


# --- the question's values ---------------------------------------------------------------

@lru_cache(maxsize=1)
def _zones() -> tuple[frozenset[str], dict[str, str], re.Pattern[str]]:
    """Every IANA zone, the zone of each city name, and one pattern finding those names."""
    names = zoneinfo.available_timezones()
    cities: dict[str, str] = {}
    # Continent/City first, so "Paris" is Europe/Paris and not a legacy alias.
    for name in sorted(names, key=lambda n: (n.count("/") != 1, n.startswith(("Etc/", "US/", "SystemV/")), n)):
        if "/" in name:
            city = name.rsplit("/", 1)[1].replace("_", " ").lower()
            cities.setdefault(city, name)
    longest_first = sorted(cities, key=lambda city: (-len(city), city))
    return frozenset(names), cities, re.compile(r"\b(?:" + "|".join(map(re.escape, longest_first)) + r")\b")


def _zones_in(text: str) -> list[str]:
    """The time zones ``text`` names (``Europe/Paris``, ``UTC``, or a city: ``Tokyo``), in order."""
    known, cities, city_names = _zones()
    found: list[tuple[int, str]] = [(m.start(), m.group()) for m in _ZONE.finditer(text) if m.group() in known]
    taken = [range(start, start + len(zone)) for start, zone in found]
    for match in city_names.finditer(text.lower()):
        if not any(match.start() in span for span in taken):
            found.append((match.start(), cities[match.group()]))
    return [zone for _, zone in sorted(found)]


def _numbers_in(text: str) -> list[float | int]:
    for pattern in (_URL, _DATETIME, _DATE, _TIME):
        text = pattern.sub(" ", text)
    values: list[float | int] = []
    for match in _NUMBER.finditer(text):
        raw = match.group()
        values.append(float(raw) if "." in raw else int(raw))
    return values


@dataclass
class Question:
    """What a question offers as argument values, by kind, each taken once in order."""

    text: str
    today: date
    found: dict[str, list[Any]] = field(default_factory=dict)

    @classmethod
    def read(cls, text: str, today: date | None = None) -> Question:
        text = " ".join((text or "").split())
        urls = [url.rstrip(".,;:!?") for url in _URL.findall(text)]
        without_urls = _URL.sub(" ", text)
        paths = [p for p in _PATH.findall(without_urls)
                 if not _DATE.fullmatch(p) and p not in set(_zones_in(p)) and not re.fullmatch(r"[\d.]+", p)]
        found = {
            "url": urls,
            "email": _EMAIL.findall(text),
            "zone": _zones_in(without_urls),
            "datetime": _DATETIME.findall(text),
            "date": _DATE.findall(text),
            "time": [f"{int(h):02d}:{m}" for h, m in _TIME.findall(without_urls)],
            "path": paths,
            "number": _numbers_in(text),
            "quoted": [q.strip() for q in _QUOTED.findall(text) if q.strip()],
        }
        return cls(text=text, today=today or datetime.now(UTC).date(), found=found)

    def has(self, kind: str) -> bool:
        return bool(self.found.get(kind))

    def take(self, kind: str) -> list[Any]:
        """The question's values of ``kind``, the next one first (then the others)."""
        values = self.found.get(kind) or []
        if values:
            values.append(values.pop(0))  # the next property of this kind takes the next value
            return [values[-1], *values[:-1]]
        return []


# --- building a value from a schema ------------------------------------------------------

SCHEMA_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})
DEFINITIONS = frozenset({"$defs", "definitions"})
VALUES = frozenset({"const", "default", "examples", "enum"})
MAX_REFERENCES = 200  # references followed in one schema: a schema cannot make the demo work for long


def _inline(schema: Any, root: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
    """``schema`` with its ``#/…`` references replaced by what they point to, its
    definitions left out (up to ``MAX_DEPTH`` references deep and ``MAX_REFERENCES`` in all;
    past them, or pointing outside the schema, a reference reads as ``{}``)."""
    budget = [MAX_REFERENCES] if budget is None else budget
    if isinstance(schema, list):
        return [_inline(item, root, depth, budget) for item in schema]
    if not isinstance(schema, dict):
        return schema
    reference = schema.get("$ref")
    rest = {k: v for k, v in schema.items() if k != "$ref"}
    inlined: dict[str, Any] = {}
    if isinstance(reference, str):
        budget[0] -= 1
        target = _pointer(root, reference) if depth < MAX_DEPTH and budget[0] >= 0 else None
        inlined = _inline(target, root, depth + 1, budget) if isinstance(target, dict) else {}
    for key, value in rest.items():
        if key in DEFINITIONS:
            continue
        if key in VALUES:
            inlined[key] = value
        elif key in SCHEMA_MAPS and isinstance(value, dict):
            inlined[key] = {name: _inline(sub, root, depth, budget) for name, sub in value.items()}
        else:
            inlined[key] = _inline(value, root, depth, budget)
    return inlined


def _pointer(root: Any, reference: str) -> Any:
    if not reference.startswith("#"):
        return None
    node = root
    for part in [p for p in reference[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _merged(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``allOf`` folded in (properties and required lists joined)."""
    parts = [p for p in schema.get("allOf") or [] if isinstance(p, dict)]
    if not parts:
        return schema
    merged = {k: v for k, v in schema.items() if k != "allOf"}
    for part in parts:
        part = _merged(part)
        for key, value in part.items():
            if key == "properties" and isinstance(value, dict):
                merged["properties"] = {**(merged.get("properties") or {}), **value}
            elif key == "required" and isinstance(value, list):
                merged["required"] = [*(merged.get("required") or []), *value]
            else:
                merged.setdefault(key, value)
    return merged


@lru_cache(maxsize=512)
def _validator_class(dialect: str) -> Any:
    from jsonschema.validators import validator_for

    return validator_for({"$schema": dialect} if dialect else {})


def _fits(value: Any, schema: Any, dialect: str) -> bool:
    """Whether ``value`` validates against ``schema`` (references resolved within it; nothing fetched)."""
    from referencing import Registry

    try:
        return bool(_validator_class(dialect)(schema, registry=Registry()).is_valid(value))
    except Exception:  # noqa: BLE001 - a schema the validator cannot read fits nothing
        return False


def _types(schema: dict[str, Any]) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list) and kind:
        named = [k for k in kind if isinstance(k, str)]
        return [k for k in named if k != "null"] + [k for k in named if k == "null"]
    if "properties" in schema or "required" in schema:
        return ["object"]
    if "items" in schema or "prefixItems" in schema:
        return ["array"]
    if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")):
        return ["number"]
    return ["string"]


def _kind(name: str, schema: dict[str, Any]) -> str:
    """What a string property holds, from its name, format and description."""
    fmt = str(schema.get("format") or "").lower()
    description = schema.get("description")
    about = f"{name} {description if isinstance(description, str) else ''}".lower()
    label = name.lower()
    if fmt in ("uri", "url", "iri", "uri-reference") or re.search(r"\b(url|uri|link|href)", label):
        return "url"
    if fmt in ("email", "idn-email") or "email" in label:
        return "email"
    if re.search(r"time ?zone|\btz\b|timezone", about):
        return "zone"
    if fmt == "date-time":
        return "datetime"
    if fmt == "date" or re.search(r"(^|_)date$|^date", label):
        return "date"
    if fmt == "time" or "hh:mm" in about or label == "time":
        return "time"
    if re.search(r"path|file|dir|folder|repo", label):
        return "path"
    return "text"


_MADE = {"url": "https://example.com/", "email": "someone@example.com", "zone": "UTC", "time": "12:00",
         "path": ".", "text": "demo"}


def _made_string(kind: str, schema: dict[str, Any], today: date) -> str:
    value = (today.isoformat() if kind == "date" else f"{today.isoformat()}T12:00:00Z" if kind == "datetime"
             else _MADE.get(kind, "demo"))
    return _sized(value, schema)


def _sized(value: str, schema: dict[str, Any]) -> str:
    low, high = schema.get("minLength"), schema.get("maxLength")
    if isinstance(high, int) and len(value) > high:
        cut = value[:high]
        value = cut.rsplit(" ", 1)[0] if " " in cut and len(cut.rsplit(" ", 1)[0]) >= (low or 0) else cut
    if isinstance(low, int) and len(value) < low:
        value = value + "x" * (low - len(value))
    return value


def _question_strings(kind: str, schema: dict[str, Any], question: Question) -> list[str]:
    if kind in ("url", "email", "zone", "datetime", "date", "time", "path"):
        found = question.take(kind)
        if kind == "datetime" and not found:
            found = [f"{d}T12:00:00Z" for d in question.take("date")]
        return found
    candidates = [*question.take("quoted")]
    if question.text:
        candidates.append(_sized(question.text, schema))
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            compiled = re.compile(pattern)
        except re.error:
            return candidates
        candidates += [w for w in re.findall(r"[^\s,;!?]+", question.text) if compiled.search(w)]
    return candidates


def _made_number(schema: dict[str, Any], integer: bool) -> int | float:
    """A number within the schema's bounds and multipleOf, near 1 when it can be."""
    def bound(name: str, exclusive: str) -> tuple[float | None, bool]:
        value, strict = schema.get(name), schema.get(exclusive)
        if isinstance(strict, bool):  # draft 4: a flag on minimum / maximum
            return (value if isinstance(value, (int, float)) else None), strict
        candidates = [(v, s) for v, s in ((value, False), (strict, True)) if isinstance(v, (int, float))
                      and not isinstance(v, bool)]
        if not candidates:
            return None, False
        pick = max if name == "minimum" else min
        return pick(candidates, key=lambda pair: (pair[0], pair[1] if name == "minimum" else not pair[1]))

    low, low_strict = bound("minimum", "exclusiveMinimum")
    high, high_strict = bound("maximum", "exclusiveMaximum")
    step = schema.get("multipleOf")
    if not isinstance(step, (int, float)) or isinstance(step, bool) or step <= 0:
        step = 1 if integer else None
    if step is None:
        value: float = 1
        if low is not None and (value < low or (low_strict and value <= low)):
            value = low + 1
        if high is not None and (value > high or (high_strict and value >= high)):
            value = (low + high) / 2 if low is not None else high - 1
        return value
    if integer and not float(step).is_integer():
        step = step * 2 if float(step * 2).is_integer() else step * 4
    first = -math.inf if low is None else math.ceil(low / step) + (1 if low_strict and (low / step).is_integer() else 0)
    last = math.inf if high is None else (math.floor(high / step)
                                          - (1 if high_strict and (high / step).is_integer() else 0))
    k = max(first, min(last, max(1, round(1 / step))))
    number = k * step
    return int(number) if integer or float(number).is_integer() and isinstance(step, int) else number


@dataclass
class _Builder:
    question: Question
    dialect: str

    def value(self, schema: Any, name: str = "", depth: int = 0) -> Any:
        if schema is True or not isinstance(schema, dict):
            schema = {}
        schema = _merged(schema)
        for candidate in self.candidates(schema, name, depth):
            if _fits(candidate, schema, self.dialect):
                return candidate
        return self.made(schema, name, depth)

    def candidates(self, schema: dict[str, Any], name: str, depth: int) -> list[Any]:
        if "const" in schema:
            return [schema["const"]]
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            lowered = self.question.text.lower()
            named = [v for v in enum if isinstance(v, str) and v and re.search(rf"\b{re.escape(v.lower())}\b", lowered)]
            default = [schema["default"]] if "default" in schema else []
            return [*named, *default, *enum]
        for key in ("anyOf", "oneOf"):
            branches = [b for b in schema.get(key) or [] if isinstance(b, dict)]
            if branches:
                rest = {k: v for k, v in schema.items() if k != key}
                return [self.value({**rest, **_merged(branch)}, name, depth + 1) for branch in branches]
        listed = schema.get("examples")
        examples: list[Any] = listed if isinstance(listed, list) else []
        found: list[Any] = []
        kind = _types(schema)[0]
        if kind == "string":
            found = _question_strings(_kind(name, schema), schema, self.question)
        elif kind in ("integer", "number"):
            found = [n for n in self.question.take("number") if kind == "number" or isinstance(n, int)]
        elif kind in ("object", "array"):
            found = [self.made(schema, name, depth)]
        default = [schema["default"]] if "default" in schema else []
        return [*found, *default, *examples]

    def made(self, schema: dict[str, Any], name: str, depth: int) -> Any:
        """A value made to fit the schema's type and bounds (the question's values first)."""
        kind = _types(schema)[0]
        if kind == "null":
            return None
        if kind == "boolean":
            return False
        if kind in ("integer", "number"):
            return _made_number(schema, kind == "integer")
        if kind == "array":
            return self.array(schema, name, depth)
        if kind == "object":
            return self.object(schema, depth)
        return _made_string(_kind(name, schema), schema, self.question.today)

    def array(self, schema: dict[str, Any], name: str, depth: int) -> list[Any]:
        prefix = [p for p in schema.get("prefixItems") or [] if isinstance(p, (dict, bool))]
        items = schema.get("items")
        low, high = schema.get("minItems"), schema.get("maxItems")
        count = max(low if isinstance(low, int) else 0, 1)
        if isinstance(high, int):
            count = min(count, high)
        count = min(count, max(MAX_ITEMS, low if isinstance(low, int) else 0)) if depth < MAX_DEPTH else 0
        out: list[Any] = []
        for index in range(count):
            sub = prefix[index] if index < len(prefix) else items if isinstance(items, dict) else {}
            item = self.value(sub, name, depth + 1)
            if schema.get("uniqueItems") and item in out:
                item = _varied(item, index)
            out.append(item)
        return out

    def object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        given = schema.get("properties")
        properties: dict[str, Any] = given if isinstance(given, dict) else {}
        required = [r for r in schema.get("required") or [] if isinstance(r, str)]
        wanted = [p for p in properties if p in required or (depth == 0 and self.named(p, properties[p]))]
        wanted += [r for r in required if r not in properties]
        extra = schema.get("additionalProperties")
        low = schema.get("minProperties")
        for name in properties:
            if isinstance(low, int) and len(wanted) < low and name not in wanted:
                wanted.append(name)
        out: dict[str, Any] = {}
        if depth >= MAX_DEPTH:
            return out
        for name in wanted:
            sub = properties.get(name, extra if isinstance(extra, dict) else {})
            out[name] = self.value(sub, name, depth + 1)
        filler = 0
        while isinstance(low, int) and len(out) < low and extra is not False and filler < low:
            filler += 1
            out[f"value{filler}"] = self.value(extra if isinstance(extra, dict) else {}, "", depth + 1)
        return out

    def named(self, name: str, schema: Any) -> bool:
        """Whether the question names a value for the optional property ``name``."""
        if not isinstance(schema, dict):
            return False
        enum = schema.get("enum")
        if isinstance(enum, list):
            lowered = self.question.text.lower()
            return any(isinstance(v, str) and v and re.search(rf"\b{re.escape(v.lower())}\b", lowered) for v in enum)
        if _types(schema)[0] != "string":
            return False
        kind = _kind(name, schema)
        return kind not in ("text",) and self.question.has(kind)


def _varied(item: Any, index: int) -> Any:
    if isinstance(item, str):
        return f"{item} {index + 1}"
    if isinstance(item, bool):
        return not item
    if isinstance(item, (int, float)):
        return item + index
    return item


def tool_arguments(parameters: Any, question: str, *, today: date | None = None) -> dict[str, Any]:
    """Arguments for a tool whose JSON Schema is ``parameters``, from ``question`` (see the module).

    They validate against the schema whenever a value of each property can be found or
    made; a schema nothing can satisfy gets the best attempt, and the tool's own check says why."""
    schema = parameters if isinstance(parameters, dict) else {}
    declared = schema.get("$schema")
    dialect = declared if isinstance(declared, str) else ""
    inlined = _inline(schema, schema)
    attempts = [Question.read(question, today), Question.read("", today)]
    first: dict[str, Any] | None = None
    for asked in attempts:
        built = _Builder(asked, dialect).value(inlined if isinstance(inlined, dict) else {}, depth=0)
        arguments = built if isinstance(built, dict) else {}
        if _fits(arguments, schema, dialect):
            return arguments
        first = arguments if first is None else first
    return first or {}
