"""Server tools in agents: choosing them, freezing them at publish, and their drift (TOOL-3, TOOL-5).

An agent's ``tools`` names built-ins (``calculator``) and server tools
(``"<server>.<tool>"``: a server of the agent's space, or an operator's server the space may
use, and a tool of its last listing). Publishing freezes each server tool as the admin saw
it — name, description, input schema, annotations — with the function name requests carry
(``context.tool_names``) and whether it may be re-run on resume: only when its annotations
say ``readOnlyHint`` or ``idempotentHint``, unless the admin overrode it per tool
(``tool_overrides``), frozen too. The frozen list is stored as JSON text, so every request
of the version carries the same bytes (stable prompt-cache prefix).
"""
from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from agents.models import Agent
from agents.tool_registry import APPROVAL_POLICIES, DEFAULT_SERVER_APPROVAL
from context.tool_names import function_names
from core.errors import ValidationFailed
from toolservers.endpoints import Endpoint
from toolservers.listing import drift_text, tool_drift
from toolservers.models import ToolServer
from toolservers.selectors import (
    server_tool_resolve,
    server_usable_by,
    servers_for_space,
    toolserver_endpoint,
)
from toolservers.sessions import RunToolSessions

OVERRIDE_KEYS = {"idempotent": "re-run it on resume (RUN-6)", "observes_screen": "its images are screenshots (CTX-8)"}


def is_server_ref(name: str) -> bool:
    return "." in name


def server_refs_check(*, refs: list[str], space_id: int, stored: Collection[str] = ()) -> None:
    """Every reference names a listed tool of a server the space may use; else a 400.
    ``stored``: the draft's tools as saved; those whose server is gone since are named as such."""
    if not refs:
        return
    servers = servers_for_space(space_id=space_id)
    unknown = [ref for ref in refs if server_tool_resolve(space_id=space_id, ref=ref, servers=servers) is None]
    left_out = {ref: why for ref in unknown if (why := _left_out_because(ref, servers))}
    if left_out:
        # The server listed it and the listing left it out (a schema that cannot be used,
        # TOOL-6): say why, rather than that it does not exist.
        raise ValidationFailed("Server tools that cannot be offered.", fields={"tools": "; ".join(
            f"{ref} was left out when its server was listed: {why}" for ref, why in left_out.items())})
    gone = _gone_text([ref for ref in unknown if ref in stored], servers)
    if gone:
        raise ValidationFailed("Tools of a server that no longer exists.", fields={"tools": gone})
    if unknown:
        names = ", ".join(sorted(servers)) or "none"
        raise ValidationFailed("Unknown server tools.", fields={"tools": (
            f"not a listed tool of a server of this space: {', '.join(unknown)} (servers: {names}; refresh a "
            "server after its tools changed; the operator's servers appear once a worker has listed them)")})


def _refs_of(refs: list[str], server_name: str) -> list[str]:
    return [ref for ref in refs if ref.partition(".")[0] == server_name]


def _gone_text(refs: list[str], servers: Mapping[str, ToolServer]) -> str:
    """What to say of chosen tools whose server no longer exists in the space, or ""."""
    gone = sorted({ref.partition(".")[0] for ref in refs} - set(servers))
    return "; ".join(f"the server {name!r} no longer exists, so these tools cannot be used: "
                     f"{', '.join(_refs_of(refs, name))}. Untick them, or register a server named {name!r} "
                     "in this space again" for name in gone)


def _left_out_because(ref: str, servers: Mapping[str, ToolServer]) -> str | None:
    server_name, _, tool_name = ref.partition(".")
    server = servers.get(server_name)
    skipped = server.skipped if server is not None and isinstance(server.skipped, list) else []
    return next((str(item.get("reason", "")) for item in skipped
                 if isinstance(item, dict) and item.get("name") == tool_name), None)


