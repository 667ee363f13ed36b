"""Load run: concurrent chat users against the fake provider, web + two worker processes.

    .venv/bin/python benchmarks/load.py [--users 50] [--seconds 120] [--workers 2] [--drain 20]
                                        [--fault 500] [--fault hang]

Loopback only (127.0.0.1), bounded in count and time, stops by itself whatever the product
does. Each simulated user has a session and, until ``--seconds`` are up, asks a question
over the HTTP API and reads its run's events to the end in the response (as the chat does;
``GET …/events`` from the last event read if that response ends first), and asks again. After
that, users get ``--drain`` seconds to finish the run they are following; any user still
busy then is cancelled. Every HTTP call and every SSE read has a time-out. The web and
worker processes it starts are stopped (their whole process groups, killed when they do
not stop within 5 s), also on Ctrl-C and when the benchmark itself fails.

The fake provider streams each answer in 20 chunks (10 ms apart) and sometimes calls the
calculator first; it refuses any invalid request. It runs in a process of its own, and the
users speak plain HTTP/1.1 (``_http.py``): on the machine the product is measured on, the
benchmark takes as little of the cores as it can, and its users' clocks run late as
little as they can (the table says by how much). ``--fault`` makes the product fail on
purpose (to check this report): ``500`` points half of the users' questions at a loopback
path that answers 500; ``hang`` makes the fake provider never answer, so runs never end.

The table is always printed (see docs/performance.md, *Load*): runs completed, questions
per second, time to first token and whole-run time (p50/p95/p99), errors by kind (HTTP
status or exception class, with the call), answers shed with Retry-After (429/503: waited
out and retried, as the chat does; not errors), users shed until the deadline, users
cancelled, runs left queued/running, invalid provider requests, lost records. Exits 1 when
any count but the shed ones is non-zero or no run completed, 130 when interrupted (the
short form of this run is a CI test).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter

from _django import REPO, setup, table
from _http import AsyncClient

sys.path.insert(0, str(REPO))

START_SECONDS = 30.0  # the web process must answer /healthz within this
STOP_SECONDS = 5.0  # each process group gets this long after SIGTERM, then SIGKILL
CALL_TIMEOUT = 10.0  # connect / write / read of every plain HTTP call
SSE_READ_TIMEOUT = 30.0  # longest silence accepted on an event stream
CANCEL_SECONDS = 5.0  # cancelled users get this long to close their connections
BURST_SECONDS = 2.0  # the first questions: every user at once, on processes that have just started
LATENESS_SAMPLE = 0.05  # seconds between samples of the users' event loop's lateness
ASK_HEADERS = {"Accept": "text/event-stream"}  # the question's response carries its answer's events


class Tally:
    """What the users saw, kept outside the event loop so an interrupted run still reports."""

    def __init__(self) -> None:
        self.results: list[dict] = []
        self.kinds: Counter[str] = Counter()
        self.shed: Counter[str] = Counter()  # 429/503 with Retry-After, waited out and retried
        self.never_served = 0  # users refused with Retry-After until asking time ran out
        self.samples: dict[str, str] = {}  # the first detail seen of each kind
        self.cancelled = 0
        self.elapsed = 0.0
        self.began = 0.0  # time.monotonic() when the users started
        self.interrupted = False
        self.late: list[float] = []  # how late the users' event loop woke from a short sleep

    def refused(self, response) -> float:
        """A 429 or 503 the product answered with Retry-After: shed load, waited out and
        retried, as a person's browser does; counted apart from the errors."""
        self.shed[str(response.status_code)] += 1
        return float(response.headers.get("Retry-After", "1"))

    def error(self, kind: str, detail: str = "") -> None:
        self.kinds[kind] += 1
        self.samples.setdefault(kind, detail[:300])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _quantiles(values: list[float]) -> str:
    return f"{_percentile(values, .5):.2f} / {_percentile(values, .95):.2f} / {_percentile(values, .99):.2f}"


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] if ordered else float("nan")


def _provider(request):
    from tests.fakes.fake_provider import chat_stream

    messages = request.json["messages"]
    question = [m for m in messages if m["role"] == "user"][-1]["content"]
    if "add" in question and messages[-1]["role"] == "user":
        return chat_stream(tool_calls=[{"id": "c1", "name": "calculator", "arguments": '{"expression": "2+2"}'}],
                           usage={"prompt_tokens": 20, "completion_tokens": 5})
    return chat_stream([f"word{i} " for i in range(20)], delay=0.01,
                       usage={"prompt_tokens": 20, "completion_tokens": 20})


