"""People at once on a one-slot real local server (issue #45): run
``.venv/bin/python benchmarks/local_server.py [--people 1,2,4,8] [--output 128]``.

Starts llama-cpp-python's real server (``python -m llama_cpp.server``, SmolLM2-135M-Instruct,
``n_ctx`` 2,048: one request at a time) from the build ``scripts/local_models.py`` made
(``paths --json``), on a free port of 127.0.0.1, and drives the product's own run loop
(``question_ask`` + ``run_execute``, each person in a thread with its own database
connection, as worker threads run them) against it. Prints two tables:

1. 1, 2, 4 and 8 people asking at once, each in a session of their own: how many answers
   completed whole (the server ended them, or the output limit did — not a cut), and the
   wait each person saw from asking to the end of the run (p50/p95), against the same
   questions asked one by one (the ratio of the p50s; on one slot, n people at once cannot
   do better than about (n+1)/2 on average — the queue is the server's, not the platform's);
2. the share of the real window (2,048) used before the first compaction: one session of
   long questions until the first compaction; the largest prompt the server counted
   (``usage.prompt_tokens``) before it, over 2,048 (goal: at least 75%).

Bounded: each run is bounded by the product's own limits; the whole benchmark by
``--deadline`` seconds, after which it reports what it has and stops the server (it never
waits for a run beyond the deadline: threads are daemons). Loopback only. Exits 0 when the
server is not built (saying how to build it), 1 when an answer did not complete.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

from _django import REPO, setup, table

sys.path.insert(0, str(REPO))

WINDOW = 2048
# A long question asking for a long answer (the notes a person pastes fill the window too):
# the same as tests/local_servers/test_done_when.py asks.
QUESTION = ("Write a long, detailed essay about {topic}: its history, how it works, the people involved, "
            "and why it matters today. Use several long paragraphs and give many examples. My notes so far, to "
            "build on: people first wrote about it long ago, and each generation added something; the early "
            "accounts disagree about dates, places and names; later work measured what the early accounts only "
            "described; the changes it brought reached trade, farming, travel, medicine, law and everyday life; "
            "some of those changes were welcomed and some were resisted for a long time; today teachers, engineers "
            "and historians still argue about what mattered most, and why it happened where and when it did, and "
            "not somewhere else or sooner. Please use these notes, correct them where they are wrong, and add what "
            "they leave out.")
TOPICS = ("the Roman Empire", "photosynthesis", "the French Revolution", "black holes", "the printing press",
          "plate tectonics", "the Silk Road", "vaccines", "the steam engine", "coral reefs", "the Moon landing",
          "volcanoes", "the Renaissance", "honey bees", "the Internet", "glaciers")


def manifest() -> dict[str, Any] | None:
    """The real servers' build, as ``scripts/local_models.py paths --json`` tells it."""
    found = subprocess.run([sys.executable, str(REPO / "scripts" / "local_models.py"), "paths", "--json"],
                           capture_output=True, text=True, timeout=60)
    return json.loads(found.stdout) if found.returncode == 0 else None


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


class Bench:
    def __init__(self, server, output: int) -> None:
        from django.contrib.auth import get_user_model

        from agents.services import agent_create, agent_publish
        from core.spaces.models import Membership
        from core.spaces.services import membership_add, space_bootstrap_for_user
        from models_catalog.services import connection_create

        users = get_user_model()
        self.owner = users.objects.create_user(username=f"bench-owner-{time.time_ns()}", password="x-bench-pass-1")
        self.space = space_bootstrap_for_user(user=self.owner, name="Bench")
        self.people = []
        for number in range(8):
            person = users.objects.create_user(username=f"bench-{number}-{time.time_ns()}", password="x-bench-pass-1")
            membership_add(space=self.space, user=person, role=Membership.Role.MEMBER)
            self.people.append(person)
        # As an admin enters it (the service the API and console use: it picks the margin for the window).
        connection = connection_create(space=self.space, data={
            "name": "Real llama-cpp-python", "provider": "openai_compatible", "base_url": server.base_url,
            "api_key": "", "model": server.model, "context_window": WINDOW, "max_output_tokens": output})
        self.agent = agent_create(space=self.space, name="Bench", model_connection=connection,
                                  instructions="Answer every question at length, in several paragraphs.", tools=[],
                                  created_by=self.owner)
        self.version = agent_publish(agent=self.agent, published_by=self.owner)

    def session(self, person):
        from sessions.models import Session

        return Session.objects.create(space=self.space, user=person, agent=self.agent, version=self.version)


def ask(session, question: str) -> tuple[float, dict[str, Any]]:
    """One question through the product's loop; the seconds from asking to the end of the
    run, and how it ended (status, error code, whether the answer was whole)."""
    from runloop.loop import run_execute
    from sessions.models import ModelCall, Run
    from sessions.services.questions import question_ask

    start = time.perf_counter()
    run = question_ask(session=session, content=question)
    run_execute(run_id=run.pk)
    took = time.perf_counter() - start
    run.refresh_from_db()
    calls = list(ModelCall.objects.filter(run=run, purpose="action").order_by("pk"))
    last = (calls[-1].request.get("output") or {}).get("finish_reason") if calls else None
    return took, {"status": run.status, "code": (run.error or {}).get("code"),
                  "whole": run.status == Run.Status.COMPLETED and last in ("stop", "length")}


