"""A model's known maxima, kept with its connection and checked on every write (CAT-3).

What a model allows — its maximum output and its context window as the provider or its
server publishes them (vLLM's ``max_model_len``, OpenRouter's
``top_provider.max_completion_tokens``, Anthropic's ``max_tokens``…), or the official
manifest's figures for an exact id at an official endpoint — is read at discovery and
attested by the discovery token. Checked only in the request that carried the token, a
later PATCH (or a create without a token) could set 16,000 output tokens on a model that
allows 8,192, and every run would then fail at the provider. So a connection stores each
maximum with where it came from, and ``connection_validate`` checks every write — create
with or without a token, PATCH, the admin form — against :func:`maxima_known`, per figure:

1. the discovery token, when it attests this provider, endpoint and model: a fresh
   statement, so what it says (or leaves unsaid) replaces what was stored;
2. else what was learned from the provider for this provider, endpoint and model in the
   same space: the connection's own stored figure first, then the most recently saved
   other connection's (:func:`maxima_stored_in_space`), so a create without a token is
   checked against what another connection of the model learned;
3. else the official manifest, read live, so a newer edition replaces a stored manifest
   figure.

What a server keeps per request (Ollama's ``num_ctx``, llama.cpp's ``n_ctx``) is not a
maximum: a window above it is allowed with a warning (CAT-7). Only a new discovery raises a
stored maximum; the refusal says so.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from django.db.models import Q

from models_catalog.manifest import manifest_lookup
from models_catalog.models import FigureSource, ModelConnection
from models_catalog.selectors import effective_base_url

FIGURES = ("context_window", "max_output_tokens")
# The two sources a maximum can have, as the columns spell them (str(): the choices' values).
FROM_PROVIDER = str(FigureSource.PROVIDER)
FROM_MANIFEST = str(FigureSource.OFFICIAL_MANIFEST)
_WHAT = {"context_window": "context window", "max_output_tokens": "maximum output"}


@dataclass(frozen=True)
class Maximum:
    """One figure's known maximum and its source: ``provider`` or ``official_manifest``."""

    value: int
    source: str

    @property
    def where(self) -> str:
        """Where it came from, in the admin's words."""
        if self.source == FROM_MANIFEST:
            return "from the official manifest"
        return "as the provider published it at discovery"

    def refusal(self, *, figure: str, model: str) -> str:
        """The 400's words for ``figure`` set above this maximum: the cap, what it is, where it
        came from, and what to do when the server really allows more."""
        refused = f"at most {self.value:,} for {model} (its {_WHAT[figure]}, {self.where})"
        if self.source == FROM_MANIFEST:
            return refused
        return refused + "; if the server now allows more, discover the models again and use the new result"


class StoredMaxima(Protocol):
    """What a space has learned from the provider about ``model`` at a (normalised) base URL."""

    def __call__(self, *, provider: str, base_url: str, model: str) -> Mapping[str, Maximum]: ...


def maxima_of(connection: ModelConnection) -> dict[str, Maximum]:
    """The maxima ``connection`` stores, by figure name (a figure without one is absent)."""
    found: dict[str, Maximum] = {}
    for figure in FIGURES:
        value, source = getattr(connection, f"{figure}_maximum"), getattr(connection, f"{figure}_maximum_source")
        if value and source:
            found[figure] = Maximum(value=value, source=source)
    return found


def maxima_fields(maxima: Mapping[str, Maximum]) -> dict[str, Any]:
    """The connection's columns for ``maxima``; a figure without a known maximum is cleared."""
    fields: dict[str, Any] = {}
    for figure in FIGURES:
        maximum = maxima.get(figure)
        fields[f"{figure}_maximum"] = maximum.value if maximum else None
        fields[f"{figure}_maximum_source"] = maximum.source if maximum else ""
    return fields


def maxima_known(*, provider: str, base_url: str | None, model: str, attested: Mapping[str, Maximum] | None,
                 own: Mapping[str, Maximum], stored: StoredMaxima | None) -> dict[str, Maximum]:
    """The maxima a write of ``model`` at ``provider``/``base_url`` is checked against and
    stores (the order in the module docstring). ``attested`` is the discovery token's (None:
    no token for this model); ``own`` what the connection stores while its model and
    endpoint are unchanged; ``stored`` the space's lookup (None: nothing else is asked)."""
    endpoint = effective_base_url(provider=provider, base_url=base_url)
    entry = manifest_lookup(base_url=endpoint, model_id=model)
    known: dict[str, Maximum] = {}
    if entry is not None:
        known = {"context_window": Maximum(entry.context_window, FROM_MANIFEST),
                 "max_output_tokens": Maximum(entry.max_output_tokens, FROM_MANIFEST)}
    if attested is not None:
        return {**known, **attested}
    learned = {figure: maximum for figure, maximum in own.items() if maximum.source == FROM_PROVIDER}
    if stored is not None and len(learned) < len(FIGURES):
        for figure, maximum in stored(provider=provider, base_url=endpoint, model=model).items():
            learned.setdefault(figure, maximum)
    return {**known, **learned}


def maxima_check(*, model: str, figures: Mapping[str, Any], maxima: Mapping[str, Maximum],
                 errors: dict[str, str]) -> None:
    """CAT-3: a figure above its known maximum is an error on its field naming the maximum
    and its source (a figure already in error is left to that message)."""
    for figure in FIGURES:
        value, maximum = figures.get(figure), maxima.get(figure)
        if (maximum is not None and figure not in errors and isinstance(value, int)
                and not isinstance(value, bool) and value > maximum.value):
            errors[figure] = maximum.refusal(figure=figure, model=model)


def maxima_stored_in_space(*, space_id: int) -> StoredMaxima:
    """The lookup ``connection_validate`` asks for maxima learned from the provider by the
    space's connections: per figure, the most recently saved connection's with the same
    provider, endpoint and model. One query per write; the key column is never loaded.

    Only the same space: another space's connections to a private endpoint are not the
    caller's to learn about, not even through a refusal."""

    def lookup(*, provider: str, base_url: str, model: str) -> dict[str, Maximum]:
        rows = (ModelConnection.objects
                .filter(space_id=space_id, provider=provider, model=model)
                .filter(Q(context_window_maximum_source=FROM_PROVIDER)
                        | Q(max_output_tokens_maximum_source=FROM_PROVIDER))
                .only("provider", "base_url", *(f"{f}_maximum" for f in FIGURES),
                      *(f"{f}_maximum_source" for f in FIGURES))
                .order_by("-updated_at", "-pk"))
        found: dict[str, Maximum] = {}
        for row in rows:
            if effective_base_url(provider=row.provider, base_url=row.base_url) != base_url:
                continue
            for figure, maximum in maxima_of(row).items():
                if maximum.source == FROM_PROVIDER:
                    found.setdefault(figure, maximum)
        return found

    return lookup
