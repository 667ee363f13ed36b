"""Benchmark: the run loop's own overhead, concurrent runs over two workers, event latency.

    .venv/bin/python benchmarks/loop.py [--steps 30] [--runs 20]

(a) Per model step, the platform loop (context, validation, encrypted records, events)
    against a bare httpx loop making the same calls to the same zero-latency fake
    provider on loopback. Reported: median ms per step for both and the ratio.
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


def _agent(base_url: str, name: str):
    from django.contrib.auth import get_user_model

    from agentloom.agents.services import agent_create, agent_publish
    from agentloom.spaces.services import space_bootstrap_for_user
    from models_catalog.models import ModelConnection

    user, _ = get_user_model().objects.get_or_create(username="bench-loop")
    space = space_bootstrap_for_user(user=user)
    connection = ModelConnection.objects.create(space=space, name=name, provider="openai_compatible",
                                                base_url=base_url, api_key="sk-bench-key-000000", model="fake")
    agent = agent_create(space=space, name=name, model_connection=connection, tools=["calculator"],
                         limits={"max_model_calls": 1000, "max_tool_calls": 1000})
    return user, agent_publish(agent=agent)


def _session(user, version):
    from sessions.models import Session

    return Session.objects.create(space=version.agent.space, user=user, agent=version.agent, version=version)


def bench_overhead(steps: int) -> None:
    import httpx

    from agentloom.runloop.loop import run_execute
    from sessions.models import ModelCall
    from sessions.services.history import question_ask
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


def bench_concurrency(runs: int, steps: int, vendor: str) -> None:
    from django.conf import settings
    from django.db.models import Max, Min

    from agentloom.runloop.tasks import dispatch_run
    from sessions.models import ModelCall, Run
    from sessions.services.dispatch import dispatcher_set
    from sessions.services.history import question_ask
    from tests.fakes.fake_provider import FakeProvider

    if vendor != "postgresql":
        print("\n(b) concurrent runs: skipped (needs PostgreSQL: set DATABASE_URL=postgres://…)")
        return
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentloom.settings"}
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
            while time.monotonic() < deadline and Run.objects.filter(pk__in=ids, status__in=["queued", "running"]).exists():
                time.sleep(0.5)
        calls = list(ModelCall.objects.filter(run_id__in=ids).order_by("run_id", "id").values_list("run_id", "created_at"))
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
    from rest_framework.authtoken.models import Token

    from sessions.services.events import event_emit
    from sessions.models import Run, RunEvent
    from sessions.services.runs import run_finish
    from tests.fakes.fake_provider import FakeProvider
    from tests.runloop.livesrv import LiveServer, read_sse

    with FakeProvider(_script(2)) as fake:
        user, version = _agent(fake.base_url, "latency")
    session = _session(user, version)
    run = Run.objects.create(session=session, version=version, status=Run.Status.RUNNING)
    from sessions.models import Instance

    Instance.objects.create(run=run, key="main")
    token = Token.objects.get_or_create(user=user)[0].key
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
        ("p50 ms", f"{latencies[len(latencies) // 2]:,.1f}"), ("p95 ms", f"{latencies[int(len(latencies) * 0.95)]:,.1f}"),
    ], ("figure", "value"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    vendor = setup()
    bench_overhead(args.steps)
    bench_concurrency(args.runs, 10, vendor)
    bench_event_latency()


if __name__ == "__main__":
    main()
