"""Benchmark: the chat's session page of a long conversation, rendered again and again.

    .venv/bin/python benchmarks/chat_pages.py [--runs 20] [--imported 18000] [--repeat 7]

Two sessions, each the worst a page shows:
(a) ``--runs`` finished runs (a page's worth), each a question, three tool steps with
    results and a long Markdown answer (headings, lists, a table, code);
(b) one imported run of ``--imported`` messages (RUN-12), as an import leaves it.
Each page is fetched ``--repeat`` times by its owner through Django's test client; the
CPU time of each fetch (this process's, ``time.process_time``) is reported, first fetch
and the median of the rest, and the run fragment of the newest run likewise.
"""
from __future__ import annotations

import argparse
import statistics
import time

from _django import setup, table

ANSWER = """## What I found

The deployment failed at **step 3** because the migration took a lock on `orders` while the
old workers were still writing. Here is what happened, in order:

1. The new release started its migrations at 12:00:03.
2. `ALTER TABLE orders ADD COLUMN region text` waited for the writers' locks.
3. Every request that touched `orders` queued behind it; the health check timed out.

| step | started | took | outcome |
|---|---|---|---|
| build | 11:58:10 | 92 s | ok |
| migrate | 12:00:03 | 301 s | timed out |
| switch | — | — | not reached |

```python
def migrate(connection):
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '5s'")
        cursor.execute("ALTER TABLE orders ADD COLUMN region text")
```

- Set a `lock_timeout` so a migration gives up instead of stalling everything.
- Run the column change before the workers switch, or in two steps.
- See [the runbook](https://example.com/runbook#migrations) for the long version.

"""


def _world():
    from django.contrib.auth import get_user_model

    from agents.services import agent_create, agent_publish
    from core.spaces.services import space_bootstrap_for_user
    from models_catalog.models import ModelConnection
    from sessions.models import Session

    user, _ = get_user_model().objects.get_or_create(username="bench-pages")
    space = space_bootstrap_for_user(user=user)
    connection = ModelConnection.objects.create(space=space, name="demo", provider="demo", model="agentloom-demo")
    agent = agent_create(space=space, name="bench", model_connection=connection, tools=["calculator"])
    version = agent_publish(agent=agent)

    def session() -> Session:
        return Session.objects.create(space=space, user=user, agent=agent, version=version)

    return user, agent, session


def _long_runs(session, runs: int) -> None:
    from sessions.models import Run
    from sessions.selectors.instances import main_instance
    from sessions.services.events import event_emit
    from sessions.services.model_steps import step_save_assistant
    from sessions.services.questions import question_ask
    from sessions.services.records import record_append
    from sessions.services.runs import run_claim, run_finish

    for number in range(runs):
        run = run_claim(run_id=question_ask(session=session, content=f"Question {number}: why did the "
                                            "deployment fail, and what should we change? " * 4).pk)
        main = main_instance(run=run)
        for step in range(3):
            call_id = f"call-{number}-{step}"
            step_save_assistant(run=run, instance=main, entry_key=f"assistant-{step}", message={
                "role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {
                    "name": "calculator", "arguments": '{"expression": "6*7"}'}}]})
            record_append(session=session, run=run, instance=main, kind="tool_result", entry_key=f"result-{step}",
                          message={"role": "tool", "tool_call_id": call_id, "name": "calculator", "status": "ok",
                                   "content": "log line with a timestamp and a status\n" * 50})
            event_emit(run_id=run.pk, type="tool_finished",
                       data={"call_id": call_id, "name": "calculator", "status": "ok", "duration_ms": 12})
        step_save_assistant(run=run, instance=main, entry_key="assistant-final",
                            message={"role": "assistant", "content": ANSWER * 3})
        run_finish(run=run, status=Run.Status.COMPLETED)


def _imported(user, agent, count: int) -> int:
    from sessions.services.imports import session_import

    messages = [{"role": "user" if n % 2 == 0 else "assistant",
                 "content": f"Message {n}: " + ("a short line of an old conversation " * 3)} for n in range(count)]
    return session_import(user=user, agent_id=agent.pk, transcript=messages).pk


def _cpu_per_fetch(client, path: str, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        response = client.get(path)
        times.append(time.process_time() - start)
        assert response.status_code == 200, response.status_code
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--imported", type=int, default=18_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    vendor = setup()
    from django.conf import settings
    from django.test import Client

    from sessions.models import Run

    settings.ALLOWED_HOSTS = ["testserver"]
    settings.AGENTLOOM_SESSIONS_PER_DAY = 1_000_000
    user, agent, new_session = _world()
    long_session = new_session()
    _long_runs(long_session, args.runs)
    imported_id = _imported(user, agent, args.imported)
    client = Client()
    client.force_login(user)
    rows = []
    for label, session_id in ((f"{args.runs} long runs", long_session.pk), (f"1 imported run of {args.imported:,}",
                                                                            imported_id)):
        newest = Run.objects.filter(session_id=session_id).order_by("-id").first()
        for what, path in (("page", f"/sessions/{session_id}/"), ("fragment", f"/chat/runs/{newest.pk}/fragment")):
            times = _cpu_per_fetch(client, path, args.repeat)
            rows.append((label, what, f"{times[0] * 1000:.0f} ms", f"{statistics.median(times[1:]) * 1000:.0f} ms"))
    table(f"Chat pages, CPU per fetch ({vendor})", rows, ("session", "what", "first", "median of the rest"))


if __name__ == "__main__":
    main()