def tool_overrides_normalize(overrides: Any, *, tools: list[str]) -> dict[str, dict[str, Any]]:
    """``{tool: {"approval": policy}}`` for any chosen tool (TOOL-7); a server tool's may also
    say ``idempotent`` and ``observes_screen`` (true or false, TOOL-5). A 400 names the tool
    and what it accepts."""
    if overrides is None:
        return {}
    if not isinstance(overrides, dict):
        raise ValidationFailed("The tool overrides are not valid.", fields={"tool_overrides": "must be an object"})
    policies = ", ".join(APPROVAL_POLICIES)
    out: dict[str, dict[str, Any]] = {}
    for ref, values in overrides.items():
        server = is_server_ref(ref)
        accepted = ["approval", *OVERRIDE_KEYS] if server else ["approval"]
        shape = (f"an object of approval ({policies}), idempotent or observes_screen (true or false)" if server
                 else f"an object of approval ({policies}): a built-in tool accepts only approval")
        problem = ""
        if ref not in tools:
            # ``memory`` comes with the agent's memory (MEM-2), not from the list of tools.
            problem = ("the agent's memory is off: turn it on to set this tool's policy" if ref == "memory"
                       else "not a tool this agent chooses")
        elif not isinstance(values, dict) or not values:
            problem = f"must be {shape}"
        else:
            for key, value in values.items():
                if key not in accepted:
                    problem = f"{key!r} is not accepted; {shape}"
                elif key == "approval" and value not in APPROVAL_POLICIES:
                    problem = f"approval must be one of {policies}"
                elif key != "approval" and not isinstance(value, bool):
                    problem = f"{key} must be true or false"
                if problem:
                    break
        if problem:
            raise ValidationFailed("The tool overrides are not valid.", fields={"tool_overrides": f"{ref}: {problem}"})
        out[ref] = dict(values)
    return out


def idempotent_by_annotations(annotations: Mapping[str, Any]) -> bool:
    """TOOL-5: only a tool that says it reads only, or that repeating it changes nothing."""
    return annotations.get("readOnlyHint") is True or annotations.get("idempotentHint") is True


def server_tools_freeze(*, tools: list[str], overrides: Mapping[str, Mapping[str, bool]], space_id: int,
                        reserved: list[str]) -> str:
    """The frozen server tools of a version, as JSON text (``reserved``: built-in names)."""
    refs = [name for name in tools if is_server_ref(name)]
    if not refs:
        return "[]"
    servers = servers_for_space(space_id=space_id)
    resolved = []
    for ref in refs:
        found = server_tool_resolve(space_id=space_id, ref=ref, servers=servers)
        if found is None:
            server_name = ref.partition(".")[0]
            if server_name not in servers:
                listed = ", ".join(_refs_of(refs, server_name))
                raise ValidationFailed(
                    f"The server {server_name!r} no longer exists: untick its tools ({listed}), or register a server "
                    f"named {server_name!r} in this space again.",
                    fields={"tools": _gone_text(refs, servers)})
            raise ValidationFailed(f"{ref} is no longer listed by its server: refresh the server, or untick the tool.",
                                   fields={"tools": f"{ref}: its server no longer lists it; refresh the server, "
                                                    "or remove the tool"})
        resolved.append((ref, *found))
    names = function_names([(server.name, tool["name"]) for _, server, tool in resolved], reserved=reserved)
    frozen = []
    for (ref, server, tool), function in zip(resolved, names):
        chosen = overrides.get(ref, {})
        frozen.append({
            "ref": ref, "function": function, "server": server.name, "server_id": server.pk, "kind": server.kind,
            "tool": tool["name"], "description": tool["description"], "input_schema": tool["input_schema"],
            "annotations": tool["annotations"],
            "idempotent": chosen.get("idempotent", idempotent_by_annotations(tool["annotations"])),
            "observes_screen": chosen.get("observes_screen", False),
            "approval": chosen.get("approval", DEFAULT_SERVER_APPROVAL),  # TOOL-7
        })
    return json.dumps(frozen, ensure_ascii=False)


def server_tools_difference(before: str, after: str) -> str:
    """How the server tools a publish would freeze (``after``) differ from a version's
    (``before``), per tool in words, or "" when they would be the same. Which row serves a
    server is not a difference: tools are matched by server name within the space. Nor is
    the approval policy: ``agents.tool_approvals.approval_changes`` says that of every tool."""
    def keyed(text: str) -> dict[str, dict[str, Any]]:
        return {entry["ref"]: {k: v for k, v in entry.items() if k not in ("server_id", "kind", "approval")}
                for entry in json.loads(text or "[]")}

    old, new = keyed(before), keyed(after)
    words = []
    for ref in new:
        a, b = old.get(ref), new[ref]
        if a is None or a == b:
            continue
        what = [label for key, label in (("description", "description"), ("input_schema", "input schema"),
                                         ("annotations", "annotations"), ("function", "function name"))
                if a.get(key) != b.get(key)]
        what += ["your override"] if any(a.get(key) != b.get(key) for key in OVERRIDE_KEYS) else []
        words.append(f"{ref}: {', '.join(what) or 'definition'} changed")
    return "; ".join(words)


def frozen_server_tools(version: Any) -> list[dict[str, Any]]:
    """The server tools a version froze (none for versions published before tool servers);
    a version published before approval policies (TOOL-7) reads as the default."""
    return [{"approval": DEFAULT_SERVER_APPROVAL, **entry} for entry in json.loads(version.server_tools or "[]")]


