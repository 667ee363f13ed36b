"""One protocol session with one MCP server, through the official SDK (TOOL-1, TOOL-2, TOOL-4).

The only module that imports the SDK (about a second of start-up): the rest of the app
reads ``toolservers.endpoints`` and imports this one where it connects, so a web or
worker process that never calls a tool server never pays for it.

Nothing of the protocol is written here: the SDK's ``Client`` negotiates the version
(``server/discover`` of 2026-07-28, else the ``initialize`` handshake), lists, calls,
cancels and reports progress. This module chooses the transport, applies the network
rules (``toolservers.http``), bounds what a server may hand us, and turns the SDK's
failures into one error whose message a person can act on (``ToolServerError``).

A ``Connection`` is used from ordinary threads: it lives as a task in the process's MCP
event loop (``toolservers.bridge``) and its methods block until the loop answers.
"""
from __future__ import annotations

import json
import math
import os
import queue
import threading
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2
from django.conf import settings
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT, ElicitResult, Implementation
from pydantic import ValidationError

from context.surrogates import replace_lone_surrogates
from models_catalog.errors import ProviderError
from models_catalog.http import check_url
from toolservers import bridge
from toolservers.asking import Asker, CallsInFlight, Inbox, answer_on_loop, current_inbox
from toolservers.endpoints import (
    SSE,
    STREAMABLE_HTTP,
    CallCancelled,
    Endpoint,
    Listing,
    RemoteEndpoint,
    StdioEndpoint,
    ToolServerError,
)
from toolservers.http import GuardRefused, Trace, guarded_client
from toolservers.schemas import SchemaReferenceError, schema_check

CLIENT_INFO = Implementation(name="AgentLoom", version="0.1.0")
MAX_PAGES = 100  # tools/list pages read before giving up on a paginator that never ends
MAX_TOOLS = 1_000
MAX_DESCRIPTION_CHARS = 20_000
MAX_SCHEMA_BYTES = 64 * 1024
POLL_SECONDS = 0.05


def tool_entry(tool: Any) -> dict[str, Any]:
    """A listed tool as AgentLoom keeps it: name, description, input schema, annotations."""
    annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}
    return replace_lone_surrogates({"name": tool.name, "description": tool.description or "",
                                    "input_schema": dict(tool.input_schema), "annotations": annotations})


def tool_problem(entry: dict[str, Any]) -> str | None:
    """Why a listed tool cannot be offered to agents, or None: every provider takes an
    object schema, and a schema no validator reads, or one whose ``$ref`` points outside
    itself (TOOL-6), would fail every call."""
    from jsonschema import SchemaError

    if len(entry["description"]) > MAX_DESCRIPTION_CHARS:
        return f"its description is longer than {MAX_DESCRIPTION_CHARS:,} characters"
    if len(json.dumps(entry["input_schema"])) > MAX_SCHEMA_BYTES:
        return f"its input schema is larger than {MAX_SCHEMA_BYTES // 1024} kB"
    if entry["input_schema"].get("type") != "object":
        return "its input schema is not an object schema"
    try:
        schema_check(entry["input_schema"])
    except SchemaError:
        return "its input schema is not valid JSON Schema"
    except SchemaReferenceError as exc:  # TOOL-6: left out, never fetched
        return str(exc)
    return None


# --- errors -----------------------------------------------------------------------------


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    found = [exc]
    cause = exc.__cause__ or exc.__context__
    return found + (_leaves(cause) if cause is not None and cause is not exc else [])


def _where(endpoint: Endpoint) -> str:
    if isinstance(endpoint, StdioEndpoint):
        return f"the command {os.path.basename(endpoint.command)!r}"
    url = httpx2.URL(endpoint.url)
    return f"{url.host}:{url.port or (443 if url.scheme == 'https' else 80)}"


