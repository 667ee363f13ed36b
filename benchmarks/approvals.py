"""Benchmark: what a run that waits for a person's approval costs (TOOL-8/9), against runs
that do not wait, measured in the same run.

    DATABASE_URL=postgres://… .venv/bin/python benchmarks/approvals.py [--waiting 10000] [--threads 3]
        [--baseline 200] [--decisions 40] [--ticks 10]

PostgreSQL only: the figures are its rows and statements. The model is the strict fake
provider on loopback (any invalid request is counted); the tool server is the tests'
counting MCP server (``tests/fakes/counting_server.py``), which writes one line per effect
with its wall-clock time. ``pay.send_payment`` has no hints, so by default
(``side_effects``) every call of it waits for a person; ``pay.lookup`` is read-only and
never waits.

(a) Waiting runs held at once. --waiting sessions each ask a question whose model calls
    ``send_payment``; the loop drives each run (in --threads threads of this process, as a
    worker's threads would) until it waits, and returns. Baseline: --baseline runs of the
    read-only tool, driven to their answer. Reported: the runs waiting at once; this
    process's threads after against before (a waiting run holds none); ms per run to its
    wait against ms per run to its answer; the database's growth per waiting run against
    per answered run (``pg_total_relation_size`` of every table).
(b) Decision → call. A real worker process (Celery, threads pool), --decisions of the
    waiting runs approved one after the other: the time from the decision to the server's
    effect. Baseline: a question to the read-only tool's call, through the same worker (a
    claim, a model call, the call). p50/p95 both ways and their ratio.
(c) What waiting runs cost the database per hour: the workers' housekeeping round
    (``Housekeeper.tick``: heartbeat, reaper, wake, the expiry sweep) run --ticks times with
    no run waiting, then with the --waiting runs waiting: statements per round and the rows
    of the runs' and approvals' tables the rounds read (``pg_stat_user_tables``), scaled to
    an hour of rounds (one per heartbeat period); with the runs waiting, right after they
    began to wait and again after a ``VACUUM ANALYZE`` (what autovacuum does meanwhile).
    The goal: the same figures with 10,000 runs waiting as with none — a waiting run
    costs its rows and nothing else.

Each invocation deletes the sessions an earlier one left (they would still be waiting).
The tool benchmarks' file is not ``tools.py``: a script named like a package of the
product shadows it (tests/foundation/test_structure.py).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from _django import REPO, setup, table

sys.path.insert(0, str(REPO))

KEY = "sk-bench-approvals-0000"
USER_PREFIX = "bench-approvals-"
WORKER_START_SECONDS = 60.0
WAIT_SECONDS = 30.0  # longest wait for one decision's call or one question's answer


def _handler(request):
    """The model: the question's words become the call's argument, so each effect names
    its run; the payment when it is offered, else the lookup; after the result, an answer."""
    from tests.fakes.fake_provider import chat_stream

    messages = request.json["messages"]
    if messages[-1]["role"] == "tool":
        return chat_stream(["Done."])
    question = messages[-1]["content"]
    question = question if isinstance(question, str) else json.dumps(question)
    offered = {tool["function"]["name"] for tool in request.json.get("tools") or []}
    if "pay__send_payment" in offered:
        call = {"id": "pay", "name": "pay__send_payment", "arguments": json.dumps({"to": question, "amount": 1.0})}
    else:
        call = {"id": "look", "name": "pay__lookup", "arguments": json.dumps({"account": question})}
    return chat_stream(tool_calls=[call])


class World:
    """A person, their space with the counting server, and the two agents."""

    def __init__(self, base_url: str, server_url: str) -> None:
        from django.contrib.auth import get_user_model

        from agents.services import agent_create, agent_publish
        from core.spaces.services import space_bootstrap_for_user
        from models_catalog.models import ModelConnection
        from sessions.models import Session
        from toolservers.services import toolserver_register

        # What an earlier invocation left would still be waiting, and count in (c).
        Session.objects.filter(user__username__startswith=USER_PREFIX).delete()
        self.user = get_user_model().objects.create(username=f"{USER_PREFIX}{time.time_ns()}")
        self.space = space_bootstrap_for_user(user=self.user)
        toolserver_register(space=self.space, data={"name": "pay", "url": server_url})
        connection = ModelConnection.objects.create(space=self.space, name="Fake", provider="openai_compatible",
                                                    base_url=base_url, api_key=KEY, model="fake",
                                                    context_window=32_768, max_output_tokens=512)

        def version(name: str, tools: list[str]):
            agent = agent_create(space=self.space, name=name, model_connection=connection, tools=tools)
            return agent_publish(agent=agent)

        self.waits = version("Payer", ["pay.send_payment"])  # no hints: it waits by default
        self.answers = version("Reader", ["pay.lookup"])  # read-only: it never waits

    def sessions(self, version, count: int) -> list[int]:
        from sessions.models import Session

        made = Session.objects.bulk_create([Session(space=self.space, user=self.user, agent=version.agent,
                                                    version=version) for _ in range(count)], batch_size=1000)
        return [session.pk for session in made]


def _drive(session_ids: list[int], threads: int, label: str) -> tuple[list[float], list[int]]:
    """Each session asks once and the loop drives its run until it waits or ends, in
    ``threads`` threads; returns ms per run and the run ids."""
    from django.db import connections

    from runloop.loop import run_execute
    from sessions.models import Session
    from sessions.services.questions import question_ask

    chunks = [session_ids[i::threads] for i in range(threads)]
    durations: list[float] = []
    runs: list[int] = []
    lock = threading.Lock()
    done = [0]

    def work(chunk: list[int]) -> None:
        try:
            for session_id in chunk:
                started = time.perf_counter()
                session = Session.objects.select_related("agent", "version").get(pk=session_id)
                run = question_ask(session=session, content=f"{label} {session_id}")
                run_execute(run_id=run.pk)
                took = (time.perf_counter() - started) * 1000
                with lock:
                    durations.append(took)
                    runs.append(run.pk)
                    done[0] += 1
                    if done[0] % 1000 == 0:
                        print(f"  {label}: {done[0]} of {len(session_ids)}", flush=True)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=threads) as pool:
        for future in [pool.submit(work, chunk) for chunk in chunks]:
            future.result()
    return durations, runs


def _db_bytes() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT sum(pg_total_relation_size(relid)) FROM pg_stat_user_tables")
        return int(cursor.fetchone()[0])


def _rows_read() -> int:
    """Rows of the runs' and approvals' tables read so far (sequential and by index)."""
    from django.db import connection

    from sessions.models import Run, ToolApproval

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")  # this backend's counts, flushed once idle
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0) "
                       "FROM pg_stat_user_tables WHERE relname IN (%s, %s)",
                       [Run._meta.db_table, ToolApproval._meta.db_table])
        return int(cursor.fetchone()[0])


def _sweeps(ticks: int) -> tuple[float, float]:
    """Statements and rows read per housekeeping round, over ``ticks`` full rounds."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from runloop.housekeeping import Housekeeper

    keeper = Housekeeper(name="bench-housekeeping")
    keeper.tick(first=True)  # takes the reaper's lease and does the hourly prune once, outside the count
    before = _rows_read()
    with CaptureQueriesContext(connection) as captured:
        for _ in range(ticks):
            keeper.tick(first=True)
    statements = len(captured.captured_queries)
    return statements / ticks, (_rows_read() - before) / ticks


