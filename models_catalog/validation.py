"""Checking a connection's fields, once for the API and the admin form (CAT-1 … CAT-7).

``connection_validate`` turns a create or a partial update into the fields to write, or
one 400 whose ``fields`` name every problem. The key rules: a stored key never follows a
connection to another provider or base URL by itself (CAT-1, CAT-6). The window figures:
a signed *discovery token* attests what discovery read and each figure's source
(``provider``, ``official_manifest``, ``platform_default``; one source per figure, CAT-2),
a figure typed by hand is ``manual``, a figure above the model's known maximum is refused
on every write, with or without a token (CAT-3, ``models_catalog.maxima``), the default
safety margin follows the window (CAT-3), and what the server keeps per request comes only
from a token (CAT-7). What a provider needs (a key, a base URL, none at all) is asked of
its ``ProviderSpec``; no rule here names a provider.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core import signing
from django.views.decorators.debug import sensitive_variables

from context import default_safety_margin
from core.errors import ValidationFailed
from models_catalog.discovery import DiscoveredModel
from models_catalog.manifest import normalise_base_url
from models_catalog.maxima import (
    FROM_PROVIDER,
    Maximum,
    StoredMaxima,
    maxima_check,
    maxima_fields,
    maxima_known,
    maxima_of,
)
from models_catalog.models import (
    CONCURRENCY_MAX,
    PLATFORM_DEFAULT_CONTEXT_WINDOW,
    PLATFORM_DEFAULT_MAX_OUTPUT_TOKENS,
    PLATFORM_DEFAULT_SAFETY_MARGIN,
    FigureSource,
    ModelConnection,
    api_key_hint,
)
from models_catalog.providers import ProviderSpec, find_provider, provider_names
from models_catalog.selectors import effective_base_url
from models_catalog.url_syntax import MalformedURL, url_parse

MAX_FIGURE = 100_000_000  # far above any real window; keeps PositiveIntegerField from overflowing
MAX_KEY_LENGTH = 4_096
TOKEN_SALT = "models_catalog.discovery-figures"
TOKEN_MAX_AGE = 24 * 3600  # a discovery result older than a day should be looked up again
FIGURE_FIELDS = ("context_window", "max_output_tokens")
# Where a discovery token carries each figure's source, and each maximum with its source.
TOKEN_SOURCE_KEYS = {"context_window": "ws", "max_output_tokens": "os"}
TOKEN_MAXIMA_KEYS = {"context_window": ("mw", "mws"), "max_output_tokens": ("mx", "mxs")}


def discovery_token_make(*, provider: str, base_url: str | None, model: DiscoveredModel) -> str:
    """A signed, expiring attestation of one discovered model's figures and their source.

    It lets a later create/update keep each figure's ``provider``/``official_manifest``
    provenance, and the model's maxima with theirs, without trusting the client to say
    where its numbers came from.
    """
    # The model's own window is the manifest's when the window figure is; else the provider said it.
    from_manifest = model.context_window_source == FigureSource.OFFICIAL_MANIFEST
    window_maximum_source = FigureSource.OFFICIAL_MANIFEST if from_manifest else FigureSource.PROVIDER
    payload = {
        "p": provider,
        "u": effective_base_url(provider=provider, base_url=base_url),
        "m": model.id,
        "cw": model.context_window,
        "mo": model.max_output_tokens,
        "ws": model.context_window_source,
        "os": model.max_output_tokens_source,
        "mv": model.manifest_version or "",
        "img": bool(model.supports_images),
        "sc": model.server_context_window,
        "ss": model.server_context_source or "",
        "cc": model.concurrency,  # CAT-11
        "ccs": model.concurrency_source or "",
        # The model's maxima, when the provider or the manifest said, and which of them
        # did (CAT-3 refuses figures above them, on this write and every later one).
        "mx": model.provider_max_output_tokens,
        "mxs": model.max_output_tokens_source if model.provider_max_output_tokens else "",
        "mw": model.model_context_window,
        "mws": window_maximum_source if model.model_context_window else "",
    }
    return signing.dumps(payload, salt=TOKEN_SALT, compress=True)


def discovery_token_read(token: str) -> dict[str, Any]:
    """The payload of a token made by :func:`discovery_token_make`; 400 when forged or stale."""
    try:
        return signing.loads(token, salt=TOKEN_SALT, max_age=TOKEN_MAX_AGE)
    except signing.SignatureExpired:
        raise ValidationFailed("The discovery result is too old.",
                               fields={"discovery_token": "expired; run discovery again"}) from None
    except signing.BadSignature:
        raise ValidationFailed("The discovery token is not valid.",
                               fields={"discovery_token": "not a valid token"}) from None


# --- validation -------------------------------------------------------------------------


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _check_base_url(spec: ProviderSpec, raw: str, errors: dict[str, str]) -> str:
    """The base URL to store: http(s) with a host and no credentials, or the provider's default.

    An offline provider is reached at no URL: nothing is stored, and only its own
    pseudo-endpoint (the demo's ``demo://offline``) is accepted in the field."""
    if spec.offline:
        if raw and normalise_base_url(raw) != spec.default_base_url:
            errors["base_url"] = f"{spec.label} takes no base URL"
        return ""
    if not raw:
        if not spec.default_base_url:
            errors["base_url"] = "required for this provider"
        return spec.default_base_url or ""
    if len(raw) > 500:
        errors["base_url"] = "at most 500 characters"
        return raw
    try:
        url = url_parse(raw)
    except MalformedURL as exc:
        errors["base_url"] = exc.message
        return raw
    if url.userinfo:
        # Stored in clear and shown to every member: credentials belong in api_key.
        errors["base_url"] = "must not contain a user name or password; use the API key field"
    elif url.query or url.fragment:
        errors["base_url"] = "must not contain a query string or fragment"
    # Stored in the form the API answers at, as discovery said (Anthropic's SDK form gains /v1).
    return spec.base_url_form(raw)


def _check_figure(name: str, value: Any, *, minimum: int, errors: dict[str, str]) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= MAX_FIGURE:
        errors[name] = f"must be an integer from {minimum:,} to {MAX_FIGURE:,}"


def _safety_margin(*, connection: ModelConnection | None, data: Mapping[str, Any], window: Any) -> Any:
    """The margin typed, else one an admin set earlier, else the default for the window
    (CAT-3: a share of the window with a floor and a cap, so it follows the window)."""
    if "safety_margin_tokens" in data:
        return data["safety_margin_tokens"]
    if connection is not None and connection.safety_margin_tokens != default_safety_margin(connection.context_window):
        return connection.safety_margin_tokens
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        return default_safety_margin(window)
    return PLATFORM_DEFAULT_SAFETY_MARGIN


@sensitive_variables("key", "data")
def connection_validate(*, connection: ModelConnection | None, data: Mapping[str, Any],
                        stored_maxima: StoredMaxima | None = None) -> dict[str, Any]:
    """Check a create (``connection`` None) or a partial update; return the fields to write.

    Every problem is collected and raised together as one 400 whose ``fields`` use the
    API's field names, so the admin form can attach each message to its input.
    ``stored_maxima`` is the space's lookup of what other connections learned about a
    model's maxima (``maxima.maxima_stored_in_space``); the services and the admin form
    pass it, so every write is checked against them (CAT-3). Apart from that lookup and
    the provider registry: no query, no network.
    """
    errors: dict[str, str] = {}
    current: dict[str, Any] = {}
    if connection is not None:
        current = {name: getattr(connection, name) for name in (
            "name", "provider", "base_url", "model", "context_window", "max_output_tokens",
            "safety_margin_tokens", "context_window_source", "max_output_tokens_source", "manifest_version",
            "supports_images", "server_context_window", "server_context_source", "concurrency",
            "concurrency_source")}

    def value(name: str, default: Any = None) -> Any:
        return data[name] if name in data else current.get(name, default)

    out: dict[str, Any] = {}
    name = _text(value("name"))
    if not name:
        errors["name"] = "required"
    elif len(name) > 200:
        errors["name"] = "at most 200 characters"
    out["name"] = name

    provider = value("provider")
    spec = find_provider(provider)
    if spec is None:
        errors["provider"] = f"must be one of {', '.join(provider_names())}"
    out["provider"] = provider
    raw_base = _text(data["base_url"]) if "base_url" in data else (current.get("base_url") or "")
    out["base_url"] = _check_base_url(spec, raw_base, errors) if spec is not None else raw_base

    model = _text(value("model"))
    if not model:
        errors["model"] = "required"
    elif len(model) > 200:
        errors["model"] = "at most 200 characters"
    out["model"] = model

    # Where the figures come from (CAT-2): attested by a discovery token, typed by hand,
    # unchanged, or the platform default.
    token: dict[str, Any] | None = None
    if data.get("discovery_token"):
        try:
            token = discovery_token_read(data["discovery_token"])
        except ValidationFailed as exc:
            errors.update(exc.fields)
    if token is not None:
        window = data.get("context_window", token["cw"])
        output = data.get("max_output_tokens", token["mo"])
    else:
        window = value("context_window", PLATFORM_DEFAULT_CONTEXT_WINDOW)
        output = value("max_output_tokens", PLATFORM_DEFAULT_MAX_OUTPUT_TOKENS)
    margin = _safety_margin(connection=connection, data=data, window=window)
    _check_figure("context_window", window, minimum=1, errors=errors)
    _check_figure("max_output_tokens", output, minimum=1, errors=errors)
    _check_figure("safety_margin_tokens", margin, minimum=0, errors=errors)
    attests = token is not None and _token_attests(token, out)
    moved = connection is not None and (out["model"] != current["model"] or _endpoint_moved(connection, out))
    if spec is not None:
        # CAT-3 on every write: the token's maxima, else what was stored (this connection's
        # while its model and endpoint stay, else the space's), else the official manifest.
        maxima = maxima_known(provider=provider, base_url=out["base_url"], model=model,
                              attested=_token_maxima(token) if token is not None and attests else None,
                              own=maxima_of(connection) if connection is not None and not moved else {},
                              stored=stored_maxima)
        maxima_check(model=model, figures={"context_window": window, "max_output_tokens": output}, maxima=maxima,
                     errors=errors)
        out.update(maxima_fields(maxima))
    # A window above what the server keeps is allowed (the admin is warned), but the room
    # for input is what the server keeps.
    server_window, server_source = _server_context(connection=connection, current=current, token=token, out=out)
    usable = min(window, server_window) if server_window and isinstance(window, int) else window
    if (not {"context_window", "max_output_tokens", "safety_margin_tokens"} & errors.keys()
            and usable <= output + margin):
        errors["context_window"] = (
            f"must be larger than max_output_tokens + safety_margin_tokens ({output + margin:,}), "
            "or no room is left for input"
            + (f" (the server keeps only {server_window:,} tokens)" if usable != window else "")
        )
        if output >= usable:
            # CAT-3, CAT-12: an output limit the window cannot hold is refused, never lowered
            # behind the admin's back; the field itself is named.
            errors["max_output_tokens"] = (
                f"must be less than the {usable:,}-token window"
                + (" the server keeps" if usable != window or server_source else "")
                + ": an answer and the conversation before it share the window")
    out.update(context_window=window, max_output_tokens=output, safety_margin_tokens=margin,
               server_context_window=server_window, server_context_source=server_source)
    if "supports_images" in data:
        out["supports_images"] = bool(data["supports_images"])
    elif token is not None:
        out["supports_images"] = bool(token["img"])
    else:
        out["supports_images"] = bool(current.get("supports_images", False))
    if token is not None and not attests:
        errors["discovery_token"] = "was issued for another provider, base URL or model"
    else:
        out.update(_figure_sources(current=current if connection is not None else None, data=data,
                                   token=token, moved=moved, figures={"context_window": window,
                                                                      "max_output_tokens": output}))

    out["concurrency"], out["concurrency_source"] = _concurrency(connection=connection, current=current, data=data,
                                                                 token=token, out=out, errors=errors)
    _validate_key(connection=connection, spec=spec, data=data, out=out, errors=errors)
    if errors:
        raise ValidationFailed("The model connection is not valid.", fields=errors)
    return out


def _figure_sources(*, current: Mapping[str, Any] | None, data: Mapping[str, Any], token: Mapping[str, Any] | None,
                    moved: bool, figures: Mapping[str, Any]) -> dict[str, Any]:
    """CAT-2, one source per figure: the token's source for a figure equal to what it
    attests; ``manual`` for a figure typed by hand; on an update, a figure kept while the
    model or endpoint changed becomes ``manual`` too (the admin now vouches for it) unless
    it is still the platform default; else the figure keeps its source.
    ``manifest_version`` stays while any figure keeps a source that is not ``manual``."""
    sources: dict[str, Any] = {}
    if token is not None:
        attested = {"context_window": token["cw"], "max_output_tokens": token["mo"]}
        for figure in FIGURE_FIELDS:
            # "s", the weaker of both, is what tokens issued before per-figure sources carry.
            kept_source = token.get(TOKEN_SOURCE_KEYS[figure]) or token.get("s", FigureSource.PLATFORM_DEFAULT)
            sources[figure] = kept_source if figures[figure] == attested[figure] else FigureSource.MANUAL
        version = token["mv"]
    elif current is None:
        for figure in FIGURE_FIELDS:
            sources[figure] = FigureSource.MANUAL if figure in data else FigureSource.PLATFORM_DEFAULT
        version = ""
    else:
        for figure in FIGURE_FIELDS:
            source = current[f"{figure}_source"]
            retyped = figure in data and data[figure] != current[figure]
            if retyped or (moved and source != FigureSource.PLATFORM_DEFAULT):
                source = FigureSource.MANUAL
            sources[figure] = source
        version = current["manifest_version"]
    kept = any(source != FigureSource.MANUAL for source in sources.values())
    return {**{f"{figure}_source": source for figure, source in sources.items()},
            "manifest_version": version if kept else ""}


def _token_attests(token: Mapping[str, Any], out: Mapping[str, Any]) -> bool:
    """Whether the token was issued for the provider, endpoint and model being saved."""
    return (token["p"], token["u"], token["m"]) == (
        out["provider"], effective_base_url(provider=out["provider"], base_url=out["base_url"]), out["model"])


def _token_maxima(token: Mapping[str, Any]) -> dict[str, Maximum]:
    """The maxima a token attests, with their sources (a token issued before sources were
    carried says ``provider``, which is what its maxima were taken for)."""
    found: dict[str, Maximum] = {}
    for figure, (value_key, source_key) in TOKEN_MAXIMA_KEYS.items():
        value = token.get(value_key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            found[figure] = Maximum(value=value, source=token.get(source_key) or FROM_PROVIDER)
    return found


def _server_context(*, connection: ModelConnection | None, current: Mapping[str, Any],
                    token: Mapping[str, Any] | None, out: Mapping[str, Any]) -> tuple[int | None, str]:
    """What the server keeps for the model being saved: the token's figure when it attests
    this endpoint and model, the stored one while neither changes, else unknown."""
    if token is not None and _token_attests(token, out):
        return token.get("sc") or None, token.get("ss") or ""
    if connection is not None and out["model"] == current["model"] and not _endpoint_moved(connection, out):
        return current["server_context_window"], current["server_context_source"]
    return None, ""


def _concurrency(*, connection: ModelConnection | None, current: Mapping[str, Any], data: Mapping[str, Any],
                 token: Mapping[str, Any] | None, out: Mapping[str, Any],
                 errors: dict[str, str]) -> tuple[int | None, str]:
    """CAT-11: how many calls the server takes at once. The admin's figure (1 … 64; null
    clears it: unknown, no bound), else the token's when it attests this endpoint and
    model, else the stored one while neither changes (a figure the admin set stays when a
    new discovery token comes), else unknown."""
    if "concurrency" in data:
        figure = data["concurrency"]
        if figure is None or figure == "":
            return None, ""
        if isinstance(figure, bool) or not isinstance(figure, int) or not 1 <= figure <= CONCURRENCY_MAX:
            errors["concurrency"] = f"must be a whole number from 1 to {CONCURRENCY_MAX}, or empty (no bound)"
            return None, ""
        return figure, "manual"
    kept = connection is not None and out["model"] == current["model"] and not _endpoint_moved(connection, out)
    if kept and current["concurrency_source"] == "manual":
        return current["concurrency"], current["concurrency_source"]
    if token is not None and _token_attests(token, out) and token.get("cc"):
        return token["cc"], token.get("ccs") or "server"
    if kept:
        return current["concurrency"], current["concurrency_source"]
    return None, ""


def _endpoint_moved(connection: ModelConnection, out: Mapping[str, Any]) -> bool:
    """Whether the update points the connection at another provider or base URL.

    Compared in effective, normalised form: a blank base URL stored for OpenAI and the
    default URL filled in now are the same endpoint.
    """
    if out.get("provider") != connection.provider:
        return True
    return effective_base_url(provider=connection.provider, base_url=out.get("base_url")) != effective_base_url(
        provider=connection.provider, base_url=connection.base_url
    )


@sensitive_variables("key", "data")
def _validate_key(*, connection: ModelConnection | None, spec: ProviderSpec | None, data: Mapping[str, Any],
                  out: dict[str, Any], errors: dict[str, str]) -> None:
    """Decide the key change: ``api_key`` absent keeps the stored key, ``""`` clears it.
    Whether one is needed is the provider's (``spec`` None: an unknown provider, already an error)."""
    if "api_key" in data:
        key = (data["api_key"] or "").strip()  # pasted keys often carry a trailing newline
        if len(key) > MAX_KEY_LENGTH:
            errors["api_key"] = f"at most {MAX_KEY_LENGTH} characters"
        elif not key.isascii() or any(ch.isspace() or ord(ch) < 32 for ch in key):
            # A key must fit an Authorization header: printable ASCII only (the API's
            # serializers say the same; this keeps the admin form from saving a key that
            # would fail every run).
            errors["api_key"] = "must be printable ASCII without spaces or control characters"
        out["api_key"] = key
        out["api_key_hint"] = api_key_hint(key)
        has_key = bool(key)
    else:
        has_key = connection is not None and bool(connection.api_key_hint)
        if connection is not None and has_key and _endpoint_moved(connection, out):
            # CAT-1's rule for stored keys: they never follow the connection elsewhere.
            errors.setdefault(
                "api_key",
                "enter the key again (or an empty key to clear it) when changing the provider or base URL",
            )
    if spec is not None and spec.requires_api_key and not has_key:
        errors.setdefault("api_key", f"required for {spec.label}")