def _hanging_provider(request):
    from tests.fakes.fake_provider import Hang

    return Hang(seconds=3600)


def _failing_path(request):
    from tests.fakes.fake_provider import error

    return error(500, "fault injected by the load run")


def _world(users: int, base_url: str):
    from django.contrib.auth import get_user_model

    from agents.services import agent_create, agent_publish
    from core.accounts.services import token_issue
    from core.spaces.models import Membership
    from core.spaces.services import membership_add, space_bootstrap_for_user
    from models_catalog.models import ModelConnection

    User = get_user_model()
    stamp = time.time_ns()
    owner = User.objects.create_user(username=f"load-owner-{stamp}")
    space = space_bootstrap_for_user(user=owner)
    connection = ModelConnection.objects.create(space=space, name="fake", provider="openai_compatible",
                                                base_url=base_url, api_key="sk-load-test-key-000", model="fake")
    agent = agent_create(space=space, name="load", model_connection=connection, tools=["calculator"])
    agent_publish(agent=agent)
    tokens = []
    for index in range(users):
        user = User.objects.create_user(username=f"load-{stamp}-{index}")
        membership_add(space=space, user=user, role=Membership.Role.MEMBER)
        tokens.append(token_issue(user=user, client="load")[1])
    return agent, tokens


def _failed(tally: Tally, what: str, response) -> None:
    tally.error(str(response.status_code), f"{what}: {response.text[:200]}")


class Following:
    """Where a user is in a run's events: the last event id read, the first token's time."""

    def __init__(self, started: float, *, tool: bool = False) -> None:
        self.started = started
        self.tool = tool  # the answer comes after a calculator call: its first token waits for two model calls
        self.last_id: str | None = None
        self.first_token: float | None = None


async def _read(stream, following: Following) -> str | None:
    """SSE frames until ``run_finished`` (its status) or the stream's end (None).

    After ``run_finished`` the rest of the response is read to its end (the product ends
    it at once), as a browser's reader gets it: a response left unread closes its
    connection, and every question would open a new one."""
    event = None
    lines = stream.aiter_lines()
    async for line in lines:
        if line.startswith("id: "):
            following.last_id = line[4:]
        elif line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            if event == "message_delta" and following.first_token is None:
                following.first_token = time.monotonic() - following.started
            if event == "run_finished":
                async for _ in lines:  # a stream that does not end is a read time-out, counted as an error
                    pass
                return json.loads(line[6:])["status"]
    return None


async def _follow(client, run_id: int, following: Following, tally: Tally) -> str | None:
    """The run's end status, read from its event stream from the last event seen (as the
    chat does when the response that asked ends before the run)."""
    while True:
        headers = {"Last-Event-ID": following.last_id} if following.last_id is not None else {}
        async with client.stream("GET", f"/api/v1/runs/{run_id}/events", timeout=SSE_READ_TIMEOUT,
                                 headers=headers) as stream:
            if stream.status_code in (429, 503) and "Retry-After" in stream.headers:
                await stream.aread()
                await asyncio.sleep(tally.refused(stream))
                continue  # the browser's EventSource reconnects from the last event it saw
            if stream.status_code != 200:
                await stream.aread()
                return f"events {stream.status_code}"
            return await _read(stream, following)