def frozen_servers(*, version: Any) -> dict[int, ToolServer | None]:
    """The server each frozen tool's ``server_id`` stands for now: that row, or — when it was
    deleted — the server of the same name the version's space may use (tools are matched by
    server name within the space: registering the name again repairs the version); None
    when neither exists."""
    entries = frozen_server_tools(version)
    if not entries:
        return {}
    found: dict[int, ToolServer | None] = {s.pk: s for s in ToolServer.objects.defer("headers").filter(
        pk__in={entry["server_id"] for entry in entries})}
    missing = {entry["server_id"]: entry["server"] for entry in entries if entry["server_id"] not in found}
    if missing:
        by_name = servers_for_space(space_id=version.agent.space_id)
        for server_id, name in missing.items():
            found[server_id] = by_name.get(name)
    return found


def version_tool_drift(version: Any) -> list[dict[str, Any]]:
    """Each frozen server tool against its server's last listing (the console's drift)."""
    out = []
    servers = frozen_servers(version=version)
    for entry in frozen_server_tools(version):
        server = servers.get(entry["server_id"])
        drift = tool_drift(entry, server.tool(entry["tool"]) if server else None)
        gone = f"the server {entry['server']!r} no longer exists: register it again under this name, or publish " \
               "without its tools"
        out.append({**entry, "drift": drift, "drift_text": drift_text(drift) if server else gone,
                    "listed_at": server.listed_at if server else None})
    return out


def _uses(entry: Mapping[str, Any], server: ToolServer, space_id: int) -> bool:
    """A frozen tool is ``server``'s: by its id, or by its name in the version's space (tools
    are matched by server name within the space, so a server registered again under the
    same name serves the versions that froze the old one's tools)."""
    return entry.get("server_id") == server.pk or (
        entry.get("server") == server.name and (server.space_id is None or server.space_id == space_id))


def agents_using_server(server: ToolServer) -> list[str]:
    """The agents that use a tool of ``server``, each as ``"Name (draft, v3)"``: its draft
    chooses one, or its latest published version froze one — the version new chats start
    on (``toolservers.services.IN_USE_CHECKS``). An operator's server is used by the agents
    of every space that has no server of its own by that name."""
    agents = Agent.objects.all() if server.space_id is None else Agent.objects.filter(space_id=server.space_id)
    shadowed: set[int] = set()
    if server.space_id is None:
        shadowed = set(ToolServer.objects.filter(space__isnull=False, name=server.name)
                       .values_list("space_id", flat=True))
    prefix = f"{server.name}."
    found = []
    for agent in agents.only("name", "tools", "space_id").order_by("name", "id"):
        if agent.space_id in shadowed:
            continue
        where = []
        if any(isinstance(t, str) and t.startswith(prefix) for t in agent.tools or []):
            where.append("draft")
        latest = agent.versions.only("version", "server_tools").order_by("-version").first()
        if latest is not None and any(_uses(entry, server, agent.space_id) for entry in frozen_server_tools(latest)):
            where.append(f"v{latest.version}")
        if where:
            found.append(f"{agent.name} ({', '.join(where)})")
    return found


def run_tool_sessions(*, version: Any) -> RunToolSessions:
    """The sessions a run of ``version`` may open: one per server its tools use, each only
    if the version's space may still use it (a server moved out of reach is not called);
    a deleted server is found again by its name (``frozen_servers``)."""
    entries = frozen_server_tools(version)
    if not entries:
        return RunToolSessions({})
    servers = frozen_servers(version=version)
    space_id = version.agent.space_id
    endpoints: dict[int, tuple[str, Endpoint | None]] = {}
    for entry in entries:
        server = servers.get(entry["server_id"])
        usable = server is not None and server_usable_by(server=server, space_id=space_id)
        endpoints[entry["server_id"]] = (entry["server"], toolserver_endpoint(server=server)
                                         if server is not None and usable else None)
    return RunToolSessions(endpoints, gone={pk for pk, server in servers.items() if server is None})


def version_credentials(*, version: Any, sessions: RunToolSessions | None = None) -> list[str]:
    """The credentials a run of ``version`` holds, to be redacted wherever it writes (LOOP-8):
    its connection's API key and its tool servers' header and env values. ``sessions``: the
    run's own, when it has opened them already."""
    connection = version.model_connection
    key = connection.api_key if connection is not None else ""
    if sessions is None:
        sessions = run_tool_sessions(version=version)
    return [key, *sessions.secrets()]
