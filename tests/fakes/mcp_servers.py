"""Real MCP servers for tests and benchmarks, built with the official SDK (``mcp``).

``ToolServerApp`` runs an ``MCPServer`` on a real loopback socket (uvicorn on a thread), over
Streamable HTTP or, with ``transport="sse"``, the older HTTP+SSE transport only, behind a
bearer token checked by the SDK's own bearer middleware (a wrong token gets its real 401).
Its tools cover what a run meets on real servers:

* ``echo`` (read-only), ``add`` (structured output), ``big`` (a large text with a marked
  head and tail), ``fail`` (an ``isError`` result), ``picture`` (a PNG), ``links`` (a
  resource link and an embedded resource);
* ``slow`` sends progress notifications and notices the protocol's cancellation;
  ``gated`` reports progress until the test sets ``release`` (no timing margin);
* ``increment`` has a side effect and no hints: it counts its effects in ``effects`` (and
  can be made slow, so a Stop or a killed worker falls inside it);
* ``book_room`` asks the person for details during the call (MCP elicitation, a form),
  through the SDK's resolver, which asks the way the session's revision does (inside the
  result on 2026-07-28, a request of its own before); ``connect_account`` asks the person
  to open a URL (the earlier revision's ``elicit_url``, and on 2026-07-28 a URL request in
  its ``InputRequiredResult``, written by hand: the SDK's resolver asks forms only). Both return what they were
  answered, and ``answers`` keeps it (with ``asking=True``).

``listing_page`` paginates ``tools/list`` (the SDK's server does not), so clients must read
every page. ``seen`` counts the JSON-RPC methods the server received (``initialize``,
``server/discover``, ``tools/list``, ``tools/call``, ``notifications/cancelled``) and the
``DELETE`` requests that end a session, read by
an ASGI wrapper, nothing patched; with ``legacy=True`` the same wrapper makes the server
one of the protocol's earlier, stateful revision (sessions with ``Mcp-Session-Id``).
``rename_tool`` and ``reschema_tool`` change the server after an agent was published;
``offer_with_schema`` adds a tool listed with a hand-written input schema;
``restart`` stops it and serves again on the same port.
"""
from __future__ import annotations

import base64
import json
import socket
import struct
import threading
import time
import zlib
from collections import Counter
from typing import Annotated, Any

import anyio
import uvicorn
from mcp.server import MCPServer
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import (
    ElicitRequest,
    ElicitRequestURLParams,
    EmbeddedResource,
    ImageContent,
    InputRequiredResult,
    ListToolsResult,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field

TOKEN = "mcp-test-token-4f1d2c3b5a69"
READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)


def tiny_png(width: int = 2, height: int = 2) -> bytes:
    """A valid PNG of ``width`` × ``height`` red pixels."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


class _Tokens:
    def __init__(self, app: ToolServerApp) -> None:
        self.app = app

    async def verify_token(self, token: str) -> AccessToken | None:
        return AccessToken(token=token, client_id="agentloom-tests", scopes=[]) if token == self.app.token else None


class _PagedServer(MCPServer):
    """The SDK's server with a paginated ``tools/list`` (``page_size`` tools a page)."""

    page_size = 2

    async def _handle_list_tools(self, ctx: Any, params: Any) -> ListToolsResult:
        tools = await self.list_tools()
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + self.page_size
        return ListToolsResult(tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None)