def classify(exc: BaseException, trace: Trace | None, endpoint: Endpoint) -> ToolServerError:
    """The one error a failed connection or call becomes (never echoing bodies or headers)."""
    if isinstance(exc, ToolServerError):
        return exc
    leaves = _leaves(exc)
    refusal = (trace.refusal if trace else None) or next((e for e in leaves if isinstance(e, GuardRefused)), None)
    if refusal is not None:
        return ToolServerError(str(refusal), code=refusal.code)
    status = trace.first_error_status() if trace else None
    if status in (401, 403):
        return ToolServerError(f"The tool server refused the credentials (HTTP {status}). Check the headers, "
                               "for example the Authorization bearer token.", code="auth", field="headers")
    if any(isinstance(e, (httpx2.ConnectError, ConnectionRefusedError)) for e in leaves):
        return ToolServerError(f"Could not connect to the tool server at {_where(endpoint)}.", code="unreachable",
                               dropped=True)
    if any(isinstance(e, (httpx2.TimeoutException, TimeoutError)) for e in leaves):
        # Not a drop: a call that took too long is not sent again (it may still be running).
        return ToolServerError(f"The tool server at {_where(endpoint)} did not answer in time.", code="timeout")
    if isinstance(endpoint, StdioEndpoint) and any(isinstance(e, (FileNotFoundError, PermissionError)) for e in leaves):
        return ToolServerError(f"The operator's server could not be started: {_where(endpoint)} was not found or "
                               "is not executable.", code="unreachable")
    if status in (404, 405):
        return ToolServerError(f"There is no MCP endpoint at this URL (HTTP {status}).", code="protocol")
    if status is not None and status >= 400:
        return ToolServerError(f"The tool server answered HTTP {status}.", code="server_error", dropped=status >= 500)
    if any(isinstance(e, httpx2.SSEError) for e in leaves):  # a page that is not an event stream
        return ToolServerError("The answer at this URL is not the Model Context Protocol.", code="protocol")
    mcp_error = next((e for e in leaves if isinstance(e, MCPError)), None)
    if mcp_error is not None and mcp_error.code == CONNECTION_CLOSED:
        return ToolServerError(f"The session with the tool server at {_where(endpoint)} ended.", code="dropped",
                               dropped=True)
    if mcp_error is not None and mcp_error.code == REQUEST_TIMEOUT:
        return ToolServerError(f"The tool server at {_where(endpoint)} did not answer in time.", code="timeout")
    if mcp_error is not None:
        # The server's own words are kept apart: a tool result may show them to the model,
        # a registration error never does.
        return ToolServerError(f"The tool server answered with a protocol error (JSON-RPC {mcp_error.code}).",
                               code="protocol", detail=str(mcp_error.error.message or "")[:500])
    if any(isinstance(e, (ValidationError, ValueError, httpx2.SSEError)) for e in leaves):
        return ToolServerError("The answer at this URL is not the Model Context Protocol.", code="protocol")
    if any(isinstance(e, (httpx2.TransportError, anyio.ClosedResourceError, anyio.BrokenResourceError,
                          anyio.EndOfStream, EOFError, OSError)) for e in leaves):
        return ToolServerError(f"The session with the tool server at {_where(endpoint)} ended.", code="dropped",
                               dropped=True)
    return ToolServerError(f"The tool server at {_where(endpoint)} could not be used ({type(exc).__name__}).",
                           code="protocol")


def url_check(endpoint: RemoteEndpoint) -> None:
    """CAT-5 before anything is sent: a refused URL never reaches the SDK."""
    try:
        check_url(endpoint.url, allow_private=endpoint.allow_private)
    except ProviderError as exc:
        raise ToolServerError(exc.message, code=exc.code if exc.code != "provider_unavailable" else "unreachable") \
            from None


# --- one session ------------------------------------------------------------------------


