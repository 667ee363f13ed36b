"""Writes for tool servers: register, change, refresh, delete, and the operator's listing
(TOOL-1, TOOL-2).

Every write that touches the URL or the headers connects first (initialize, then every
page of ``tools/list``) and saves only when the server answered: a refused token, a dead
port, a metadata address or a protocol error is a 400 naming the cause — to an operator;
anyone else gets one ``unreachable`` for every cause the network decided
(``models_catalog.reachability``) — and nothing is saved. The connection happens before
any transaction opens (STYLE 10), with the request's database connection given back
meanwhile, one of a bounded number of probes per process and per person
(``core/slow_work.py``). Header values are written to the encrypted column and
never returned, logged or put into a message.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import Conflict, Forbidden, ValidationFailed
from core.slow_work import slow_work
from models_catalog.reachability import UNREACHED_CODE, UNREACHED_TOOLS, refused_by_input
from toolservers.endpoints import Endpoint, Listing, RemoteEndpoint, StdioEndpoint, ToolServerError
from toolservers.listing import listing_changes
from toolservers.models import ToolServer
from toolservers.selectors import OPERATOR_READ_ONLY, operator_servers, servers_for_space
from toolservers.validation import header_hints, headers_check, name_check, timeout_check, url_check

logger = logging.getLogger("toolservers")

# Filled at start-up by the apps above this one (the agents app: drafts that choose a
# server's tools), so this app never imports them. Each returns the names of the users.
IN_USE_CHECKS: list[Callable[[ToolServer], list[str]]] = []


def _scrub(text: str, headers: Mapping[str, str]) -> str:
    """Belt and braces: messages are built without header values, but a value pasted into
    the URL field would otherwise come back in "host … could not be resolved"."""
    for value in headers.values():
        text = text.replace(value, "[REDACTED]")
    return text


def _probe(endpoint: Endpoint) -> Listing:
    """Connect, list every page, close (``toolservers.protocol.probe``, which imports the
    SDK: loaded here, when a server is first reached, not when the app starts)."""
    from toolservers.protocol import probe

    return probe(endpoint)


def _listing(endpoint: RemoteEndpoint, *, by, detailed: bool) -> Listing:
    """Connect and list, or a 400 naming the cause (``url`` or ``headers``). Unless
    ``detailed`` (the caller is an operator), every cause but a URL the guard refuses by its
    spelling is one answer, ``unreachable`` (``models_catalog.reachability``); the log has it.
    One of the process's and ``by``'s bounded probes (429/503 past them), holding no
    database connection while the server answers (``core/slow_work.py``)."""
    try:
        with slow_work("probe", person=getattr(by, "pk", None)):
            return _probe(endpoint)
    except ToolServerError as exc:
        message = _scrub(exc.message, endpoint.headers)
        # The message names host and port at most: never the URL's query or a header.
        logger.info("tool server refused: code=%s: %s", exc.code, message)
        if not detailed and not (exc.code == "unsafe_url" and
                                 refused_by_input(endpoint.url, allow_private=endpoint.allow_private)):
            raise ValidationFailed(UNREACHED_TOOLS, code=UNREACHED_CODE, fields={"url": UNREACHED_TOOLS}) from None
        raise ValidationFailed(message, code=exc.code, fields={exc.field: message}) from None


def _keep_listing(server: ToolServer, listing: Listing) -> None:
    server.transport = listing.transport
    server.protocol_version = listing.protocol_version
    server.server_info = listing.server_info
    server.tools_json = json.dumps(listing.tools, ensure_ascii=False)
    server.skipped = listing.skipped
    server.listed_at = timezone.now()
    server.list_error = ""


def _name_free(*, space_id: int, name: str, server: ToolServer | None = None) -> None:
    taken = servers_for_space(space_id=space_id).get(name)
    if taken is not None and (server is None or taken.pk != server.pk):
        whose = "an operator's server" if taken.space_id is None else "another server of this space"
        raise ValidationFailed("The name is taken.", code="name_taken", fields={"name": f"already used by {whose}"})


def toolserver_in_use_by(*, server: ToolServer) -> list[str]:
    return sorted({name for check in IN_USE_CHECKS for name in check(server)})


def toolserver_register(*, space, data: Mapping[str, Any], created_by=None,
                        detailed: bool = False) -> tuple[ToolServer, Listing]:
    """Register a remote server in ``space`` (the caller checked they administer it).
    ``detailed``: the caller is an operator, who reads why a connection failed."""
    name = name_check(data.get("name"))
    url = url_check(data.get("url"))
    headers = headers_check(data.get("headers"))
    timeout = timeout_check(data.get("timeout_seconds", ToolServer._meta.get_field("timeout_seconds").default))
    _name_free(space_id=space.pk, name=name)
    listing = _listing(RemoteEndpoint(url=url, headers=headers, allow_private=settings.ALLOW_PRIVATE_MODEL_ENDPOINTS,
                                      timeout=float(timeout)), by=created_by, detailed=detailed)
    server = ToolServer(space=space, kind=ToolServer.Kind.REMOTE, name=name, url=url,
                        headers=json.dumps(headers) if headers else "", header_hints=header_hints(headers),
                        timeout_seconds=timeout, created_by=created_by)
    _keep_listing(server, listing)
    try:
        with transaction.atomic():
            server.save()
    except IntegrityError:  # registered by someone else meanwhile
        raise Conflict("A server with this name was just registered in this space.", code="name_taken") from None
    logger.info("tool server %s registered in space %s: %d tools over %s", server.pk, space.pk, len(listing.tools),
                listing.transport)
    return server, listing


def toolserver_update(*, server: ToolServer, data: Mapping[str, Any], by=None,
                      detailed: bool = False) -> ToolServer:
    """Change a remote server. A new URL or new headers connect again first (a probe of
    ``by``'s); a new URL needs its headers again, because headers go only to the URL they
    were entered for (CAT-6)."""
    if server.space_id is None:  # TOOL-2: the callers refuse the operator's servers first; so does this
        raise Forbidden(OPERATOR_READ_ONLY, code="read_only")
    unknown = set(data) - {"name", "url", "headers", "timeout_seconds"}
    if unknown:
        raise ValidationFailed("Unknown fields.", fields=dict.fromkeys(sorted(unknown), "unknown field"))
    changes: dict[str, Any] = {}
    if "name" in data and data["name"] != server.name:
        changes["name"] = name_check(data["name"])
        _name_free(space_id=server.space_id, name=changes["name"], server=server)
        users = toolserver_in_use_by(server=server)
        if users:
            raise Conflict(f"Agents choose this server's tools by its name ({', '.join(users[:5])}); remove them "
                           "from those agents before renaming it.", code="in_use")
    if "timeout_seconds" in data:
        changes["timeout_seconds"] = timeout_check(data["timeout_seconds"])
    url = url_check(data["url"]) if "url" in data else server.url
    headers = headers_check(data["headers"]) if "headers" in data else server.header_values()
    if url != server.url and "headers" not in data and server.header_values():
        raise ValidationFailed("Enter the headers again for the new URL.", fields={
            "headers": "headers are sent only to the URL they were entered for: give them again with the new URL"})
    if url != server.url or "headers" in data:
        listing = _listing(RemoteEndpoint(url=url, headers=headers,
                                          allow_private=settings.ALLOW_PRIVATE_MODEL_ENDPOINTS,
                                          timeout=float(changes.get("timeout_seconds", server.timeout_seconds))),
                           by=by, detailed=detailed)
        _keep_listing(server, listing)
        changes.update(url=url, headers=json.dumps(headers) if headers else "", header_hints=header_hints(headers))
    for name, value in changes.items():
        setattr(server, name, value)
    server.save()
    logger.info("tool server %s updated: %s", server.pk, ", ".join(sorted(changes)) or "nothing")
    return server


def toolserver_refresh(*, server: ToolServer, by=None, detailed: bool = False) -> tuple[ToolServer, dict[str, Any]]:
    """List the tools again (a probe of ``by``'s) and say what changed since the last listing (TOOL-1)."""
    endpoint = RemoteEndpoint(url=server.url, headers=server.header_values(), transport=server.transport,
                              allow_private=settings.ALLOW_PRIVATE_MODEL_ENDPOINTS,
                              timeout=float(server.timeout_seconds))
    before = server.tools
    listing = _listing(endpoint, by=by, detailed=detailed)
    _keep_listing(server, listing)
    server.save()
    return server, listing_changes(before, listing.tools)


def toolserver_delete_check(*, server: ToolServer) -> None:
    """The one rule for deleting a server, the API's and the console's: not while an agent's
    draft chooses one of its tools or its latest published version froze one (a 409 naming
    them and what to do). Older versions that froze its tools say, when called, that the
    server no longer exists."""
    users = toolserver_in_use_by(server=server)
    if users:
        shown = ", ".join(users[:10]) + (f" and {len(users) - 10} more" if len(users) > 10 else "")
        raise Conflict(f"The server {server.name!r} was not deleted: agents use its tools: {shown}. Untick its tools "
                       "in those agents, save and publish them, then delete the server.", code="in_use")


def toolserver_delete(*, server: ToolServer) -> None:
    """Delete a server no agent uses (``toolserver_delete_check``)."""
    toolserver_delete_check(server=server)
    server.delete()
    logger.info("tool server %s deleted", server.pk)


def operator_servers_sync(*, names: list[str] | None = None) -> dict[str, str]:
    """List the operator's servers (TOOL-2): start each command, initialize, list, stop, and
    keep what it listed. Run by workers when they start and by ``manage.py toolservers_sync``
    — never by a web request. Returns ``{name: "ok" | the failure}``."""
    outcome: dict[str, str] = {}
    for name, config in operator_servers().items():
        if names is not None and name not in names:
            continue
        server = ToolServer.objects.filter(space__isnull=True, name=name).first() or ToolServer(
            kind=ToolServer.Kind.OPERATOR, name=name, transport="stdio")
        try:
            listing = _probe(StdioEndpoint(command=config.command, args=config.args, env=config.env,
                                          timeout=config.timeout))
        except ToolServerError as exc:
            server.list_error = exc.message[:300]
            outcome[name] = exc.message
        else:
            _keep_listing(server, listing)
            outcome[name] = "ok"
        server.timeout_seconds = int(config.timeout)
        try:
            server.save()
        except IntegrityError:  # another worker listed it at the same moment: theirs stands
            pass
    logger.info("operator's tool servers listed: %s", ", ".join(f"{k}: {v}" for k, v in outcome.items()) or "none")
    return outcome
