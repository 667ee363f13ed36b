"""A tool's JSON Schema, resolved within itself (TOOL-4, TOOL-6). Pure: no Django, no I/O.

One home for the two questions every schema of a tool is asked: what validates a call's
arguments, and whether the schema can be used at all. Both read ``$ref`` the same way:
against the schema itself (its ``$defs``, its anchors, its embedded ``$id`` resources) and
the JSON Schema meta-schemas ``jsonschema`` ships, and nothing else.

Why a registry of our own: left to itself, ``jsonschema`` fetches a ``$ref`` it does not
hold with ``urllib`` — environment proxies, redirects followed, no time-out — so a
third-party tool server could make a worker read an internal or metadata address, and a
schema fetched from there would reach the model in the argument error's words. Here the
retrieve function refuses every URI, so no reference ever leaves the process; a reference
that does not resolve is a problem the listing reports (the tool is left out) and a call
reports as a tool error (a version frozen before listings were checked).
"""
from __future__ import annotations

from collections import deque
from functools import lru_cache
from typing import Any, NoReturn

REFERENCE_KEYWORDS = ("$ref", "$dynamicRef")
MAX_REFERENCE_SHOWN = 200


class SchemaReferenceError(Exception):
    """A ``$ref`` of a tool's schema that does not resolve within the schema."""

    def __init__(self, reference: str) -> None:
        super().__init__(reference)
        self.reference = reference[:MAX_REFERENCE_SHOWN]

    def __str__(self) -> str:
        return (f"its input schema refers to {self.reference!r}, which is not within the schema "
                "(references resolve within the schema only; nothing is fetched)")


def _refuse(uri: str) -> NoReturn:
    """The registry's retrieve function: nothing outside the schema is ever fetched."""
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(uri)


@lru_cache(maxsize=1)
def within_itself() -> Any:
    """The registry every tool schema is read with: empty, and its retrieve refuses all.
    Built on first use, so a process that never checks a schema never imports the library."""
    from referencing import Registry

    return Registry(retrieve=_refuse)  # type: ignore[call-arg]  # attrs fields mypy does not see (as in jsonschema)


def schema_check(schema: dict[str, Any]) -> None:
    """Raise ``jsonschema.SchemaError`` when ``schema`` is not valid JSON Schema, and
    ``SchemaReferenceError`` when one of its references does not resolve within it."""
    from jsonschema.validators import validator_for

    validator_for(schema).check_schema(schema)
    reference = unresolvable_reference(schema)
    if reference is not None:
        raise SchemaReferenceError(reference)


def schema_validator(schema: dict[str, Any]) -> Any:
    """A validator of ``schema`` that resolves references within it only (``schema_check``'s
    errors when it cannot be used)."""
    from jsonschema.validators import validator_for

    schema_check(schema)
    # The schema's own resources, crawled once (see ``_crawled``); jsonschema adds the
    # meta-schemas it bundles to the registry it is given (offline).
    return validator_for(schema)(schema, registry=_crawled(schema, within_itself())[0])


def arguments_error(validator: Any, arguments: Any) -> Any:
    """The most relevant error of ``arguments`` against the validator's schema, or None.

    A reference is checked before a validator is made, so none should fail here; if one
    does (a corner of a dialect the walk reads differently), it is ``SchemaReferenceError``
    all the same, never an exception out of the call."""
    from jsonschema.exceptions import best_match
    from referencing.exceptions import Unresolvable

    try:
        return best_match(validator.iter_errors(arguments))
    except Unresolvable as exc:  # jsonschema's wrapped error is one too
        # ``ref`` only: the error's text would quote the whole schema.
        raise SchemaReferenceError(str(getattr(exc, "ref", "") or "a reference")) from None


def _crawled(schema: dict[str, Any], registry: Any) -> tuple[Any, str, Any]:
    """``registry`` with ``schema`` and every resource embedded in it (``$id``), crawled once:
    a registry left uncrawled crawls the whole schema again at each reference to an embedded
    resource (600 of them in 64 kB took 25 s to walk, and as long again to validate a call).
    Returns the registry, the schema's base URI and its resource."""
    from jsonschema.validators import validator_for
    from referencing.jsonschema import DRAFT202012, specification_with

    cls = validator_for(schema)
    dialect = cls.ID_OF(cls.META_SCHEMA) or ""
    root = specification_with(dialect, default=DRAFT202012).create_resource(schema)
    base = root.id() or ""
    return registry.with_resource(base, root).crawl(), base, root


def unresolvable_reference(schema: dict[str, Any]) -> str | None:
    """The first ``$ref`` (or ``$dynamicRef``) of ``schema`` that does not resolve within it,
    or None. Walks every subschema the schema's dialect defines, with the base URI each
    ``$id`` sets, as the validator would; iterative, so a deep schema cannot overflow the stack."""
    from jsonschema_specifications import REGISTRY as META_SCHEMAS
    from referencing.exceptions import Unresolvable

    registry, base, root = _crawled(schema, META_SCHEMAS.combine(within_itself()))
    pending = deque([(registry.resolver(base_uri=base), root)])
    while pending:
        resolver, resource = pending.popleft()
        contents = resource.contents
        if isinstance(contents, dict):
            for keyword in REFERENCE_KEYWORDS:
                reference = contents.get(keyword)
                if isinstance(reference, str):
                    try:
                        resolver.lookup(reference)
                    except Unresolvable:
                        return reference
        pending.extend((resolver.in_subresource(sub), sub) for sub in resource.subresources())
    return None