class _Counting:
    """ASGI wrapper: counts the JSON-RPC methods of every POST body (batches too). With
    ``legacy``, it answers ``server/discover`` as a server of an earlier revision does
    (JSON-RPC "Method not found"), so clients fall back to the stateful ``initialize``
    handshake with an ``Mcp-Session-Id``, as they do with most servers deployed today."""

    def __init__(self, app: Any, seen: Counter[str], *, legacy: bool = False) -> None:
        self.app, self.seen, self.legacy = app, seen, legacy

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "DELETE":
            self.seen["DELETE"] += 1  # a client ending its session (stateful revision)
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            body.extend(message.get("body", b""))
            if not message.get("more_body"):
                break
        try:
            data = json.loads(bytes(body) or b"null")
        except ValueError:
            data = None
        items = data if isinstance(data, list) else [data]
        for item in items:
            if isinstance(item, dict) and "method" in item:
                self.seen[item["method"]] += 1
        discover = next((i for i in items if isinstance(i, dict) and i.get("method") == "server/discover"), None)
        if self.legacy and discover is not None:
            answer = json.dumps({"jsonrpc": "2.0", "id": discover.get("id"),
                                 "error": {"code": -32601, "message": "Method not found"}}).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(answer)).encode())]})
            await send({"type": "http.response.body", "body": answer})
            return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class RoomDetails(BaseModel):
    """The form ``book_room`` asks the person to fill in."""

    guest: str = Field(title="Guest name", description="Who the room is for")
    nights: int = Field(title="Nights", ge=1, le=30)
    breakfast: bool = Field(False, title="Breakfast included")
    door_code: str = Field("", title="Door code", description="A code for the room's door")


CONNECT_URL = "https://calendar.example.com/connect?state=abc"


def _ask_room(room: str) -> Elicit[RoomDetails]:
    return Elicit(f"Booking {room}: who is it for, and for how many nights?", RoomDetails)


