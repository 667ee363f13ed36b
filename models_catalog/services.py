"""Writes for model connections, and discovery as the API and the admin console run it.

Every write goes through ``validation.connection_validate``. The key rules (CAT-1, CAT-6)
it enforces, once, for the API and the admin form:

* the key is write-only: it goes into the encrypted column and ``api_key_hint``, and no
  function here returns it, logs it or puts it into an error message;
* a stored key never follows a connection to another provider or base URL by itself
  (the same rule as discovery's ``resource_id``): changing either needs the key again;
* ``context_window_source`` and ``max_output_tokens_source`` say where each figure came
  from (CAT-2). Discovery hands out a signed *discovery token* per model; a create or
  update that carries it keeps, for each figure it attests unchanged, that figure's source
  (``provider``, ``official_manifest`` or ``platform_default``). A figure typed by hand is
  ``manual``;
* the model's known maxima (CAT-3) are stored with their sources and every write is
  checked against them, the space's other connections of the model included
  (``models_catalog.maxima``), not only a write that carries a token;
* what the server keeps per request (``server_context_window``, CAT-7) is a fact about
  the endpoint and model, also taken only from a token: typing a larger window keeps it,
  so requests still never rely on more than the server keeps.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, TypedDict

import httpx
from django.conf import settings
from django.db import transaction
from django.views.decorators.debug import sensitive_variables

from core.db_pool import connection_give_back_for_slow_work
from core.errors import Conflict, DomainError, TryLater, ValidationFailed
from core.slow_work import slow_work
from models_catalog.discovery import DiscoveryResult, discover_models
from models_catalog.errors import (
    AuthenticationError,
    InvalidRequestError,
    ProviderError,
    UnsafeURLError,
)
from models_catalog.http import HttpLimits, Resolver
from models_catalog.maxima import maxima_stored_in_space
from models_catalog.models import (
    FigureSource,
    ModelConnection,
)
from models_catalog.providers import find_provider
from models_catalog.providers.window_probe import is_private_endpoint
from models_catalog.reachability import (
    UNREACHED_CODE,
    UNREACHED_MODELS,
    discovery_failure_is_the_networks,
    official_endpoint,
)
from models_catalog.selectors import connection_in_use_by
from models_catalog.slots import ServerBusy, model_slot, server_concurrency
from models_catalog.validation import connection_validate, discovery_token_make

logger = logging.getLogger("agentloom.catalog")
# CAT-11: how long discovery waits for a busy one-slot server while the admin watches,
# and when to try again after that.
DISCOVERY_SLOT_WAIT = 20.0
RETRY_BUSY_SERVER = 10



class UpstreamFailed(DomainError):
    """The provider could not be read (down, rate limiting, over quota, too large): 502.

    Never a 401/403 from us: those would read as "your session with AgentLoom ended".
    """

    status = 502
    code = "provider_error"


class ConnectionData(TypedDict, total=False):
    """What a create or an update may carry (absent = keep; ``api_key: ""`` clears the key)."""

    name: str
    provider: str
    base_url: str
    api_key: str
    model: str
    context_window: int
    max_output_tokens: int
    safety_margin_tokens: int
    supports_images: bool
    concurrency: int | None
    discovery_token: str


# --- discovery --------------------------------------------------------------------------

_FIELD_FOR_CODE = {
    "auth": "api_key",
    "unknown_provider": "provider",
    "unsafe_url": "base_url",
    "redirect_refused": "base_url",
    "base_url_required": "base_url",
    "invalid_request": "base_url",
}


def _scrub(text: str, secret: str | None) -> str:
    """Belt and braces: provider errors are built without the key, but a key pasted into
    the URL field would otherwise come back in "host … could not be resolved"."""
    return text.replace(secret, "[REDACTED]") if secret else text


@sensitive_variables("api_key")
def models_discover(
    *,
    provider: str,
    base_url: str | None,
    api_key: str | None,
    detailed: bool = False,
    transport: httpx.BaseTransport | None = None,
    resolver: Resolver | None = None,
    limits: HttpLimits | None = None,
    by=None,
    probe: bool = True,
    probe_model: str | None = None,
    probe_limits: HttpLimits | None = None,
) -> DiscoveryResult:
    """List a provider's models (CAT-1) under the operator's private-endpoint switch.

    One of the process's and ``by``'s bounded probes (429/503 past them, TryLater), with
    the request's database connection given back while the provider answers
    (``core/slow_work.py``).

    Saves nothing. Provider failures become domain errors with a user-safe message:
    a refused key, an unknown provider or an unusable URL is the caller's input (400,
    naming the field); anything on the provider's side is a 502. Unless ``detailed`` (the
    caller is an operator) or the URL is a provider's official endpoint, a failure whose
    words depend on what answered at the URL is one 400 ``unreachable`` for all of them
    (``models_catalog.reachability``); the details are logged. ``transport`` and
    ``resolver`` replace the network in tests and benchmarks; the URL guard still runs.
    Makes network calls: never call it inside a database transaction.
    """
    # Read while the request still holds its connection: slow work gives it back, and a
    # query after that would borrow one for as long as the server takes to answer.
    concurrency = server_concurrency(base_url) if base_url else None
    try:
        # CAT-11: a one-slot server's list call is a request like any other (llama-cpp-python
        # ends the stream it is answering when another request comes): it waits its turn.
        with slow_work("probe", person=getattr(by, "pk", None)), \
                model_slot(base_url=base_url, concurrency=concurrency, max_wait=DISCOVERY_SLOT_WAIT):
            if concurrency is not None:
                connection_give_back_for_slow_work()  # the slot's claim borrowed one: not held meanwhile
            result = discover_models(
                provider=provider,
                base_url=base_url or None,
                api_key=api_key or None,
                allow_private=settings.ALLOW_PRIVATE_MODEL_ENDPOINTS,
                transport=transport,
                resolver=resolver,
                limits=limits,
                probe=probe,
                probe_model=probe_model,
                probe_limits=probe_limits,
            )
    except ServerBusy:
        raise TryLater("The model server is answering other requests (it answers only so many at once): "
                       "try again in a moment.", retry_after=RETRY_BUSY_SERVER, code="model_server_busy") from None
    except ProviderError as exc:
        message = _scrub(exc.message, api_key)
        logger.info("discovery failed: provider=%s code=%s status=%s: %s", provider, exc.code, exc.status, message)
        if not detailed and not official_endpoint(provider=provider, base_url=base_url) and \
                discovery_failure_is_the_networks(exc, url=base_url or "",
                                                  allow_private=settings.ALLOW_PRIVATE_MODEL_ENDPOINTS):
            raise ValidationFailed(UNREACHED_MODELS, code=UNREACHED_CODE, fields={"base_url": UNREACHED_MODELS}) \
                from None
        if isinstance(exc, (AuthenticationError, InvalidRequestError, UnsafeURLError)):
            field = _FIELD_FOR_CODE.get(exc.code, "base_url")
            raise ValidationFailed(message, code=exc.code, fields={field: message}) from None
        raise UpstreamFailed(message, code=exc.code) from None
    logger.info("discovery listed %d models: provider=%s shape=%s", len(result.models), provider, result.api_shape)
    return result


# --- writes -----------------------------------------------------------------------------


@sensitive_variables("key", "data", "fields")
def _window_from_server(*, connection: ModelConnection | None, data: ConnectionData | Mapping[str, Any],
                        fields: Mapping[str, Any]) -> ConnectionData | Mapping[str, Any] | None:
    """CAT-8 on a save: a valid write (``fields``) whose window would stay the platform
    default, for a kind of server that may publish none (``ProviderSpec.window_probe``),
    asks the server first — discovery of that model: its list or native API, else one
    probe — and returns the write with the discovery token of what it said, as if the
    admin had used that result (None: nothing to add). A typed window is kept, but the
    server's list is still read for how many requests it takes at once (CAT-11) while that
    is unknown; no probe then. Nothing is asked when the write carries a token, for a
    hosted provider, or at a public address (not even the list is read). When the server
    cannot be read, the save goes on with the platform default (flagged for the admin, as
    before).
    """
    if data.get("discovery_token"):
        return None
    window_unknown = "context_window" not in data and \
        fields.get("context_window_source") == FigureSource.PLATFORM_DEFAULT
    # CAT-11: a typed window still leaves how many requests the server takes at once to
    # learn (llama-cpp-python's server: one) -- read from its list, never probed for.
    concurrency_unknown = "concurrency" not in data and fields.get("concurrency") is None
    if not window_unknown and not concurrency_unknown:
        return None
    spec = find_provider(fields.get("provider"))
    if spec is None or not spec.window_probe or not fields.get("base_url"):
        return None
    if not settings.ALLOW_PRIVATE_MODEL_ENDPOINTS or not is_private_endpoint(fields["base_url"]):
        return None  # a public address is a hosted service: its window is never asked this way
    key = fields["api_key"] if "api_key" in fields else (connection.api_key if connection is not None else "")
    try:
        result = models_discover(provider=fields["provider"], base_url=fields["base_url"], api_key=key or None,
                                 probe=window_unknown, probe_model=fields["model"])
    except DomainError as exc:
        logger.info("the server's window could not be read before saving: %s", exc.code)
        return None
    found = next((m for m in result.models if m.id == fields["model"]), None)
    if found is None:
        return None
    said_window = window_unknown and found.context_window_source != FigureSource.PLATFORM_DEFAULT
    if not said_window and not (concurrency_unknown and found.concurrency):
        return None
    token = discovery_token_make(provider=result.provider, base_url=result.base_url, model=found)
    return {**data, "discovery_token": token}


def _validated(*, connection: ModelConnection | None, data: ConnectionData | Mapping[str, Any], space_id: int,
               ask_server: bool) -> dict[str, Any]:
    """The fields to write: checked first (bad input is a 400 before any network call),
    then, when the window would stay the default, completed by what the server says
    (CAT-8) and checked again — an output limit the server's window cannot hold is then a
    400 naming it (CAT-3, CAT-12)."""
    stored = maxima_stored_in_space(space_id=space_id)
    fields = connection_validate(connection=connection, data=data, stored_maxima=stored)
    asked = _window_from_server(connection=connection, data=data, fields=fields) if ask_server else None
    if asked is not None:
        fields = connection_validate(connection=connection, data=asked, stored_maxima=stored)
    return fields


def connection_create(*, space, data: ConnectionData | Mapping[str, Any], ask_server: bool = True) -> ModelConnection:
    """Create a connection in ``space`` (the caller checked the caller is its admin). A
    window that would be the platform default is asked of a local server first (CAT-8)
    unless ``ask_server`` is False (a caller inside a transaction: no network there)."""
    fields = _validated(connection=None, data=data, space_id=space.pk, ask_server=ask_server)
    connection = ModelConnection.objects.create(space=space, **fields)
    logger.info("model connection %s created in space %s (%s, key %s)", connection.pk, space.pk,
                connection.provider, "set" if connection.api_key_hint else "none")
    return connection


def connection_update(*, connection: ModelConnection, data: ConnectionData | Mapping[str, Any],
                      ask_server: bool = True) -> ModelConnection:
    """Apply a partial update; only the fields that changed are written. A window still at
    the platform default is asked of a local server first (CAT-8) unless ``ask_server``
    is False."""
    fields = _validated(connection=connection, data=data, space_id=connection.space_id, ask_server=ask_server)
    changed = [name for name, new in fields.items() if name == "api_key" or getattr(connection, name) != new]
    for name in changed:
        setattr(connection, name, fields[name])
    if "context_window" in changed and connection.learned_context_window:
        # A new window typed or discovered is a new statement about the server: what an
        # earlier refusal taught is forgotten (a refusal teaches it again if still true).
        connection.learned_context_window, connection.learned_window_at, connection.learned_window_note = None, None, ""
        changed += ["learned_context_window", "learned_window_at", "learned_window_note"]
    if changed:
        connection.save(update_fields=[*changed, "updated_at"])
        logger.info("model connection %s updated: %s", connection.pk, ", ".join(sorted(changed)))
    return connection


def connection_delete(*, connection: ModelConnection) -> None:
    """Delete a connection no agent uses; 409 naming the agents otherwise.

    The row is locked first, so an agent created meanwhile cannot slip in between the
    check and the delete (Agent.model_connection is PROTECT as a last line of defence).
    """
    with transaction.atomic():
        locked = ModelConnection.objects.select_for_update().defer("api_key").get(pk=connection.pk)
        users = sorted(set(connection_in_use_by(connection=locked)))
        if users:
            raise Conflict(
                f"The connection is used by agents ({', '.join(users[:5])}{'…' if len(users) > 5 else ''}); "
                "move them to another connection first.",
                code="in_use",
            )
        locked.delete()
    logger.info("model connection %s deleted", connection.pk)