async def _user(url: str, ask_url: str, token: str, agent_id: int, stop_asking: float, tally: Tally) -> None:
    headers = {"Authorization": f"Token {token}"}
    async with AsyncClient(base_url=url, headers=headers, timeout=CALL_TIMEOUT) as client:
        try:
            response = await client.post("/api/v1/sessions", json={"agent": agent_id})
            while response.status_code in (429, 503) and "Retry-After" in response.headers \
                    and time.monotonic() < stop_asking:
                await asyncio.sleep(tally.refused(response))
                response = await client.post("/api/v1/sessions", json={"agent": agent_id})
            if response.status_code in (429, 503) and "Retry-After" in response.headers:
                tally.never_served += 1  # shed, and still being shed when asking time ran out
                return None
            if not response.is_success:
                return _failed(tally, "session", response)
            session = response.json()["id"]
        except Exception as exc:  # noqa: BLE001 - counted and reported
            return tally.error(type(exc).__name__, f"session: {exc!r}")
        number = 0
        started = None  # when the question was first sent: a shed one's wait counts in its times
        while time.monotonic() < stop_asking:
            if started is None:
                number += 1
                content = f"Question {number}: please add two and two" if random.random() < 0.3 \
                    else f"Question {number}"
                started = time.monotonic()
            stage, wait, refused, status = "ask", None, None, None
            try:
                # As the chat asks: the question's response carries its run's events.
                async with client.stream("POST", f"{ask_url}/api/v1/sessions/{session}/questions",
                                         json={"content": content}, headers=ASK_HEADERS,
                                         timeout=SSE_READ_TIMEOUT) as response:
                    if response.status_code in (429, 503) and "Retry-After" in response.headers:
                        await response.aread()
                        wait = tally.refused(response)
                    elif response.status_code != 202:
                        await response.aread()
                        refused = response
                    else:
                        run_id = int(response.headers["location"].rsplit("/", 1)[1])
                        stage = f"events of run {run_id}"
                        following = Following(started, tool="add" in content)
                        status = await _read(response, following)
                if wait is not None:
                    await asyncio.sleep(max(0.0, min(wait, stop_asking - time.monotonic())))
                    continue  # the same question again, its clock still running
                asked, started = started, None
                if refused is not None:
                    _failed(tally, "ask", refused)
                    await asyncio.sleep(0.5)  # back off, as a person would
                    continue
                if status is None:  # the response ended before the run did: follow it from there
                    status = await _follow(client, run_id, following, tally)
            except Exception as exc:  # noqa: BLE001 - counted and reported
                tally.error(type(exc).__name__, f"{stage}: {exc!r}")
                started = None  # an error, not a refusal: the next question is a new one
                await asyncio.sleep(0.5)
                continue
            if status != "completed":
                tally.error(f"run {status or 'stream ended early'}", f"run {run_id}")
                continue
            tally.results.append({"run": run_id, "first_token": following.first_token, "tool": following.tool,
                                  "total": time.monotonic() - asked, "asked_at": asked - tally.began})


async def _drive(users: list[tuple[str, str]], url: str, agent_id: int, seconds: float, drain: float,
                 tally: Tally) -> None:
    started = tally.began = time.monotonic()
    tasks = [asyncio.create_task(_user(url, ask_url, token, agent_id, started + seconds, tally))
             for ask_url, token in users]
    clock = asyncio.create_task(_lateness(tally, started + seconds))
    try:
        done, pending = await asyncio.wait(tasks, timeout=seconds + drain)
        for task in pending:
            task.cancel()
        tally.cancelled = len(pending)
        if pending:
            await asyncio.wait(pending, timeout=CANCEL_SECONDS)
        for task in done:
            if task.exception() is not None:
                tally.error(type(task.exception()).__name__, repr(task.exception()))
    finally:
        clock.cancel()
        tally.elapsed = time.monotonic() - started


async def _lateness(tally: Tally, until: float) -> None:
    """How late the users' own event loop runs (it shares the machine's cores with the
    product and the fake provider): every moment a user's clock is read at comes this late,
    so the times in the table include it. Sampled by a short sleep, while users ask."""
    while time.monotonic() < until:
        before = time.monotonic()
        await asyncio.sleep(LATENESS_SAMPLE)
        tally.late.append(time.monotonic() - before - LATENESS_SAMPLE)


def _start(argv: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, start_new_session=True)


