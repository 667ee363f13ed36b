"""An MCP server that counts its effects in a file, built with the official SDK (``mcp``).

The approval tests (TOOL-9) must count how many times a call really took effect, across
worker processes that are SIGKILLed and started again: a counter in the server's memory
would do for one process, a line in a file does for all. Each effect appends one line
(JSON: tool, arguments, the pid that served it, the wall-clock time) to the file named by the environment
variable ``AGENTLOOM_EFFECTS_FILE`` at the time of the call, and ``fsync``s it before the
tool answers, so a line exists for every effect a client could have caused.

Three tools, one per kind of call a person may be asked about:

* ``lookup`` — ``readOnlyHint``: reads a balance (a read still counts, so a read run twice
  is seen);
* ``set_flag`` — ``idempotentHint``: sets a named flag (doing it again changes nothing,
  but it is still an effect);
* ``send_payment`` — no hints at all, so by the protocol's defaults destructive and not
  idempotent: the one a duplicate would hurt.

``hold`` (a set of tool names) makes those tools wait after their effect until they are
taken out of it, so a test can kill a worker while a chosen call is known to be in flight
— a condition, not a timing margin. The server runs on a real loopback socket (uvicorn on a thread).
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp.server import MCPServer
from mcp_types import ToolAnnotations

EFFECTS_FILE_ENV = "AGENTLOOM_EFFECTS_FILE"
TOOLS = ("lookup", "set_flag", "send_payment")
READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
IDEMPOTENT = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False)


def effect_write(tool: str, arguments: dict[str, Any]) -> None:
    """One line for one effect, on disk before the tool answers."""
    path = os.environ[EFFECTS_FILE_ENV]
    with open(path, "a") as log:
        log.write(json.dumps({"tool": tool, "arguments": arguments, "pid": os.getpid(), "at": time.time()}) + "\n")
        log.flush()
        os.fsync(log.fileno())


def effects_read(path: str | Path) -> list[dict[str, Any]]:
    """Every effect written to ``path`` so far, in order (none when the file is absent)."""
    if not os.path.exists(path):
        return []
    with open(path) as log:
        return [json.loads(line) for line in log if line.strip()]


class CountingServer:
    """The three counting tools on ``127.0.0.1``; use as a context manager."""

    def __init__(self, *, name: str = "pay") -> None:
        self.name = name
        self.hold: set[str] = set()  # the tools that wait after their effect while named here
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.mcp = self._build()

    def _build(self) -> MCPServer:
        server = MCPServer(self.name, log_level="CRITICAL")
        hold = self.hold

        async def after_effect(tool: str) -> None:
            while tool in hold:  # released by the test, once it has done what the call's flight is for
                await anyio.sleep(0.02)

        @server.tool(annotations=READ_ONLY)
        async def lookup(account: str) -> str:
            """Read an account's balance."""
            effect_write("lookup", {"account": account})
            await after_effect("lookup")
            return f"The balance of {account} is 120.00 EUR."

        @server.tool(annotations=IDEMPOTENT)
        async def set_flag(name: str, value: bool) -> str:
            """Set a named flag on the account (setting it again changes nothing)."""
            effect_write("set_flag", {"name": name, "value": value})
            await after_effect("set_flag")
            return f"The flag {name} is now {'on' if value else 'off'}."

        @server.tool()
        async def send_payment(to: str, amount: float) -> str:
            """Send money to someone. It cannot be undone."""
            effect_write("send_payment", {"to": to, "amount": amount})
            await after_effect("send_payment")
            return f"Sent {amount:.2f} EUR to {to}."

        return server

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def __enter__(self) -> CountingServer:
        app = self.mcp.streamable_http_app()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as in tests.fakes.mcp_servers
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the counting MCP server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.hold.clear()
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = True
            assert self._thread is not None
            self._thread.join(timeout=20)
            self._server = None
