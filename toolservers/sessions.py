"""A run's protocol sessions: one per server, opened on first use, reused, closed at the end
(TOOL-4), and what a call of a published tool does (TOOL-3 drift, TOOL-5 side effects).

* The first call of a server's tool in a run opens the session and lists the server's tools
  once; a published tool the server no longer offers, or whose input schema moved, is not
  called: the call is a tool error saying so, and the run goes on (TOOL-3).
* A session that ended by itself (the server restarted) is opened again once per run. A
  call the server answered with "no such session" (404: not processed, says the spec) is
  sent again on the new session; a call that was on its way when the connection dropped
  is sent again only if the tool may be repeated (TOOL-5); any other is an ``unknown``
  outcome: it may have taken effect. A server of the protocol's stateless revision keeps
  no session to lose: a restart between calls goes unnoticed.
* Stop abandons the call: the SDK sends ``notifications/cancelled``. A repeatable tool's
  call then ends ``cancelled``; any other is left without a result, so a resume records it
  as unknown and never runs it again (LOOP-7, RUN-6).

Used from the run's tool threads, concurrently: opening is under a lock per server.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from context.surrogates import replace_lone_surrogates
from toolservers.asking import Answer, Asker, Question
from toolservers.endpoints import CallCancelled, Endpoint, ToolServerError
from toolservers.listing import drift_blocks_call, tool_drift
from toolservers.results import ConvertedResult, result_content

if TYPE_CHECKING:
    from toolservers.protocol import Connection

DROPPED_UNKNOWN = ("[unknown outcome] The connection to the tool server was lost while this call was running. It may "
                   "or may not have taken effect: check before relying on it, and do not simply repeat it.")

TIMED_OUT_UNKNOWN = ("[unknown outcome] The tool server did not answer within {seconds:g} seconds; the call was "
                     "cancelled, but it may or may not have taken effect: check before relying on it.")

Progress = Callable[[float, float | None, str | None], None]


class CallRefused(Exception):
    """The call was not made (or failed) for a reason the model should read."""


class CallUnknown(Exception):
    """The call may or may not have taken effect; ``message`` is None after a Stop."""

    def __init__(self, message: str | None) -> None:
        super().__init__(message or "stopped")
        self.message = message


class CallStopped(Exception):
    """A Stop abandoned a call of a repeatable tool: nothing is left to know."""


@dataclass
class _Server:
    endpoint: Endpoint | None  # None: this process cannot reach it (removed, not configured)
    name: str
    lock: threading.Lock
    connection: Connection | None = None
    live: dict[str, dict[str, Any]] | None = None
    reopened: bool = False


def _naming(ask: Asker | None, name: str) -> Asker | None:
    """``ask`` told which server asks."""
    if ask is None:
        return None

    def named(question: Question) -> Answer:
        return ask(replace(question, server=name))

    return named


class RunToolSessions:
    """The sessions of one run, keyed by server id (``endpoints``: where each server is)."""

    def __init__(self, endpoints: Mapping[int, tuple[str, Endpoint | None]], *, gone: set[int] | None = None) -> None:
        self._servers = {pk: _Server(endpoint=endpoint, name=name, lock=threading.Lock())
                         for pk, (name, endpoint) in endpoints.items()}
        self._gone = set(gone or ())  # servers that no longer exist (no row by id or by name)
        self.opened = 0  # sessions initialized during the run (a benchmark and the tests read it)

    def timeout_of(self, server_id: int) -> float:
        """The server's time-out per call (the default for a server this process cannot reach)."""
        server = self._servers.get(server_id)
        return server.endpoint.timeout if server is not None and server.endpoint is not None else 60.0

    def secrets(self) -> list[str]:
        """Header values and the operator's env values: redacted wherever the run writes (LOOP-8)."""
        found: list[str] = []
        for server in self._servers.values():
            endpoint = server.endpoint
            values = getattr(endpoint, "headers", None) or getattr(endpoint, "env", None) or {}
            for value in values.values():
                found.append(value)
                if " " in value:  # "Bearer <token>": the token alone is as secret
                    found.append(value.split(" ", 1)[1])
        return found

    def _open(self, server: _Server) -> Connection:
        from toolservers.protocol import Connection  # the SDK, once a run first calls a server

        assert server.endpoint is not None
        connection = Connection.open(server.endpoint)
        self.opened += 1
        try:
            listing = connection.list_tools()
        except ToolServerError:
            connection.close()
            raise
        server.connection, server.live = connection, {tool["name"]: tool for tool in listing.tools}
        return connection

    def _connection(self, server_id: int) -> tuple[_Server, Connection]:
        server = self._servers.get(server_id)
        if server is not None and server_id in self._gone:
            raise CallRefused(f"The tool server {server.name!r} no longer exists: it was deleted after this agent "
                              "was published, so the tool was not called. An admin can register a server named "
                              f"{server.name!r} in this space again, or untick its tools and publish the agent; "
                              "meanwhile, answer without this tool.")
        if server is None or server.endpoint is None:
            name = server.name if server is not None else "?"
            raise CallRefused(f"The tool server {name!r} is no longer available to this agent (it was removed, or "
                              "is not configured on this worker); the tool was not called.")
        with server.lock:
            if server.connection is not None and server.connection.broken:
                if server.reopened:  # opened again once already: a server that keeps dropping is down
                    raise CallRefused(f"The session with the tool server {server.name!r} ended again; the tool was "
                                      "not called.")
                server.connection.close()
                server.connection, server.reopened = None, True
            if server.connection is None:
                try:
                    return server, self._open(server)
                except ToolServerError as exc:
                    raise CallRefused(f"The tool server {server.name!r} could not be reached: {exc.message} "
                                      "The tool was not called.") from None
            return server, server.connection

    def _reopen(self, server: _Server, dropped: Connection) -> Connection | None:
        """A new session in place of ``dropped`` (once per run), or the one a parallel call
        of the same step opened already; None when the run has had its second chance."""
        with server.lock:
            if server.connection is not None and server.connection is not dropped and not server.connection.broken:
                return server.connection
            if server.reopened:
                return None
            if server.connection is not None:
                server.connection.close()
            server.connection, server.reopened = None, True
            try:
                return self._open(server)
            except ToolServerError:
                return None

    def call(self, entry: Mapping[str, Any], arguments: dict[str, Any], *, cancel: threading.Event,
             on_progress: Progress | None = None, ask: Asker | None = None) -> ConvertedResult:
        """Call a published tool (``entry``: its frozen definition) with checked arguments;
        ``ask`` answers what the server asks the person meanwhile (TOOL-10).

        Raises ``CallRefused`` (an error result), ``CallUnknown`` or ``CallStopped``."""
        server, connection = self._connection(entry["server_id"])
        assert server.live is not None
        drift = tool_drift(entry, server.live.get(entry["tool"]))
        if drift_blocks_call(drift):
            assert drift is not None
            why = ("no longer offers it (it was removed or renamed)" if drift["state"] == "missing"
                   else "changed its input schema")
            raise CallRefused(f"The tool server {server.name!r} {why} since this agent was published, so "
                              f"{entry['tool']!r} was not called. An admin can refresh the server and publish the "
                              "agent again; meanwhile, answer without this tool.")
        named = _naming(ask, server.name)
        for attempt in (1, 2):
            try:
                raw = connection.call_tool(entry["tool"], arguments, cancel=cancel, on_progress=on_progress,
                                           ask=named)
                return result_content(replace_lone_surrogates(raw))  # the server's JSON: any string
            except CallCancelled:
                if entry["idempotent"]:
                    raise CallStopped() from None
                raise CallUnknown(None) from None
            except ToolServerError as exc:
                expired = exc.code == "session_expired"  # not processed: safe to send again
                if exc.code == "timeout" and not entry["idempotent"]:
                    raise CallUnknown(TIMED_OUT_UNKNOWN.format(seconds=connection.endpoint.timeout)) from None
                if not exc.dropped:
                    detail = f" The server said: {exc.detail}" if exc.detail else ""
                    raise CallRefused(f"{exc.message}{detail}") from None
                if not entry["idempotent"] and not expired:
                    raise CallUnknown(DROPPED_UNKNOWN) from None
                reopened = self._reopen(server, connection) if attempt == 1 else None
                if reopened is None:
                    raise CallRefused(f"{exc.message} The tool could not be called.") from None
                connection = reopened
        raise AssertionError("unreachable")

    def close_all(self) -> None:
        """End every session the run opened (at the end of the run, whatever its end)."""
        for server in self._servers.values():
            if server.connection is not None:
                server.connection.close()
                server.connection = None