def _vacuum() -> None:
    """What autovacuum does in the background, now: the runs' index entries of their
    ``running`` state are dead once they wait, and a scan of the running runs steps over
    them until a vacuum removes them."""
    from django.db import connection

    from sessions.models import Run, ToolApproval

    with connection.cursor() as cursor:
        cursor.execute(f'VACUUM ANALYZE "{Run._meta.db_table}", "{ToolApproval._meta.db_table}"')


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


class Worker:
    """One Celery worker process on this database and broker, stopped with its group."""

    def __init__(self) -> None:
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentloom.settings", "LOG_LEVEL": "WARNING"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "agentloom", "worker", "--pool=threads", "--concurrency=2",
             "--without-mingle", "--without-gossip", "--loglevel=ERROR", "-n", "bench-tools@%h"],
            cwd=REPO, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait_ready(self) -> None:
        from runloop.models import WorkerHeartbeat

        give_up = time.monotonic() + WORKER_START_SECONDS
        while not WorkerHeartbeat.objects.filter(pid=self.process.pid).exists():
            if time.monotonic() > give_up or self.process.poll() is not None:
                raise SystemExit("the worker did not start")
            time.sleep(0.1)  # polling interval

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def _effect_at(effects_path: str, key: str, value: str, deadline: float) -> float:
    """The wall-clock time of the effect whose argument ``key`` is ``value``."""
    from tests.fakes.counting_server import effects_read

    while time.monotonic() < deadline:
        for effect in effects_read(effects_path):
            if effect["arguments"].get(key) == value:
                return float(effect["at"])
        time.sleep(0.005)  # polling interval: when the line is seen, not what it says
    raise SystemExit(f"no effect with {key}={value!r} within {WAIT_SECONDS:.0f} s")