class Connection:
    """One open protocol session, owned by a task in the bridge's loop.

    ``open`` blocks until the session is initialized (or raises ``ToolServerError``);
    ``broken`` is true once the session ended by itself (the server went away).
    """

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.transport = endpoint.transport
        self.protocol_version = ""
        self.server_info: dict[str, Any] = {}
        self._client: Client | None = None
        self._ready = threading.Event()
        self._ended = threading.Event()
        self._error: BaseException | None = None
        self._trace: Trace | None = None
        self._closing: anyio.Event | None = None
        self._owner: Any = None
        self._expired = False
        self._statuses_at_open = 0
        self._calls = CallsInFlight()

    async def _on_elicit(self, context: Any, params: Any) -> ElicitResult:
        """TOOL-10: a server asks the person during a call (``toolservers.asking``)."""
        answer = await answer_on_loop(self._calls, params)
        return ElicitResult(action=answer.action, content=answer.content)  # type: ignore[arg-type]

    # -- opening --

    @classmethod
    def open(cls, endpoint: Endpoint) -> Connection:
        if isinstance(endpoint, RemoteEndpoint):
            url_check(endpoint)
        transports = [endpoint.transport] if endpoint.transport else [STREAMABLE_HTTP, SSE]
        error: ToolServerError | None = None
        for transport in transports:
            connection = cls(endpoint)
            connection.transport = transport
            try:
                connection._start()
                return connection
            except ToolServerError as exc:
                # The older transport's error says more unless it, too, found no endpoint.
                error = exc if error is None or exc.code != "protocol" else error
                # Only a server that has no Streamable HTTP endpoint gets the older transport.
                if exc.code != "protocol" or transport != STREAMABLE_HTTP:
                    break
        assert error is not None
        raise error

    def _start(self) -> None:
        self._owner = bridge.submit(self._own)
        # The SDK bounds each request by the read time-out; this bounds the whole opening.
        if not self._ready.wait(self.endpoint.timeout + 15):
            self._owner.cancel()
            raise ToolServerError(f"The tool server at {_where(self.endpoint)} did not start a session in time.",
                                  code="timeout")
        if self._client is None:
            raise classify(self._error or RuntimeError("no session"), self._trace, self.endpoint)

    async def _enter(self, stack: AsyncExitStack) -> Client:
        endpoint = self.endpoint
        if isinstance(endpoint, StdioEndpoint):
            params = StdioServerParameters(command=endpoint.command, args=list(endpoint.args), env=dict(endpoint.env))
            errlog = stack.enter_context(open(os.devnull, "w"))  # a server's own log is not ours to keep
            transport: Any = stdio_client(params, errlog=errlog)
        else:
            trace = self._trace = Trace()
            # A call's clock (``call_tool``) ends a call at the server's time-out; the HTTP
            # read time-out is only the backstop for a connection that went silent, and a
            # call's stream is silent while the server waits for the person's answer.
            silent = max(endpoint.timeout, settings.AGENTLOOM_INPUT_WAIT_SECONDS)
            timeout = httpx2.Timeout(silent + 30.0, connect=10.0)
            if self.transport == SSE:
                def factory(headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None,
                            auth: Any = None) -> httpx2.AsyncClient:
                    return guarded_client(allow_private=endpoint.allow_private, trace=trace,
                                          headers={**(headers or {}), **endpoint.headers}, timeout=timeout)

                transport = sse_client(endpoint.url, timeout=10.0, sse_read_timeout=max(silent, 300.0),
                                       httpx_client_factory=factory)
            else:
                http = await stack.enter_async_context(guarded_client(
                    allow_private=endpoint.allow_private, trace=trace, headers=endpoint.headers, timeout=timeout))
                transport = streamable_http_client(endpoint.url, http_client=http)
        client = Client(transport, read_timeout_seconds=endpoint.timeout, client_info=CLIENT_INFO, cache=None,
                        elicitation_callback=self._on_elicit)
        return await stack.enter_async_context(client)

    async def _own(self) -> None:
        self._closing = anyio.Event()
        try:
            async with AsyncExitStack() as stack:
                client = await self._enter(stack)
                self.protocol_version = client.protocol_version
                info = client.server_info
                self.server_info = (info.model_dump(exclude_none=True, include={"name", "title", "version"})
                                    if info else {})
                self._client = client
                self._statuses_at_open = len(self._trace.statuses) if self._trace else 0
                self._ready.set()
                await self._closing.wait()
        except BaseException as exc:  # kept for the thread that waits; the task ends here
            self._error = exc
            if isinstance(exc, anyio.get_cancelled_exc_class()):
                raise
        finally:
            self._ended.set()
            self._ready.set()

    # -- use --

    @property
    def broken(self) -> bool:
        return self._ended.is_set() or self._expired

    def _call_error(self, exc: BaseException) -> ToolServerError:
        """A call's failure; a 404 on an established session means the server no longer
        knows it (it restarted): the spec says the request was not processed, so it can
        be sent again on a new session, whatever the tool does."""
        statuses = self._trace.statuses[self._statuses_at_open:] if self._trace else []
        if 404 in statuses:
            self._expired = True
            return ToolServerError("The tool server no longer knows this session (it restarted or ended it); the "
                                   "call was not processed.", code="session_expired", dropped=True)
        return classify(exc, self._trace, self.endpoint)

    def list_tools(self) -> Listing:
        """Every page of ``tools/list`` (bounded), as kept entries."""
        tools: list[dict[str, Any]] = []
        skipped: list[dict[str, str]] = []

        async def walk() -> None:
            assert self._client is not None
            cursor: str | None = None
            for _ in range(MAX_PAGES):
                page = await self._client.list_tools(cursor=cursor)
                for tool in page.tools:
                    entry = tool_entry(tool)
                    reason = tool_problem(entry)
                    if reason:
                        skipped.append({"name": tool.name, "reason": reason})
                    elif len(tools) < MAX_TOOLS:
                        tools.append(entry)
                cursor = page.next_cursor
                if not cursor:
                    return
            raise ToolServerError(f"The tool server lists more than {MAX_PAGES} pages of tools.", code="protocol")

        try:
            bridge.call(walk, timeout=self.endpoint.timeout * 2)
        except BaseException as exc:
            raise classify(exc, self._trace, self.endpoint) from None
        return Listing(transport=self.transport, protocol_version=self.protocol_version,
                       server_info=self.server_info, tools=tools, skipped=skipped)

    def call_tool(self, name: str, arguments: dict[str, Any], *, cancel: threading.Event,
                  on_progress: Callable[[float, float | None, str | None], None] | None = None,
                  timeout: float | None = None, ask: Asker | None = None) -> dict[str, Any]:
        """``tools/call``; returns the result as the protocol's JSON (``content``,
        ``structuredContent``, ``isError``). ``cancel`` set → the call is abandoned, the
        server sent ``notifications/cancelled``, and ``CallCancelled`` raised. A question
        the server asks meanwhile is put to ``ask`` on this thread (TOOL-10).

        The time-out is this call's own clock, not the SDK's: it stops while the person is
        asked (the SDK's would run on under the earlier revisions' mid-call question)."""
        limit = timeout or self.endpoint.timeout
        inbox = Inbox()
        updates: queue.SimpleQueue[tuple[float, float | None, str | None]] = queue.SimpleQueue()

        # The SDK's ProgressFnT names its parameters: these names, which it may pass by keyword.
        async def on_server_progress(progress: float, total: float | None, message: str | None) -> None:
            updates.put((progress, total, message))

        async def run() -> dict[str, Any]:
            assert self._client is not None
            current_inbox.set(inbox)
            result = await self._client.call_tool(name, arguments, read_timeout_seconds=math.inf,
                                                  progress_callback=on_server_progress)
            return result.model_dump(by_alias=True, mode="json", exclude_none=True)

        self._calls.add(inbox)
        future = bridge.submit(run)
        try:
            started, asked = time.monotonic(), 0.0
            while True:
                try:
                    return future.result(timeout=POLL_SECONDS)
                except TimeoutError:
                    pass
                except BaseException as exc:
                    raise self._call_error(exc) from None
                finally:
                    while on_progress is not None and not updates.empty():
                        on_progress(*updates.get_nowait())
                asked += inbox.serve(ask)
                if cancel.is_set():
                    future.cancel()
                    raise CallCancelled()
                if time.monotonic() - started - asked > limit:
                    future.cancel()  # the SDK sends the cancellation, as its own time-out would
                    raise ToolServerError(f"The tool server at {_where(self.endpoint)} did not answer in time.",
                                          code="timeout")
        finally:
            self._calls.remove(inbox)
            future.cancel()  # a no-op once it ended; else (the asker failed) the call is abandoned

    def close(self) -> None:
        """End the session (the SDK closes the transport: DELETE for HTTP, the process for stdio)."""
        if self._closing is not None and not self._ended.is_set():
            try:
                bridge.portal().call(self._closing.set)
            except RuntimeError:  # the loop is already gone (interpreter exit)
                return
        if self._owner is not None:
            try:
                self._owner.result(timeout=10)
            except BaseException:  # a session that ends badly is still ended
                self._owner.cancel()


def probe(endpoint: Endpoint) -> Listing:
    """Connect, initialize, list every page of tools and close: what registering and
    refreshing a server do (TOOL-1). Raises ``ToolServerError``."""
    connection = Connection.open(endpoint)
    try:
        return connection.list_tools()
    finally:
        connection.close()
