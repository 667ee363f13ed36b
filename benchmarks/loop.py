"""Benchmark: the run loop's own overhead, concurrent runs over two workers, event latency.

    .venv/bin/python benchmarks/loop.py [--steps 30] [--runs 20] [--long 300]

(a) Per model step, the platform loop (context, validation, encrypted records, events)
    against a bare httpx loop making the same calls to the same zero-latency fake
    provider on loopback. Reported: median ms per step for both and the ratio.
(a2) What a step costs the database, by kind of step: statements (SQL that reads or
    writes rows), round trips (the statements plus SAVEPOINT/RELEASE: the target's count)
    and transactions (each adds a BEGIN and a COMMIT on the wire).
(a3) A long session (--long steps, 150 words of text per step, a window large enough
    that nothing is compacted), on the OpenAI-compatible wire and then on Anthropic's
    Messages API (the strict fake): ms per step around step 20 against around the last
    step — in all, and the loop's own part (all minus a bare loop sending the same bodies)
    — and the bytes stored for the session (records, events, call logs and their indexes,
    PostgreSQL) against its records' bytes.
(b) With PostgreSQL (and Redis if REDIS_URL is set): --runs concurrent runs over two
    Celery worker processes — steps per second and p95 step latency.
(c) Event latency: produced (RunEvent.created_at) → received by an SSE client.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

from _django import REPO, setup, table

sys.path.insert(0, str(REPO))


def _script(steps: int):
    from tests.fakes.fake_provider import chat_stream

    def handler(request):
        done = sum(1 for m in request.json["messages"] if m["role"] == "tool")
        if done + 1 >= steps:
            return chat_stream(["Done."], usage={"prompt_tokens": 10, "completion_tokens": 2})
        return chat_stream(tool_calls=[{"id": f"c{done}", "name": "calculator",
                                        "arguments": json.dumps({"expression": f"{done}+1"})}])
    return handler


BENCH_KEY = "sk-bench-key-000000"


def _agent(base_url: str, name: str, provider: str = "openai_compatible", model: str = "fake"):
    from django.contrib.auth import get_user_model

    from agents.services import agent_create, agent_publish
    from core.spaces.services import space_bootstrap_for_user
    from models_catalog.models import ModelConnection

    user, _ = get_user_model().objects.get_or_create(username="bench-loop")
    space = space_bootstrap_for_user(user=user)
    connection = ModelConnection.objects.create(space=space, name=name, provider=provider,
                                                base_url=base_url, api_key=BENCH_KEY, model=model)
    agent = agent_create(space=space, name=name, model_connection=connection, tools=["calculator"],
                         limits={"max_model_calls": 1000, "max_tool_calls": 1000})
    return user, agent_publish(agent=agent)


def _session(user, version):
    from sessions.models import Session

    return Session.objects.create(space=version.agent.space, user=user, agent=version.agent, version=version)


def bench_overhead(steps: int) -> None:
    import httpx

    from runloop.loop import run_execute
    from sessions.models import ModelCall
    from sessions.services.questions import question_ask
    from tests.fakes.fake_provider import FakeProvider

    with FakeProvider(_script(steps)) as fake:
        user, version = _agent(fake.base_url, "overhead")
        platform = []
        for _ in range(3):
            run = question_ask(session=_session(user, version), content="Count up.")
            start = time.perf_counter()
            run_execute(run_id=run.pk)
            platform.append((time.perf_counter() - start) / ModelCall.objects.filter(run=run).count())
        bodies = [request.json for request in fake.requests[-steps:]]
        bare = []
        with httpx.Client(trust_env=False) as client:
            for _ in range(3):
                start = time.perf_counter()
                for body in bodies:
                    with client.stream("POST", fake.base_url + "/chat/completions", json=body) as response:
                        for line in response.iter_lines():
                            if line.startswith("data: ") and line != "data: [DONE]":
                                json.loads(line[6:])
                bare.append((time.perf_counter() - start) / len(bodies))
    p, b = statistics.median(platform), statistics.median(bare)
    table(f"(a) overhead per model step, {steps} steps against a zero-latency fake provider", [
        ("bare httpx loop", f"{b * 1000:,.2f}", "1.00×"),
        ("AgentLoom run loop", f"{p * 1000:,.2f}", f"{p / b:,.1f}×"),
    ], ("loop", "median ms / step", "ratio"))


WORDS_150 = " ".join(["figure"] * 150)
SAVEPOINTS = ("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK TO SAVEPOINT")
TRANSACTIONS = ("BEGIN", "COMMIT", "ROLLBACK")  # both backends log them (BEGIN IMMEDIATE on SQLite)


def _cost(queries: list) -> tuple[int, int, int]:
    """Statements, round trips (statements + savepoints) and commits of captured queries."""
    def starts(query, words):
        return query["sql"].lstrip().upper().startswith(words)
    savepoints = sum(1 for q in queries if starts(q, SAVEPOINTS))
    control = sum(1 for q in queries if starts(q, TRANSACTIONS) and not starts(q, SAVEPOINTS))
    commits = sum(1 for q in queries if starts(q, ("COMMIT",)))
    return len(queries) - savepoints - control, len(queries) - control, commits


def _long_script(steps: int, marks: list, times: list):
    from django.db import connections

    from tests.fakes.fake_provider import chat_stream

    database = connections["default"]

    def handler(request):
        marks.append(len(database.queries_log))
        times.append(time.perf_counter())
        done = sum(1 for m in request.json["messages"] if m["role"] == "tool")
        if done + 1 >= steps:
            return chat_stream([WORDS_150], usage={"prompt_tokens": 10, "completion_tokens": 2})
        return chat_stream([WORDS_150], tool_calls=[{"id": f"c{done}", "name": "calculator",
                                                     "arguments": json.dumps({"expression": f"{done}+1"})}])
    return handler


def _bare_replay(base_url: str, bodies: list, dialect: str = "openai") -> list[float]:
    """Seconds per request for a bare httpx loop sending ``bodies`` in order (same fake)."""
    import httpx

    path, headers = "/chat/completions", {}
    if dialect == "anthropic":
        path, headers = "/messages", {"x-api-key": BENCH_KEY, "anthropic-version": "2023-06-01"}
    out = []
    with httpx.Client(trust_env=False) as client:
        for body in bodies:
            start = time.perf_counter()
            with client.stream("POST", base_url + path, json=body, headers=headers) as response:
                for line in response.iter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        json.loads(line[6:])
            out.append(time.perf_counter() - start)
    return out


def bench_step_cost(steps: int, vendor: str, dialect: str = "openai") -> None:
    from django.db import connection, connections
    from django.test.utils import CaptureQueriesContext

    from models_catalog.models import ModelConnection
    from runloop import calls
    from runloop.loop import run_execute
    from sessions.services.questions import question_ask
    from tests.fakes.fake_provider import FakeProvider

    marks: list[int] = []
    times: list[float] = []
    handler = _long_script(steps, marks, times)
    # The loop's own work: from the end of one provider call (its stream read) to the start
    # of the next (before its body is encoded) — records, events, tools, projection, body,
    # estimates and call log; nothing the provider or the wire does.
    calls_made: list[tuple[float, float]] = []
    stream_once = calls._stream_once

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return stream_once(*args, **kwargs)
        finally:
            calls_made.append((start, time.perf_counter()))
    calls._stream_once = timed
    provider, model = "openai_compatible", "fake"
    if dialect == "anthropic":  # the same answers over the Messages API, checked by its rules
        from tests.fakes.anthropic_bridge import AnthropicBridge

        handler, provider, model = AnthropicBridge(handler, api_key=BENCH_KEY), "anthropic", "claude-fake-4"
    with FakeProvider(handler) as fake:
        user, version = _agent(fake.base_url, f"long-{dialect}", provider, model)
        ModelConnection.objects.filter(pk=version.model_connection_id).update(context_window=2_000_000)
        type(version).objects.filter(pk=version.pk).update(context_window=2_000_000)
        version.refresh_from_db()
        session = _session(user, version)
        run = question_ask(session=session, content="Count up, with commentary.")
        database = connections["default"]
        with CaptureQueriesContext(database):
            database.queries_log.clear()
            try:
                run_execute(run_id=run.pk)
            finally:
                calls._stream_once = stream_once
            queries = list(database.queries_log)
        times, marks = list(times), list(marks)  # the replay below goes through the same handler
        bodies = [request.native if dialect == "anthropic" else request.json for request in fake.requests]
        bare_times = _bare_replay(fake.base_url, bodies, dialect)
    tool_steps = [_cost(queries[a:b]) for a, b in zip(marks, marks[1:])][1:]
    tail = queries[marks[-1]:]  # the answer step: to the end of the attempt's first write
    answer = _cost(tail[:next(i for i, q in enumerate(tail) if '"model_steps" =' in q["sql"])])
    durations = [b - a for a, b in zip(times, times[1:])]
    early = statistics.median(durations[15:25])
    late = statistics.median(durations[-10:])
    def figures(column: int) -> str:
        values = [cost[column] for cost in tool_steps]
        return f"{statistics.median(values):.0f} (max {max(values)})"
    rows = [("a step with one tool call", figures(0), figures(1), figures(2), "≤ 12 round trips"),
            ("the step that answers", f"{answer[0]}", f"{answer[1]}", f"{answer[2]}", "≤ 8 round trips")]
    table(f"(a2) SQL per step ({vendor}, {dialect} wire, {steps}-step run; the model call log included; each "
          "transaction adds a BEGIN and a COMMIT round trip)", rows,
          ("step", "statements", "round trips (with savepoints)", "transactions", "target"))
    bare_early, bare_late = statistics.median(bare_times[15:25]), statistics.median(bare_times[-10:])
    own = [b[0] - a[1] for a, b in zip(calls_made, calls_made[1:])]
    own_early, own_late = statistics.median(own[15:25]), statistics.median(own[-10:])
    table(f"(a3) ms per step, 150 words of text per step ({dialect} wire, {steps}-step run); the bare loop sends "
          "the same bodies; the loop's own work is a step's time outside the provider call", [
        ("around step 20", f"{early * 1000:,.1f}", f"{bare_early * 1000:,.1f}", f"{own_early * 1000:,.1f}", "1.00×",
         "1.00×"),
        (f"the last 10 of {steps}", f"{late * 1000:,.1f}", f"{bare_late * 1000:,.1f}", f"{own_late * 1000:,.1f}",
         f"{late / early:,.2f}× (bare {bare_late / bare_early:,.2f}×)",
         f"{own_late / own_early:,.2f}× (target ≤ 1.3×)"),
    ], ("steps", "AgentLoom ms / step", "bare httpx ms / step", "own work ms / step", "step, ratio to step 20",
        "own work, ratio"))
    if dialect != "openai":
        return  # the storage figures below are the same on either wire
    if connection.vendor != "postgresql":
        print("(a3) bytes stored per session: needs PostgreSQL\n")
        return
    sizes = {}
    with connection.cursor() as cursor:
        for name in ("agent_sessions_sessionmessage", "agent_sessions_runevent", "agent_sessions_modelcall",
                     "agent_sessions_sentblob", "agent_sessions_compactionsnapshot", "agent_sessions_sessionview"):
            cursor.execute("SELECT pg_total_relation_size(%s)", [name])
            sizes[name] = cursor.fetchone()[0]
    records = sizes["agent_sessions_sessionmessage"]
    table(f"(a3) bytes stored for the benchmark database's sessions against their records ({steps}-step run "
          "and the runs above)", [(name.removeprefix("agent_sessions_"), f"{size:,}", f"{size / records:,.2f}×")
                                  for name, size in sizes.items()]
          + [("all of them", f"{sum(sizes.values()):,}", f"{sum(sizes.values()) / records:,.2f}× (target ≤ 4×)")],
          ("table (with indexes)", "bytes", "against records"))


def bench_concurrency(runs: int, steps: int, vendor: str) -> None:
    from django.conf import settings
    from django.db.models import Max, Min

    from runloop.tasks import dispatch_run
    from sessions.models import ModelCall, Run
    from sessions.services.dispatch import dispatcher_set
    from sessions.services.questions import question_ask
    from tests.fakes.fake_provider import FakeProvider

    if vendor != "postgresql":
        print("\n(b) concurrent runs: skipped (needs PostgreSQL: set DATABASE_URL=postgres://…)")
        return
    # The runs are one person's: the bound on a person's running runs is lifted, so the
    # figure is the loop's over two workers, not the bound's.
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentloom.settings", "AGENTLOOM_MAX_RUNNING_RUNS_PER_USER": "0"}
    workers = [subprocess.Popen([sys.executable, "-m", "celery", "-A", "agentloom", "worker", "--pool=threads",
                                 "--concurrency=10", "--without-mingle", "--without-gossip", "--loglevel=ERROR",
                                 "-n", f"bench{i}@%h"], cwd=REPO, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(2)]
    try:
        time.sleep(3)
        dispatcher_set(dispatch_run)
        with FakeProvider(_script(steps)) as fake:
            user, version = _agent(fake.base_url, "concurrency")
            ids = [question_ask(session=_session(user, version), content="Count up.").pk for _ in range(runs)]
            deadline = time.monotonic() + 600
            unfinished = Run.objects.filter(pk__in=ids, status__in=["queued", "running"])
            while time.monotonic() < deadline and unfinished.exists():
                time.sleep(0.5)
        calls = list(ModelCall.objects.filter(run_id__in=ids).order_by("run_id", "id")
                     .values_list("run_id", "created_at"))
        span = ModelCall.objects.filter(run_id__in=ids).aggregate(a=Min("created_at"), b=Max("finished_at"))
        gaps = [(b[1] - a[1]).total_seconds() for a, b in zip(calls, calls[1:]) if a[0] == b[0]]
        seconds = (span["b"] - span["a"]).total_seconds()
        done = Run.objects.filter(pk__in=ids, status="completed").count()
        gaps.sort()
        table(f"(b) {runs} concurrent runs × {steps} steps over 2 worker processes "
              f"({'Redis' if settings.REDIS_URL else 'filesystem'} broker)", [
            ("runs completed", f"{done}/{runs}"), ("model steps per second", f"{len(calls) / seconds:,.1f}"),
            ("p50 step latency ms", f"{gaps[len(gaps) // 2] * 1000:,.1f}"),
            ("p95 step latency ms", f"{gaps[int(len(gaps) * 0.95)] * 1000:,.1f}"),
        ], ("figure", "value"))
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=20)


def bench_event_latency(count: int = 200) -> None:
    import httpx

    from core.accounts.services import token_issue
    from sessions.models import Run, RunEvent
    from sessions.services.events import event_emit
    from sessions.services.runs import run_finish
    from tests.fakes.fake_provider import FakeProvider
    from tests.runloop.livesrv import LiveServer, read_sse

    with FakeProvider(_script(2)) as fake:
        user, version = _agent(fake.base_url, "latency")
    session = _session(user, version)
    run = Run.objects.create(session=session, version=version, status=Run.Status.RUNNING)
    from sessions.models import Instance

    Instance.objects.create(run=run, key="main")
    token = token_issue(user=user, client="benchmark")[1]
    received: dict[int, float] = {}
    with LiveServer() as server:
        def client():
            with httpx.Client(base_url=server.url, headers={"Authorization": f"Token {token}"}, timeout=60) as http:
                with http.stream("GET", f"/api/v1/runs/{run.pk}/events") as response:
                    lines = response.iter_lines()
                    for frame in iter(lambda: read_sse(lines, stop_after=1), []):
                        received[int(frame[0]["id"])] = time.time()
                        if frame[0]["event"] == "run_finished":
                            return

        reader = threading.Thread(target=client)
        reader.start()
        time.sleep(1)
        for index in range(count):
            event_emit(run_id=run.pk, type="message_delta", data={"text": f"{index} "})
            time.sleep(0.01)
        run_finish(run=run, status=Run.Status.COMPLETED)
        event_emit(run_id=run.pk, type="run_finished", data={"status": "completed"})
        reader.join(timeout=60)
    produced = {e.seq: e.created_at.timestamp() for e in RunEvent.objects.filter(run=run)}
    latencies = sorted((received[s] - produced[s]) * 1000 for s in received if s in produced)
    from django.conf import settings

    table(f"(c) event latency, {len(latencies)} events, produced → received by an SSE client "
          f"({'Redis pub/sub' if settings.REDIS_URL else 'database polling'})", [
        ("p50 ms", f"{latencies[len(latencies) // 2]:,.1f}"),
        ("p95 ms", f"{latencies[int(len(latencies) * 0.95)]:,.1f}"),
    ], ("figure", "value"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--long", type=int, default=300)
    args = parser.parse_args()
    vendor = setup()
    bench_overhead(args.steps)
    bench_step_cost(args.long, vendor)
    bench_step_cost(args.long, vendor, "anthropic")
    bench_concurrency(args.runs, 10, vendor)
    bench_event_latency()


if __name__ == "__main__":
    main()
