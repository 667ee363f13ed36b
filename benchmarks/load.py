"""Load run: concurrent chat users against the fake provider, web + two worker processes.

    .venv/bin/python benchmarks/load.py [--users 50] [--seconds 120] [--workers 2]

Loopback only, bounded in time, stops by itself. Each simulated user has a session and,
until the time is up, asks a question over the HTTP API, follows the run's events over
SSE to the end, and asks again. The fake provider streams each answer in 20 chunks
(10 ms apart) and sometimes calls the calculator first; it refuses any invalid request.

Reported: questions per second, time to first token and whole-run time (p50/p95/p99),
errors, invalid provider requests, lost records. Exits non-zero when any error, invalid
request or lost record is seen (the short form of this run is a CI test).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

from _django import REPO, setup, table

sys.path.insert(0, str(REPO))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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


def _world(users: int, base_url: str):
    from django.contrib.auth import get_user_model

    from agentloom.accounts.services import token_issue
    from agentloom.agents.services import agent_create, agent_publish
    from agentloom.spaces.models import Membership
    from agentloom.spaces.services import membership_add, space_bootstrap_for_user
    from models_catalog.models import ModelConnection

    User = get_user_model()
    stamp = int(time.time())
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


def _user(url: str, token: str, agent_id: int, deadline: float, results: list, errors: list) -> None:
    import httpx

    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60, trust_env=False) as client:
        try:
            session = client.post("/api/v1/sessions", json={"agent": agent_id}).json()["id"]
        except Exception as exc:  # noqa: BLE001 - counted and reported
            errors.append(f"session: {exc!r}")
            return
        number = 0
        while time.monotonic() < deadline:
            number += 1
            content = f"Question {number}: please add two and two" if random.random() < 0.3 else f"Question {number}"
            started = time.monotonic()
            response = client.post(f"/api/v1/sessions/{session}/questions", json={"content": content})
            if response.status_code == 429:
                time.sleep(float(response.headers.get("Retry-After", "1")))
                continue
            if response.status_code != 202:
                errors.append(f"ask: {response.status_code} {response.text[:200]}")
                time.sleep(0.5)
                continue
            run_id = response.json()["id"]
            first_token = None
            status = None
            try:
                with client.stream("GET", f"/api/v1/runs/{run_id}/events", timeout=120) as stream:
                    event = None
                    for line in stream.iter_lines():
                        if line.startswith("event: "):
                            event = line[7:]
                        elif line.startswith("data: "):
                            if event == "message_delta" and first_token is None:
                                first_token = time.monotonic() - started
                            if event == "run_finished":
                                status = json.loads(line[6:])["status"]
                                break
            except Exception as exc:  # noqa: BLE001 - counted and reported
                errors.append(f"stream: {exc!r}")
                continue
            if status != "completed":
                errors.append(f"run {run_id} ended {status}")
                continue
            results.append({"run": run_id, "first_token": first_token, "total": time.monotonic() - started})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("AGENTLOOM_ASK_RATE", "1000/min")
    vendor = setup()
    if vendor != "postgresql":
        print("the load run needs PostgreSQL (web and workers are separate processes): set DATABASE_URL=postgres://…")
        return 2
    from django.conf import settings

    from sessions.models import Run, SessionMessage
    from tests.fakes.fake_provider import FakeProvider
    from tests.fakes.strict import StrictProvider

    strict = StrictProvider(_provider, api_key="sk-load-test-key-000")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentloom.settings", "LOG_LEVEL": "WARNING"}
    port = _free_port()
    processes = []
    with FakeProvider(strict) as fake:
        agent, tokens = _world(args.users, fake.base_url)
        try:
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "agentloom.asgi:application", "--host", "127.0.0.1",
                 "--port", str(port), "--log-level", "warning"], cwd=REPO, env=env))
            for index in range(args.workers):
                processes.append(subprocess.Popen(
                    [sys.executable, "-m", "celery", "-A", "agentloom", "worker", "--pool=threads", "--concurrency=16",
                     "--without-mingle", "--without-gossip", "--loglevel=ERROR", "-n", f"load{index}@%h"],
                    cwd=REPO, env=env, stdout=subprocess.DEVNULL))
            url = f"http://127.0.0.1:{port}"
            import httpx

            for _ in range(100):
                try:
                    if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
            time.sleep(2)  # let the workers connect
            results: list[dict] = []
            errors: list[str] = []
            started = time.monotonic()
            deadline = started + args.seconds
            threads = [threading.Thread(target=_user, args=(url, token, agent.pk, deadline, results, errors),
                                        daemon=True)
                       for token in tokens]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=args.seconds + 180)
            elapsed = time.monotonic() - started
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
    completed_ids = [r["run"] for r in results]
    lost = 0
    for run_id in completed_ids:  # every completed run has its question, an answer and its end, in order
        kinds = list(SessionMessage.objects.filter(run_id=run_id).order_by("seq").values_list("kind", flat=True))
        if not kinds or kinds[0] != "user" or "assistant" not in kinds or kinds[-1] != "run_status":
            lost += 1
    stuck = Run.objects.filter(session__agent=agent, status__in=["queued", "running"]).count()
    first = [r["first_token"] for r in results if r["first_token"] is not None]
    total = [r["total"] for r in results]
    table(f"Load: {args.users} users for {args.seconds:.0f} s, {args.workers} worker processes "
          f"({'Redis' if settings.REDIS_URL else 'filesystem'} broker), fake provider on loopback", [
        ("runs completed", f"{len(results)}"), ("questions per second", f"{len(results) / elapsed:,.1f}"),
        ("time to first token p50 / p95 / p99 (s)",
         f"{_percentile(first, .5):.2f} / {_percentile(first, .95):.2f} / {_percentile(first, .99):.2f}"),
        ("whole run p50 / p95 / p99 (s)",
         f"{_percentile(total, .5):.2f} / {_percentile(total, .95):.2f} / {_percentile(total, .99):.2f}"),
        ("errors", f"{len(errors)}"), ("invalid provider requests", f"{len(strict.rejections)}"),
        ("lost records", f"{lost}"), ("runs left queued/running", f"{stuck}"),
    ], ("figure", "value"))
    for error in errors[:10]:
        print("  error:", error)
    return 1 if errors or strict.rejections or lost or stuck or not results else 0


if __name__ == "__main__":
    sys.exit(main())
