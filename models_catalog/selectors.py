"""Reads for model connections. Nothing here writes.

Reach rules (SPEC §9, §11, see ``core.spaces.selectors``): a connection is visible
to the members of its space; only the space's admins may change it or read its stored
key for discovery.

API permissions come from space membership only: a Django superuser who is not a member
of a space has no API reach into it (the admin console is the operator's tool).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Q, QuerySet

from core.api.fields import id_from_text
from core.errors import Forbidden, NotFound, ValidationFailed
from core.spaces.models import Membership
from core.spaces.selectors import space_get_for_admin, space_require_admin, user_administers_a_space
from models_catalog.errors import ProviderError
from models_catalog.manifest import normalise_base_url
from models_catalog.models import ModelConnection, ModelPrice
from models_catalog.providers import get_provider

# --- connections ----------------------------------------------------------------------


def connection_list_for_user(*, user, space_id: int | None = None) -> QuerySet[ModelConnection]:
    """Connections of every space the caller belongs to; the encrypted key is never loaded."""
    spaces = Membership.objects.filter(user=user).values("space_id")
    query = ModelConnection.objects.filter(space_id__in=spaces).defer("api_key")
    if space_id is not None:
        query = query.filter(space_id=space_id)
    return query.order_by("name", "id")


def connection_get_for_user(*, connection_id: Any, user) -> ModelConnection:
    """A connection of one of the caller's spaces; 404 for anything else."""
    pk = id_from_text(str(connection_id))
    if pk is None:
        raise NotFound("Model connection not found.")
    connection = connection_list_for_user(user=user).filter(pk=pk).first()
    if connection is None:
        raise NotFound("Model connection not found.")
    return connection


def connection_get_for_admin(*, connection_id: Any, user) -> ModelConnection:
    """A connection the caller may change: 404 outside their spaces, 403 for plain members."""
    connection = connection_get_for_user(connection_id=connection_id, user=user)
    space_require_admin(space_id=connection.space_id, user=user)
    return connection


def connection_in_use_by(*, connection: ModelConnection) -> list[str]:
    """Names of the agents whose draft or published versions read this connection.

    A published version reads its key from here at run time (RUN-4), so deleting a
    connection that only an old version still uses would break those sessions too. Read
    through the reverse relations agents declare, so the catalog never imports them.
    """
    drafts = connection.agents.values_list("name", flat=True)
    versions = connection.versions.values_list("agent__name", flat=True)
    return sorted(set(drafts) | set(versions))


def effective_base_url(*, provider: str, base_url: str | None) -> str:
    """The base URL a provider is really called at (its default when left blank, in the
    form its API answers at: Anthropic's SDK form gains ``/v1``), normalised."""
    base = (base_url or "").strip()
    try:
        spec = get_provider(provider)
    except ProviderError:  # an unknown provider is reported by the caller's validation
        return normalise_base_url(base) if base else ""
    base = spec.base_url_form(base or spec.default_base_url or "")
    return normalise_base_url(base) if base else ""


def connection_stored_key_for_discovery(*, connection: ModelConnection, provider: str, base_url: str | None) -> str:
    """The stored key of ``connection``, for an edit form that left the key field empty (CAT-1).

    Only when provider and base URL are unchanged: otherwise a space admin could point
    the stored key at a server of their choosing and read it there. Refusals are 400s
    naming the field that changed. The caller has already checked it may use the connection.
    """
    if provider != connection.provider:
        raise ValidationFailed(
            "The stored API key is reused only for the same provider: enter the key again.",
            code="key_reuse_refused",
            fields={"provider": "differs from the stored connection's provider; the stored key is not reused"},
        )
    if effective_base_url(provider=provider, base_url=base_url) != effective_base_url(
        provider=connection.provider, base_url=connection.base_url
    ):
        raise ValidationFailed(
            "The stored API key is reused only for the same base URL: enter the key again.",
            code="key_reuse_refused",
            fields={"base_url": "differs from the stored connection's base URL; the stored key is not reused"},
        )
    # The list query defers the column; this loads (and decrypts) it for this one use.
    return ModelConnection.objects.values_list("api_key", flat=True).get(pk=connection.pk) or ""


def discovery_key_for_user(
    *, user, provider: str, base_url: str | None, api_key: str | None,
    resource_id: int | None = None, space_id: int | None = None,
) -> str | None:
    """Check the caller may run discovery and pick the key it uses (CAT-1).

    Discovery is for space admins. With ``resource_id`` (an edit form) the caller must
    administer that connection's space (404 outside it, 403 as a plain member); a typed
    key wins, an empty one reuses the stored key when provider and base URL are
    unchanged. Without it, ``space_id`` names the space, or any space the caller
    administers will do: nothing is saved, so no single space has to be chosen.
    """
    if resource_id is not None:
        connection = connection_get_for_admin(connection_id=resource_id, user=user)
        if space_id is not None and space_id != connection.space_id:
            raise ValidationFailed("The connection belongs to another space.",
                                   fields={"resource_id": "not a connection of the given space"})
        if api_key:
            return api_key
        return connection_stored_key_for_discovery(connection=connection, provider=provider, base_url=base_url)
    if space_id is not None:
        space_get_for_admin(user=user, space_id=space_id)
    elif not user_administers_a_space(user=user):
        raise Forbidden("Only space admins can discover models.")
    return api_key


# --- prices ---------------------------------------------------------------------------


def model_prices(*, models: Iterable[tuple[str, str]]) -> dict[tuple[str, str], ModelPrice]:
    """The admin-set price of each ``(provider, model)`` that has one (one query)."""
    wanted = set(models)
    if not wanted:
        return {}
    match = Q()
    for provider, model in wanted:
        match |= Q(provider=provider, model=model)
    return {(price.provider, price.model): price for price in ModelPrice.objects.filter(match)}


def connection_has_key(*, connection_id: int | None) -> bool | None:
    """Whether the connection holds a key, read from its masked hint (the key itself is
    never read); None when there is no such connection (deleted since)."""
    hints = list(ModelConnection.objects.filter(pk=connection_id).values_list("api_key_hint", flat=True)[:1]) \
        if connection_id is not None else []
    return bool(hints[0]) if hints else None
