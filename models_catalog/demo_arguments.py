"""The offline demo model's tool arguments, built from the tool's JSON Schema and the
question. Pure and deterministic: no Django, no I/O, no randomness.

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
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from typing import Any

from models_catalog.demo_question import Question

MAX_DEPTH = 8  # how deep a schema is followed (nested objects, references)
MAX_ITEMS = 3  # items made for an array beyond its minItems: none; this caps minItems' cost

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
