"""Where a tool server is, what it listed, and how using it fails (TOOL-1, TOOL-2, TOOL-4).

Plain data, no SDK: the selectors, services and a run's sessions describe servers with
these, and only ``toolservers.protocol`` (imported where a connection is made) speaks MCP.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from models_catalog.private_hosts import AllowPrivate

STREAMABLE_HTTP = "streamable_http"
SSE = "sse"
STDIO = "stdio"
DEFAULT_TIMEOUT = 60.0


class ToolServerError(Exception):
    """A tool server could not be used. ``str()`` is safe to show: it never carries a
    header value or a response body. ``field`` names the input to fix (``url``,
    ``headers``) when there is one; ``dropped`` means the session ended under a call."""

    def __init__(self, message: str, *, code: str, field: str = "url", dropped: bool = False,
                 detail: str = "") -> None:
        super().__init__(message)
        self.message, self.code, self.field, self.dropped, self.detail = message, code, field, dropped, detail


class CallCancelled(Exception):
    """The caller gave up on a call (Stop); the server was sent the protocol's cancellation."""


@dataclass(frozen=True)
class RemoteEndpoint:
    """A space's server: a URL, the headers entered for it, the transport it speaks
    (empty: find out, trying Streamable HTTP and then the older HTTP+SSE)."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    transport: str = ""
    allow_private: AllowPrivate = True
    timeout: float = DEFAULT_TIMEOUT


@dataclass(frozen=True)
class StdioEndpoint:
    """An operator's server: a command the worker starts (TOOL-2)."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    transport: str = STDIO


Endpoint = RemoteEndpoint | StdioEndpoint


@dataclass(frozen=True)
class Listing:
    """What a server said about itself and its tools (every page)."""

    transport: str
    protocol_version: str
    server_info: dict[str, Any]
    tools: list[dict[str, Any]]
    skipped: list[dict[str, str]] = field(default_factory=list)  # tools we cannot offer, with why
