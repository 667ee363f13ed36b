"""What the chat calls a tool step: ``server · tool`` for a server tool, a built-in by its name.

Requests name a server tool by its function name (``context.tool_names``: ``git__git_log``,
sanitized, cut from the front past 64 characters, or prefixed with a hash when two names
collide), so the name cannot be split back: ``my_server__get__log`` could be either pair.
The version froze each server tool with the function name its requests carry
(``agents.server_tools``), and the label is read from there. A name the version does not
know (a built-in, or a tool of a server since removed from it) is shown as it came.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

SEPARATOR = " · "


def tool_labels(frozen: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Function name → ``server · tool`` for each frozen server tool of a version."""
    labels: dict[str, str] = {}
    for entry in frozen:
        function, server, tool = entry.get("function"), entry.get("server"), entry.get("tool")
        if isinstance(function, str) and isinstance(server, str) and isinstance(tool, str) and server and tool:
            labels[function] = f"{server}{SEPARATOR}{tool}"
    return labels


def tool_label(name: str, labels: Mapping[str, str]) -> str:
    """How the chat names the tool a call names: its label, or the name as it came."""
    return labels.get(name, name)