def _ended(run_id: int, deadline: float) -> None:
    from sessions.models import Run

    while Run.objects.filter(pk=run_id, status__in=Run.ACTIVE_STATUSES).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"run {run_id} did not end")
        time.sleep(0.01)  # polling interval


def bench_decisions(world: World, waiting_runs: list[int], count: int, effects_path: str) -> dict:
    """(b): decision → call, and question → call, through one worker, one at a time."""
    from runloop.tasks import dispatch_run
    from sessions.models import Run, Session
    from sessions.selectors.approvals import approvals_waiting
    from sessions.services.approvals import approval_decide
    from sessions.services.dispatch import dispatcher_set
    from sessions.services.questions import question_ask

    dispatcher_set(dispatch_run)
    worker = Worker()
    try:
        worker.wait_ready()
        decided, asked = [], []
        # The first of each is the worker's warm-up (its first task loads what later ones
        # reuse): timed, not counted.
        for run_id in waiting_runs[:count + 1]:
            run = Run.objects.select_related("session").get(pk=run_id)
            (approval,) = approvals_waiting(run=run)
            started = time.time()
            approval_decide(run=run, user=world.user, call_id=approval.call_id, decision="approve")
            deadline = time.monotonic() + WAIT_SECONDS
            decided.append((_effect_at(effects_path, "to", f"pay {run.session_id}", deadline) - started) * 1000)
            _ended(run_id, deadline)
        for session_id in world.sessions(world.answers, count + 1):
            session = Session.objects.get(pk=session_id)
            started = time.time()
            run = question_ask(session=session, content=f"look {session_id}")
            deadline = time.monotonic() + WAIT_SECONDS
            asked.append((_effect_at(effects_path, "account", f"look {session_id}", deadline) - started) * 1000)
            _ended(run.pk, deadline)
        decided, asked = decided[1:], asked[1:]
        completed = Run.objects.filter(pk__in=waiting_runs[1:count + 1], status=Run.Status.COMPLETED).count()
    finally:
        worker.stop()
        dispatcher_set(None)
    return {"decided": decided, "asked": asked, "completed": completed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiting", type=int, default=10_000, help="runs held waiting at once")
    parser.add_argument("--threads", type=int, default=3, help="threads driving the runs to their wait")
    parser.add_argument("--baseline", type=int, default=200, help="runs driven to an answer, for comparison")
    parser.add_argument("--decisions", type=int, default=40, help="decisions timed through a worker")
    parser.add_argument("--ticks", type=int, default=10, help="housekeeping rounds measured")
    args = parser.parse_args()
    # A person may have this many runs running at once (3 by default): the threads are one person's.
    os.environ.setdefault("AGENTLOOM_MAX_RUNNING_RUNS_PER_USER", str(max(3, args.threads)))
    os.environ.setdefault("AGENTLOOM_EFFECTS_FILE", str(REPO / "var" / "bench" / f"effects-{os.getpid()}.jsonl"))
    if setup(need_postgres=True) != "postgresql":
        raise SystemExit("this benchmark needs PostgreSQL")
    from sessions.models import Run
    from sessions.services.dispatch import dispatcher_set
    from sessions.services.run_controls import run_cancel
    from sessions.services.runs import heartbeat_period
    from tests.fakes.counting_server import CountingServer
    from tests.fakes.fake_provider import FakeProvider
    from tests.fakes.strict import StrictProvider

    effects_path = os.environ["AGENTLOOM_EFFECTS_FILE"]
    os.makedirs(os.path.dirname(effects_path), exist_ok=True)
    strict = StrictProvider(_handler, api_key=KEY)
    dispatcher_set(None)  # (a) drives its runs here: nothing goes to a broker
    with FakeProvider(strict) as fake, CountingServer() as server:
        world = World(fake.base_url, server.url)
        # Warm-up, not counted: the first runs of a process load what every later one reuses
        # (its shared threads among them).
        _drive(world.sessions(world.answers, 3), 1, "look")
        for run_id in _drive(world.sessions(world.waits, 3), 1, "warm")[1]:
            run_cancel(run=Run.objects.get(pk=run_id))  # Stop: none waits while (c) counts the idle rounds
        size = _db_bytes()
        answered_ms, _ = _drive(world.sessions(world.answers, args.baseline), args.threads, "look")
        answered_bytes = (_db_bytes() - size) / args.baseline
        idle_statements, idle_rows = _sweeps(args.ticks)

        threads_before = threading.active_count()  # after the baseline: the servers' own pools have grown
        size = _db_bytes()
        print(f"  driving {args.waiting} runs to their wait…", flush=True)
        started = time.perf_counter()
        waiting_ms, waiting_runs = _drive(world.sessions(world.waits, args.waiting), args.threads, "pay")
        wall = time.perf_counter() - started
        waiting_bytes = (_db_bytes() - size) / args.waiting
        held = Run.objects.filter(pk__in=waiting_runs, status=Run.Status.WAITING).count()
        threads_after = threading.active_count()
        busy_statements, busy_rows = _sweeps(args.ticks)
        _vacuum()
        settled_statements, settled_rows = _sweeps(args.ticks)

        timed = bench_decisions(world, waiting_runs, args.decisions, effects_path)

    rounds = 3600 / heartbeat_period()
    table(f"(a) waiting runs held at once ({args.threads} threads drove them, {wall:.0f} s)", [
        ("runs waiting at once", f"{held} of {args.waiting}", "no worker process ran"),
        ("threads of this process, before → after", f"{threads_before} → {threads_after}",
         "a waiting run holds none"),
        ("ms per run to its wait (p50 / p95)",
         f"{statistics.median(waiting_ms):.0f} / {_percentile(waiting_ms, 0.95):.0f}", ""),
        ("ms per run to its answer, baseline (p50 / p95)",
         f"{statistics.median(answered_ms):.0f} / {_percentile(answered_ms, 0.95):.0f}",
         f"ratio {statistics.median(waiting_ms) / statistics.median(answered_ms):.2f}"),
        ("database bytes per waiting run", f"{waiting_bytes:,.0f}",
         f"ratio {waiting_bytes / answered_bytes:.2f} to an answered run ({answered_bytes:,.0f})"),
    ], ("measure", "value", "note"))
    p50 = statistics.median(timed["decided"])
    base = statistics.median(timed["asked"])
    table(f"(b) from a decision to the tool's call, one worker, {args.decisions} each (ms)", [
        ("decision → call", f"{p50:.0f}", f"{_percentile(timed['decided'], 0.95):.0f}",
         f"ratio {p50 / base:.2f}"),
        ("question → call (no approval), baseline", f"{base:.0f}", f"{_percentile(timed['asked'], 0.95):.0f}", ""),
        ("approved runs completed", str(timed["completed"]), "", ""),
    ], ("path", "p50", "p95", "note"))
    table(f"(c) housekeeping rounds ({args.ticks} measured; {rounds:.0f} an hour, one per heartbeat period)", [
        ("statements a round", f"{idle_statements:.1f}", f"{busy_statements:.1f}", f"{settled_statements:.1f}",
         f"{(settled_statements - idle_statements) * rounds / args.waiting:.4f}"),
        ("rows of runs + approvals read a round", f"{idle_rows:.1f}", f"{busy_rows:.1f}", f"{settled_rows:.1f}",
         f"{(settled_rows - idle_rows) * rounds / args.waiting:.4f}"),
    ], ("per round", "0 waiting", f"{args.waiting} waiting, at once", "after a vacuum", "per waiting run an hour"))
    print(f"\ninvalid requests refused by the strict fake: {len(strict.rejections)}")


if __name__ == "__main__":
    main()