def _stop(processes: list[subprocess.Popen]) -> None:
    """SIGTERM to each process group, SIGKILL to all of them STOP_SECONDS later; reap all."""
    for process in processes:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    give_up = time.monotonic() + STOP_SECONDS
    for process in processes:
        try:
            process.wait(timeout=max(0.0, give_up - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(process.pid, signal.SIGKILL)  # also reaps children left in the group
        except ProcessLookupError:
            pass
        process.wait()


def _wait_for_web(url: str, processes: list[subprocess.Popen]) -> bool:
    import httpx

    give_up = time.monotonic() + START_SECONDS
    while time.monotonic() < give_up and all(p.poll() is None for p in processes):
        try:
            if httpx.get(url + "/healthz", timeout=1, trust_env=False).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.2)  # polling interval
    return False


def _wait_for_workers(workers: list[subprocess.Popen]) -> bool:
    """Until every worker takes tasks: its first heartbeat row is written once it is ready."""
    from runloop.models import WorkerHeartbeat

    pids = {worker.pid for worker in workers}
    give_up = time.monotonic() + START_SECONDS
    while time.monotonic() < give_up and all(w.poll() is None for w in workers):
        if set(WorkerHeartbeat.objects.filter(pid__in=pids).values_list("pid", flat=True)) == pids:
            return True
        time.sleep(0.1)  # polling interval
    return False


def _interrupt(signum, frame):
    raise KeyboardInterrupt


class ProviderProcess:
    """The strict fake provider in a process of its own, for the run's duration: its
    threads in the users' interpreter took turns with their event loop, and every user's
    clock ran late by the provider's work. Its refusals come back when it stops."""

    def __init__(self, *, hang: bool) -> None:
        self.hang = hang
        self.rejections: list = []

    def __enter__(self) -> ProviderProcess:
        context = multiprocessing.get_context("fork")  # the handlers are this module's functions
        self.pipe, child = context.Pipe()
        self.process = context.Process(target=_provider_serve, args=(child, self.hang), daemon=True)
        self.process.start()
        if not self.pipe.poll(START_SECONDS):
            self.process.kill()
            raise RuntimeError(f"the fake provider did not start within {START_SECONDS:.0f} s")
        self.base_url = self.pipe.recv()
        return self

    def __exit__(self, *exc_info) -> None:
        try:
            self.pipe.send("stop")
            if self.pipe.poll(STOP_SECONDS):
                self.rejections.extend(self.pipe.recv())
            else:
                self.rejections.append("the fake provider did not report its refusals")
        except (OSError, EOFError):
            self.rejections.append("the fake provider process ended early")
        self.process.join(STOP_SECONDS)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


def _provider_serve(pipe, hang: bool) -> None:
    from tests.fakes.fake_provider import FakeProvider
    from tests.fakes.strict import StrictProvider

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the benchmark, which stops this
    strict = StrictProvider(_hanging_provider if hang else _provider, api_key="sk-load-test-key-000")
    with FakeProvider(strict) as fake:
        pipe.send(fake.base_url)
        try:
            pipe.recv()  # until told to stop, or the benchmark is gone
        except EOFError:
            return
        pipe.send([repr(rejection) for rejection in strict.rejections])


def _run(args, tally: Tally, state: dict) -> None:
    from agentloom.launch import HTTP_PROTOCOL
    from tests.fakes.fake_provider import FakeProvider

    provider = ProviderProcess(hang="hang" in args.fault)
    state["rejections"] = provider.rejections
    # Every simulated user comes from 127.0.0.1: one client address, whose connections and
    # requests at the door are bounded far above what the run opens (the bound's code still runs).
    env = {"AGENTLOOM_WEB_MAX_CONNECTIONS_PER_CLIENT": "100000", **os.environ,
           "DJANGO_SETTINGS_MODULE": "agentloom.settings", "LOG_LEVEL": "WARNING"}
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    processes: list[subprocess.Popen] = []
    with provider as fake, FakeProvider(_failing_path) as failing:
        agent, tokens = _world(args.users, fake.base_url)
        state["agent"] = agent
        ask_urls = [failing.url if "500" in args.fault and index % 2 == 0 else "" for index in range(len(tokens))]
        try:
            processes.append(_start(
                [sys.executable, "-m", "uvicorn", "agentloom.asgi:application", "--host", "127.0.0.1",
                 "--port", str(port), "--log-level", "warning", "--no-access-log", "--timeout-keep-alive", "30",
                 "--http", HTTP_PROTOCOL], env))
            for index in range(args.workers):
                processes.append(_start(
                    [sys.executable, "-m", "celery", "-A", "agentloom", "worker", "--pool=threads", "--concurrency=16",
                     "--without-mingle", "--without-gossip", "--loglevel=ERROR", "-n", f"load{index}@%h"], env))
            if not _wait_for_web(url, processes):
                tally.error("web did not start", f"no answer from {url}/healthz within {START_SECONDS:.0f} s")
                return
            if not _wait_for_workers(processes[1:]):
                tally.error("workers did not start", f"not all {args.workers} took tasks within {START_SECONDS:.0f} s")
                return
            asyncio.run(_drive(list(zip(ask_urls, tokens)), url, agent.pk, args.seconds, args.drain, tally))
            state["stuck"] = _left_behind(agent)  # before stopping: a stopping worker may end its runs
        finally:
            _stop(processes)


def _left_behind(agent) -> int:
    from sessions.models import Run

    return Run.objects.filter(session__agent=agent, status__in=["queued", "running"]).count()


def _check(state: dict, tally: Tally) -> tuple[str, str]:
    """Lost records among the completed runs, and runs left queued/running when the users stopped."""
    from sessions.models import SessionMessage

    if "agent" not in state:
        return "not checked", "not checked"
    lost = 0
    for result in tally.results:  # every completed run has its question, an answer and its end, in order
        kinds = list(SessionMessage.objects.filter(run_id=result["run"]).order_by("seq")
                     .values_list("kind", flat=True))
        if not kinds or kinds[0] != "user" or "assistant" not in kinds or kinds[-1] != "run_status":
            lost += 1
    stuck = state.get("stuck")
    return str(lost), "not checked" if stuck is None else str(stuck)


def _report(args, tally: Tally, state: dict, lost: str, stuck: str) -> None:
    from django.conf import settings

    first = [r["first_token"] for r in tally.results if r["first_token"] is not None]
    plain = [r["first_token"] for r in tally.results if r["first_token"] is not None and not r["tool"]]
    tooled = [r["first_token"] for r in tally.results if r["first_token"] is not None and r["tool"]]
    # Every user asks in the first seconds at once, on processes that have just started.
    timed = [r for r in tally.results if r["first_token"] is not None]
    burst = [r["first_token"] for r in timed if r["asked_at"] < BURST_SECONDS]
    steady = [r["first_token"] for r in timed if r["asked_at"] >= BURST_SECONDS]
    total = [r["total"] for r in tally.results]
    kinds = ", ".join(f"{kind} ×{count}" for kind, count in tally.kinds.most_common()) or "none"
    rejections = state.get("rejections", [])
    faults = f", fault: {' + '.join(args.fault)}" if args.fault else ""
    table(f"Load: {args.users} users for {args.seconds:.0f} s (+{args.drain:.0f} s drain), {args.workers} worker "
          f"processes ({'Redis' if settings.REDIS_URL else 'filesystem'} broker), fake provider on loopback{faults}", [
        ("runs completed", f"{len(tally.results)}"),
        ("questions per second", f"{len(tally.results) / tally.elapsed:,.1f}" if tally.elapsed else "0.0"),
        ("time to first token p50 / p95 / p99 (s)", _quantiles(first)),
        ("  of answers without a tool call", _quantiles(plain)),
        ("  of answers after a calculator call", _quantiles(tooled)),
        (f"  of questions asked in the first {BURST_SECONDS:.0f} s", _quantiles(burst)),
        ("  of questions asked after that", _quantiles(steady)),
        ("whole run p50 / p95 / p99 (s)", _quantiles(total)),
        ("the users' own clock late by p50 / p95 / p99 (s)", _quantiles(tally.late)),
        ("errors", f"{sum(tally.kinds.values())}"), ("errors by kind", kinds),
        ("shed with Retry-After (waited, retried)",
         ", ".join(f"{status} ×{count}" for status, count in sorted(tally.shed.items())) or "none"),
        ("users shed until the deadline (never started)", f"{tally.never_served}"),
        ("users cancelled at the deadline", f"{tally.cancelled}"),
        ("runs left queued/running", stuck),
        ("invalid provider requests", f"{len(rejections)}"), ("lost records", lost),
    ], ("figure", "value"))
    for kind, detail in list(tally.samples.items())[:10]:
        print(f"  error {kind}: {detail}" if detail else f"  error {kind}")
    if tally.interrupted:
        print("  interrupted: the figures cover the run until then")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--drain", type=float, default=20, help="seconds to finish the followed runs (default 20)")
    parser.add_argument("--fault", action="append", choices=["500", "hang"], default=[],
                        help="make the product fail on purpose (repeatable)")
    args = parser.parse_args()
    if not 1 <= args.users <= 1000 or not 0 < args.seconds <= 3600 or not 0 <= args.drain <= 600:
        parser.error("--users must be 1–1000, --seconds 0–3600, --drain 0–600")
    os.environ.setdefault("AGENTLOOM_ASK_RATE", "1000/min")
    signal.signal(signal.SIGTERM, _interrupt)
    vendor = setup()
    if vendor != "postgresql":
        print("the load run needs PostgreSQL (web and workers are separate processes): set DATABASE_URL=postgres://…")
        return 2
    tally, state = Tally(), {}
    try:
        _run(args, tally, state)
    except KeyboardInterrupt:
        tally.interrupted = True
    except Exception as exc:  # noqa: BLE001 - reported in the table
        tally.error(type(exc).__name__, f"load run: {exc!r}")
    try:
        lost, stuck = _check(state, tally)
    except Exception as exc:  # noqa: BLE001 - reported in the table
        tally.error(type(exc).__name__, f"checking the records: {exc!r}")
        lost = stuck = "not checked"
    _report(args, tally, state, lost, stuck)
    if tally.interrupted:
        return 130
    clean = lost == "0" and stuck == "0" and not tally.kinds and not tally.cancelled and not state.get("rejections")
    return 0 if clean and tally.results else 1


if __name__ == "__main__":
    sys.exit(main())