def at_once(bench: Bench, people: int, deadline: float) -> list[tuple[float, dict[str, Any]] | None]:
    """``people`` people ask one question each at the same moment; what each saw (None: not
    ended by the deadline)."""
    from django.db import connections

    sessions = [bench.session(bench.people[i]) for i in range(people)]
    seen: list[tuple[float, dict[str, Any]] | None] = [None] * people
    start = threading.Barrier(people)

    def person(i: int) -> None:
        try:
            start.wait(timeout=60)
            seen[i] = ask(sessions[i], QUESTION.format(topic=TOPICS[i]))
        except Exception as exc:  # noqa: BLE001 — a benchmark reports, it does not stop
            seen[i] = (0.0, {"status": "error", "code": type(exc).__name__, "whole": False})
        finally:
            connections.close_all()

    threads = [threading.Thread(target=person, args=(i,), daemon=True) for i in range(people)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    return seen


def window_share(bench: Bench, deadline: float) -> tuple[int | None, str, int, int]:
    """Long questions in one session until its first compaction: the largest prompt sent
    before it (the server's count, ``usage.prompt_tokens``; our estimate where the server
    reported none), where that figure came from, the questions asked, the compactions seen."""
    from sessions.models import CompactionSnapshot, ModelCall

    session = bench.session(bench.people[0])
    asked = 0
    for topic in TOPICS:
        if time.monotonic() > deadline:
            break
        ask(session, QUESTION.format(topic=topic))
        asked += 1
        if CompactionSnapshot.objects.filter(instance__run__session=session).exists():
            break
    counted: list[int] = []
    estimated: list[int] = []
    for call in ModelCall.objects.filter(run__session=session).order_by("pk"):
        if call.purpose != "action":
            break  # the first summary: what came after is the compacted view
        prompt = (call.usage or {}).get("prompt_tokens")
        if prompt:
            counted.append(prompt)
        estimated.append(call.estimated_tokens)
    compactions = CompactionSnapshot.objects.filter(instance__run__session=session).count()
    if counted:
        return max(counted), "the server's count", asked, compactions
    return (max(estimated) if estimated else None), "our estimate", asked, compactions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", default="1,2,4,8", help="how many people at once, comma-separated")
    parser.add_argument("--output", type=int, default=128, help="the agent's output limit, tokens")
    parser.add_argument("--deadline", type=float, default=900.0, help="seconds for the whole benchmark")
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.people.split(",") if n.strip()]
    if not counts or min(counts) < 1 or max(counts) > 8:
        parser.error("--people: between 1 and 8 people")
    built = manifest()
    if built is None:
        print("local_server: the real servers are not built here; `make local-models` builds them "
              "(about ten minutes the first time). Nothing measured.")
        return 0
    deadline = time.monotonic() + args.deadline
    vendor = setup()
    from tests.local_servers.fixtures import SMOLLM2_ALIAS, _stop, start_llama_cpp_python

    server = start_llama_cpp_python(built, built["models"]["smollm2"], SMOLLM2_ALIAS)
    failed = 0
    try:
        bench = Bench(server, args.output)
        # The same questions, one by one: what each person would wait alone.
        alone, alone_whole = [], 0
        for i in range(max(counts)):
            if time.monotonic() > deadline:
                break
            took, ended = ask(bench.session(bench.people[i]), QUESTION.format(topic=TOPICS[i]))
            alone.append(took)
            alone_whole += ended["whole"]
            failed += not ended["whole"]
        alone_p50 = statistics.median(alone) if alone else float("nan")
        rows = [("one by one", str(len(alone)), str(alone_whole), f"{alone_p50:.1f}",
                 f"{percentile(alone, 0.95):.1f}" if alone else "-", "1.00", "")]
        for people in counts:
            if time.monotonic() > deadline:
                rows.append((f"{people} at once", str(people), "-", "-", "-", "-", "deadline reached"))
                continue
            seen = at_once(bench, people, deadline)
            waits = [s[0] for s in seen if s is not None and s[1]["whole"]]
            codes = sorted({str(s[1]["code"] or s[1]["status"]) for s in seen if s is not None and not s[1]["whole"]})
            unfinished = sum(1 for s in seen if s is None)
            failed += people - len(waits)
            p50 = statistics.median(waits) if waits else float("nan")
            rows.append((f"{people} at once", str(people), str(len(waits)), f"{p50:.1f}",
                         f"{percentile(waits, 0.95):.1f}" if waits else "-", f"{p50 / alone_p50:.2f}",
                         ", ".join(codes) + (f" {unfinished} unfinished" if unfinished else "")))
        table(f"People at once on one slot (llama-cpp-python, SmolLM2-135M, n_ctx {WINDOW}, output {args.output}, "
              f"{vendor})", rows, ("asked", "people", "whole answers", "wait p50 s", "wait p95 s", "p50 ratio",
                                   "not whole"))
        largest, source, asked, compactions = window_share(bench, deadline)
        share = f"{largest / WINDOW:.0%}" if largest else "-"
        table("Share of the real window used before the first compaction (goal >= 75%)",
              [(str(asked), str(compactions), f"{largest or '-'} ({source})", share)],
              ("questions", "compactions", "largest prompt before it", "share of 2,048"))
    finally:
        _stop(server)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
