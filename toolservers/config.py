"""The operator's tool servers (TOOL-2): ``AGENTLOOM_MCP_SERVERS`` names a JSON file in the
shape other MCP clients use::

    {"mcpServers": {
        "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
        "git":  {"command": "python", "args": ["-m", "mcp_server_git", "-r", "/srv/repo"],
                 "spaces": [1, 4], "timeout": 30}}}

``args``, ``env`` (values the server needs, such as its own API key: secret, redacted like
model keys), ``spaces`` (the ids of the spaces that may use it; absent = every space) and
``timeout`` (seconds per call, default 60) are optional. The file is read once when
settings load; a bad one stops start-up with one line naming the variable. Workers start
these commands; no page or API call can add, change or start one. Pure: no Django.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NAME = re.compile(r"^[a-z][a-z0-9_]{0,30}$")
MAX_TIMEOUT = 3600


class ServersFileError(ValueError):
    """The file named by ``AGENTLOOM_MCP_SERVERS`` cannot be used (the message says why)."""


@dataclass(frozen=True)
class OperatorServer:
    name: str
    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    spaces: tuple[int, ...] | None = None  # None: every space
    timeout: float = 60.0

    def visible_to(self, space_id: int) -> bool:
        return self.spaces is None or space_id in self.spaces


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ServersFileError(f"{what} must be a list of strings")
    return tuple(value)


def _server(name: str, raw: Any) -> OperatorServer:
    where = f"mcpServers.{name}"
    if not NAME.fullmatch(name):
        raise ServersFileError(f"{where}: a name is a lower-case letter, then letters, digits or _ (at most 31)")
    if not isinstance(raw, dict):
        raise ServersFileError(f"{where} must be an object")
    unknown = sorted(set(raw) - {"command", "args", "env", "spaces", "timeout"})
    if unknown:
        raise ServersFileError(f"{where}: unknown field {unknown[0]!r} (only stdio servers: command, args, env, "
                               "spaces, timeout)")
    command = raw.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ServersFileError(f"{where}.command must be a non-empty string")
    env = raw.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise ServersFileError(f"{where}.env must be an object of strings")
    spaces = raw.get("spaces")
    if spaces is not None and (not isinstance(spaces, list) or
                               not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in spaces)):
        raise ServersFileError(f"{where}.spaces must be a list of space ids")
    timeout = raw.get("timeout", 60)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT:
        raise ServersFileError(f"{where}.timeout must be a number of seconds from 1 to {MAX_TIMEOUT}")
    return OperatorServer(name=name, command=command, args=_strings(raw.get("args", []), f"{where}.args"),
                          env=dict(env), spaces=tuple(spaces) if spaces is not None else None, timeout=float(timeout))


def servers_parse(text: str) -> dict[str, OperatorServer]:
    """The servers of a file's text; ``ServersFileError`` naming the first problem."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ServersFileError(f"is not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers"), dict):
        raise ServersFileError('must be an object with "mcpServers": {name: {command, args?, env?}}')
    return {name: _server(name, raw) for name, raw in data["mcpServers"].items()}


def servers_read(path: str | None) -> dict[str, OperatorServer]:
    """The servers of the file at ``path`` (none when unset)."""
    if not path:
        return {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ServersFileError(f"cannot be read ({exc.strerror})") from None
    return servers_parse(text)