class ToolServerApp:
    """An SDK-built MCP server on ``127.0.0.1``; use as a context manager."""

    def __init__(self, *, transport: str = "streamable_http", token: str | None = TOKEN, name: str = "tests",
                 page_size: int = 2, legacy: bool = False, asking: bool = False) -> None:
        self.transport, self.token, self.name, self.legacy = transport, token, name, legacy
        self.asking = asking  # offers book_room and connect_account
        self.seen: Counter[str] = Counter()
        self.effects = 0
        self.increment_delay = 0.0
        self.cancellations = 0
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.answers: list[dict[str, Any]] = []  # what book_room / connect_account were answered
        self.release = threading.Event()  # lets ``gated`` return
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.mcp = self._build(page_size)

    # -- the tools --

    def _build(self, page_size: int) -> MCPServer:
        auth: dict[str, Any] = {}
        if self.token is not None:
            auth = {"token_verifier": _Tokens(self),
                    "auth": AuthSettings(issuer_url="http://127.0.0.1:9", resource_server_url=None)}
        server = _PagedServer(self.name, log_level="CRITICAL", **auth)
        server.page_size = page_size
        app = self

        @server.tool(annotations=READ_ONLY)
        def echo(text: str) -> str:
            """Repeat the text back."""
            app.calls.append(("echo", {"text": text}))
            return text

        @server.tool(annotations=READ_ONLY)
        def add(a: int, b: int) -> dict[str, int]:
            """Add two integers; the sum comes back as structured content too."""
            return {"sum": a + b}

        @server.tool(annotations=READ_ONLY)
        def big(size: int) -> str:
            """A long log of ``size`` characters: it starts with BEGIN-OF-LOG and ends with END-OF-LOG."""
            head, tail = "BEGIN-OF-LOG\n", "\nERROR at the very end: END-OF-LOG"
            body = ("line of an ordinary log\n" * (size // 24 + 1))[: max(size - len(head) - len(tail), 0)]
            return head + body + tail

        @server.tool(annotations=READ_ONLY)
        def fail(reason: str) -> str:
            """Always fails, with the reason given."""
            raise ToolError(f"refused: {reason}")  # the SDK's way to an isError result with words

        @server.tool(annotations=READ_ONLY)
        def picture() -> list[Any]:
            """A small red picture."""
            data = base64.b64encode(tiny_png(24, 16)).decode()
            return [TextContent(type="text", text="Here is the picture."),
                    ImageContent(type="image", data=data, mime_type="image/png")]

        @server.tool(annotations=READ_ONLY)
        def links() -> list[Any]:
            """A resource link and an embedded resource."""
            return [ResourceLink(type="resource_link", uri="file:///srv/report.csv", name="report.csv",
                                 mime_type="text/csv", description="The monthly report"),
                    EmbeddedResource(type="resource", resource=TextResourceContents(
                        uri="file:///srv/notes.txt", mime_type="text/plain", text="Remember the milk."))]

        @server.tool(annotations=READ_ONLY)
        async def slow(steps: int, ctx: Context) -> str:
            """Works for ``steps`` tenths of a second, reporting progress."""
            try:
                for step in range(steps):
                    await ctx.report_progress(step, steps, f"step {step + 1} of {steps}")
                    await anyio.sleep(0.1)
            except anyio.get_cancelled_exc_class():
                app.cancellations += 1
                raise
            return f"finished {steps} steps"

        @server.tool(annotations=READ_ONLY)
        async def gated(ctx: Context) -> str:
            """Waits until the test releases it, telling how long it has waited."""
            tick = 0
            while not app.release.is_set():
                tick += 1
                await ctx.report_progress(tick, None, f"waiting for the release ({tick})")
                await anyio.sleep(0.1)
            return "released"

        @server.tool()
        async def increment(by: int) -> str:
            """Adds ``by`` to the server's counter (a side effect)."""
            app.effects += by
            if app.increment_delay:
                await anyio.sleep(app.increment_delay)
            return f"counter is now {app.effects}"

        if self.asking:
            @server.tool()
            async def book_room(room: str,
                                details: Annotated[ElicitationResult[RoomDetails], Resolve(_ask_room)]) -> str:
                """Books a room, asking the person for the guest's details."""
                if details.action != "accept":
                    app.answers.append({"action": details.action})
                    return f"not booked: the person chose {details.action}"
                app.answers.append({"action": "accept", **details.data.model_dump()})
                return f"booked {room} for {details.data.guest}, {details.data.nights} nights"

            @server.tool()
            async def connect_account(ctx: Context) -> str | InputRequiredResult:
                """Connects the person's account: they open a page of the service to sign in."""
                message, url = "Sign in to the calendar service to connect it.", CONNECT_URL
                if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
                    action = (await ctx.elicit_url(message, url, "connect-1")).action
                elif not ctx.input_responses:  # 2026-07-28: the question rides the result
                    return InputRequiredResult(input_requests={"connect": ElicitRequest(
                        params=ElicitRequestURLParams(message=message, url=url))})
                else:
                    action = ctx.input_responses["connect"].action
                app.answers.append({"action": action})
                return f"connection: {action}"

        return server

    def rename_tool(self, old: str, new: str) -> None:
        """The server renames a tool (after an agent froze the old name)."""
        tool = self.mcp._tool_manager.get_tool(old)
        self.mcp.remove_tool(old)
        self.mcp.add_tool(tool.fn, name=new, description=tool.description, annotations=tool.annotations)

    def reschema_tool(self, name: str) -> None:
        """The server changes ``name``'s input schema (a new required argument)."""
        self.mcp.remove_tool(name)

        def replaced(text: str, loud: bool) -> str:
            return text.upper() if loud else text

        self.mcp.add_tool(replaced, name=name, description="Repeat the text back.", annotations=READ_ONLY)

    def offer_with_schema(self, fn: Any, schema: dict[str, Any]) -> None:
        """The server offers ``fn`` as a tool but lists ``schema`` as its input schema, as a
        server whose schemas are written by hand does (``$ref`` to wherever it likes)."""
        self.mcp.add_tool(fn, annotations=READ_ONLY)
        self.mcp._tool_manager.get_tool(fn.__name__).parameters = schema

    # -- serving --

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}" + ("/sse" if self.transport == "sse" else "/mcp")

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def _serve(self) -> None:
        app = self.mcp.sse_app() if self.transport == "sse" else self.mcp.streamable_http_app()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit it: without it the server's answer (headers, then body)
        # waits for the client's delayed ACK, 40 ms a call, as a real deployment's would not.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        wrapped = _Counting(app, self.seen, legacy=self.legacy)
        self._server = uvicorn.Server(uvicorn.Config(wrapped, log_level="warning", lifespan="on"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the MCP test server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        """Stop at once, as a crash would: open streams are cut, not waited for."""
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = True
            assert self._thread is not None
            self._thread.join(timeout=20)
            self._server = None

    def restart(self) -> None:
        """Stop, then serve the same tools again on the same port: every session is gone."""
        self.stop()
        self.mcp = self._build(getattr(self.mcp, "page_size", 2))
        self._serve()

    def __enter__(self) -> ToolServerApp:
        self._serve()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
