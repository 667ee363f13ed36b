"""Benchmark: a server tool call through the run loop against the same call made directly with
the MCP SDK's client, and protocol sessions per run (TOOL-4).

    .venv/bin/python benchmarks/server_tools.py [--calls 30] [--runs 3]

(a) An SDK-built server on loopback (Streamable HTTP behind a bearer token; the stateless
    2026-07-28 revision, then the stateful earlier one). Directly: one SDK ``Client``, its
    ``echo`` tool called --calls times, 100 ms apart as a run's steps space them. Through the
    loop: a run whose model (a zero-latency fake on loopback) calls ``tests__echo`` once per
    step, --calls steps; each call's time
    is its ``tool_finished`` duration (argument check, the tool thread, the bridge to the
    SDK's event loop, the call, the result as a record). Reported: median ms per call both
    ways and their ratio.
(b) Sessions per run: --runs runs of 1, 5 and --calls calls each; the handshakes the server
    received per run (``server/discover``, or ``initialize`` on the stateful revision) — one
    per run and server.
(c) The operator's ``mcp-server-time`` over stdio: what starting its session costs a run.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time

from _django import REPO, setup, table

sys.path.insert(0, str(REPO))

KEY = "sk-bench-tools-0000000"
GAP_SECONDS = 0.1


def _script(calls: int):
    from tests.fakes.fake_provider import chat_stream

    def handler(request):
        done = sum(1 for m in request.json["messages"] if m["role"] == "tool")
        if done >= calls:
            return chat_stream(["Done."])
        return chat_stream(tool_calls=[{"id": f"c{done}", "name": "tests__echo",
                                        "arguments": json.dumps({"text": f"call {done}"})}])
    return handler


def _version(base_url: str, server, name: str):
    from django.contrib.auth import get_user_model

    from agents.services import agent_create, agent_publish
    from core.spaces.services import space_bootstrap_for_user
    from models_catalog.models import ModelConnection
    from toolservers.services import toolserver_register

    user, _ = get_user_model().objects.get_or_create(username=f"bench-{name}")
    space = space_bootstrap_for_user(user=user)
    toolserver_register(space=space, data={"name": "tests", "url": server.url, "headers": server.headers})
    connection = ModelConnection.objects.create(space=space, name=name, provider="openai_compatible",
                                                base_url=base_url, api_key=KEY, model="fake")
    agent = agent_create(space=space, name=name, model_connection=connection, tools=["tests.echo"],
                         limits={"max_model_calls": 1000, "max_tool_calls": 1000})
    return user, agent_publish(agent=agent)


def _run(user, version, fake, calls: int):
    from runloop.loop import run_execute
    from sessions.models import Run, RunEvent, Session
    from sessions.services.questions import question_ask

    fake.handler = _script(calls)
    session = Session.objects.create(space=version.agent.space, user=user, agent=version.agent, version=version)
    run = question_ask(session=session, content="Echo away")
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    return [e.payload["duration_ms"] for e in RunEvent.objects.filter(run=run, type="tool_finished")]


async def _direct(server, calls: int) -> list[float]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    times = []
    async with httpx2.AsyncClient(headers=server.headers) as http:
        async with Client(streamable_http_client(server.url, http_client=http), cache=None) as client:
            await client.list_tools()
            for n in range(calls):
                # Spaced as a run spaces them: a model step between two calls.
                await asyncio.sleep(GAP_SECONDS)
                started = time.perf_counter()
                await client.call_tool("echo", {"text": f"call {n}"})
                times.append((time.perf_counter() - started) * 1000)
    return times


def bench_calls(calls: int, runs: int) -> None:
    from tests.fakes.fake_provider import FakeProvider
    from tests.fakes.mcp_servers import ToolServerApp

    rows, sessions = [], []
    for legacy in (False, True):
        label = "stateful (2025-11-25)" if legacy else "stateless (2026-07-28)"
        with ToolServerApp(legacy=legacy) as server, FakeProvider() as fake:
            user, version = _version(fake.base_url, server, f"calls-{int(legacy)}")
            direct = asyncio.run(_direct(server, calls))
            looped = _run(user, version, fake, calls)
            d, lp = statistics.median(direct), statistics.median(looped)
            rows.append((label, f"{d:.2f}", f"{lp:.2f}", f"{lp / d:.2f}×"))
            # A stateful server is asked server/discover first, refuses it, then initializes.
            handshake = "initialize" if legacy else "server/discover"
            for count in (1, 5, calls):
                before = server.seen[handshake]
                for _ in range(runs):
                    _run(user, version, fake, count)
                handshakes = server.seen[handshake] - before
                sessions.append((label, str(count), f"{handshakes / runs:.1f}"))
    table(f"(a) one tool call, median over {calls} calls (ms)", rows,
          ("server", "SDK client directly", "through the run loop", "ratio"))
    table(f"(b) protocol sessions opened per run ({runs} runs each)", sessions,
          ("server", "calls per run", "handshakes per run"))


def bench_stdio() -> None:
    from toolservers.endpoints import StdioEndpoint
    from toolservers.protocol import Connection

    endpoint = StdioEndpoint(command=sys.executable, args=("-m", "mcp_server_time", "--local-timezone", "UTC"))
    opens, calls = [], []
    import threading

    for _ in range(3):
        started = time.perf_counter()
        connection = Connection.open(endpoint)
        connection.list_tools()
        opens.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        connection.call_tool("get_current_time", {"timezone": "UTC"}, cancel=threading.Event())
        calls.append((time.perf_counter() - started) * 1000)
        connection.close()
    table("(c) the operator's mcp-server-time over stdio (ms, median of 3)",
          [("start, initialize, list", f"{statistics.median(opens):.0f}"),
           ("one call on the open session", f"{statistics.median(calls):.1f}")], ("step", "ms"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    setup()
    bench_calls(args.calls, args.runs)
    bench_stdio()


if __name__ == "__main__":
    main()
