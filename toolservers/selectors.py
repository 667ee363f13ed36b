"""Reads for tool servers: who sees which server, which tools a space may choose, and where
a published tool is called (TOOL-1, TOOL-2, TOOL-3).

Reach, as for model connections (``core.spaces.selectors``): a space's server is seen
by its members and changed by its admins; another space's is "not found". The operator's
servers (``AGENTLOOM_MCP_SERVERS``) are seen by the members of the spaces the file lets
use them, and changed by nobody here.
"""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Q

from core.api.fields import id_from_text
from core.errors import Forbidden, NotFound
from core.spaces.models import Membership
from core.spaces.selectors import space_require_admin
from toolservers.config import OperatorServer
from toolservers.endpoints import Endpoint, RemoteEndpoint, StdioEndpoint
from toolservers.models import ToolServer

OPERATOR_READ_ONLY = ("The operator's servers are configured in the file named by AGENTLOOM_MCP_SERVERS and are "
                      "read-only here; the workers list them when they start.")


def operator_servers() -> dict[str, OperatorServer]:
    """The operator's servers as this process's settings read them."""
    return dict(getattr(settings, "MCP_OPERATOR_SERVERS", {}) or {})


def sees_operator_commands(*, user) -> bool:
    """Whether ``user`` may read how the operator's servers are started — command, arguments,
    the names of their environment variables, the spaces they serve (TOOL-2). Operators only
    (active staff who may view tool servers in the console): an argument may carry a token,
    and members and space admins need no more than a server's name, its tools, and that it
    is the operator's."""
    return bool(user.is_authenticated and user.is_active and user.is_staff
                and user.has_perm(f"{ToolServer._meta.app_label}.view_toolserver"))


def _operator_visible(space_ids: set[int]) -> list[str]:
    return [name for name, server in operator_servers().items() if any(server.visible_to(s) for s in space_ids)]


def toolserver_list_for_user(*, user, space_id: int | None = None) -> list[ToolServer]:
    """The servers of the caller's spaces, then the operator's servers those spaces may use
    (listed by a worker: a server not listed yet has no row). Headers are never loaded."""
    spaces = set(Membership.objects.filter(user=user).values_list("space_id", flat=True))
    if space_id is not None:
        spaces &= {space_id}
    operator = _operator_visible(spaces)
    query = (ToolServer.objects.defer("headers")
             .filter(Q(space_id__in=spaces) | Q(space__isnull=True, name__in=operator)))
    return sorted(query, key=lambda s: (s.space_id is None, s.name, s.pk))


def toolserver_get_for_user(*, server_id: Any, user) -> ToolServer:
    pk = id_from_text(str(server_id))
    server = next((s for s in toolserver_list_for_user(user=user) if s.pk == pk), None) if pk else None
    if server is None:
        raise NotFound("Tool server not found.")
    return server


def toolserver_get_for_admin(*, server_id: Any, user) -> ToolServer:
    """A server the caller may change: 404 outside their reach, 403 for plain members, and
    403 for an operator's server whoever asks (TOOL-2: no API call changes a command)."""
    server = toolserver_get_for_user(server_id=server_id, user=user)
    if server.space_id is None:
        raise Forbidden(OPERATOR_READ_ONLY, code="read_only")
    space_require_admin(space_id=server.space_id, user=user)
    return ToolServer.objects.get(pk=server.pk)


def servers_for_space(*, space_id: int) -> dict[str, ToolServer]:
    """Every server an agent of the space may use, by name: its own, then the operator's it
    may use (a space's own server wins a name both have)."""
    operator = [name for name, server in operator_servers().items() if server.visible_to(space_id)]
    found: dict[str, ToolServer] = {}
    for server in ToolServer.objects.defer("headers").filter(space__isnull=True, name__in=operator):
        found[server.name] = server
    for server in ToolServer.objects.defer("headers").filter(space_id=space_id):
        found[server.name] = server
    return found


def server_tool_resolve(*, space_id: int, ref: str,
                        servers: dict[str, ToolServer] | None = None) -> tuple[ToolServer, dict[str, Any]] | None:
    """The server and listed tool a ``"<server>.<tool>"`` reference names for the space."""
    server_name, dot, tool_name = ref.partition(".")
    if not dot or not tool_name:
        return None
    server = (servers if servers is not None else servers_for_space(space_id=space_id)).get(server_name)
    tool = server.tool(tool_name) if server is not None else None
    return (server, tool) if server is not None and tool is not None else None


def toolserver_endpoint(*, server: ToolServer) -> Endpoint | None:
    """Where calls to ``server`` go, or None when this process cannot reach it (an
    operator's server no longer in the file). Decrypts the headers: call it only to send."""
    if server.kind == ToolServer.Kind.OPERATOR:
        config = operator_servers().get(server.name)
        if config is None:
            return None
        return StdioEndpoint(command=config.command, args=config.args, env=config.env, timeout=config.timeout)
    return RemoteEndpoint(url=server.url, headers=server.header_values(), transport=server.transport,
                          allow_private=settings.ALLOW_PRIVATE_MODEL_ENDPOINTS, timeout=float(server.timeout_seconds))


def server_usable_by(*, server: ToolServer, space_id: int) -> bool:
    """A published tool's server is still one the version's space may use (isolation)."""
    if server.space_id is not None:
        return server.space_id == space_id
    config = operator_servers().get(server.name)
    return config is not None and config.visible_to(space_id)
