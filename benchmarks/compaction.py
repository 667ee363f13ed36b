"""Benchmark: what a compaction costs the person and the provider, inline against prepared
in the background (CTX-45), with summaries that ride Anthropic's prompt cache (CTX-46).

    .venv/bin/python benchmarks/compaction.py [--latencies 0.5,4,20] [--pause 2] [--compactions 3]

A person asks long questions of an agent on Anthropic's Messages API: the strict fake on
loopback (``AnthropicBridge``: its checks and its simulated prompt cache), which answers a
question in about 0.2 s and a summary request after the summary latency. Each question
and its answer add about 2% of the 30,720 tokens of input (the first six paste part of a
report as well); the person takes ``--pause`` seconds to read an answer and ask the next
(a fast pace: the longer the pause, the sooner a summary is ready). Per latency, two
sessions ask the same questions:

* prepared -- each preparation runs in a thread as a worker would (``compaction_prepare``)
  and the trigger commits its summary; the session goes on until it has compacted
  ``--compactions`` times (two at 10 s and more), and that sets the number of questions;
* inline -- preparations are asked for but never run (the dispatcher drops them), so the
  trigger summarizes while the person waits.

Reported: (1) the person-visible stall of each compaction (``stall_ms``) at p50 and p95;
how often a run reached the trigger before its summary was ready and was sent as it was
(``compaction_skipped``, ``summary_being_prepared``), and the largest request that made;
the time spent waiting for answers (the ratio against inline) and the session's wall
time; (2) the share of summary input read from the prompt cache (``cache_read_input_tokens``
over all the input of the summary calls); (3) in a session where a manual compaction and
then a changed policy come while a summary is ready, the summary input spent on
preparations that were discarded, as a share of all summary input (a preparation's calls
are told by the thread that logged them). Every request is checked by the fake; the
count it refused is printed (0). Only 127.0.0.1 is used, and the benchmark database of
``_django.setup`` (a throw-away SQLite file unless PostgreSQL is configured).
"""
from __future__ import annotations

import argparse
import re
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from _django import REPO, setup, table

sys.path.insert(0, str(REPO))

KEY = "sk-ant-bench-compaction"
WINDOW, OUTPUT = 32_768, 1_024  # margin: the default for this window (1,024), so 30,720 of input
POLICY = {"context_ratio": 0.8, "target_ratio": 0.6}  # prepare point: halfway, 0.7
MAX_QUESTIONS = 60
PASTES = 6  # the first questions paste 120 lines of a report each
TOPICS = ("revenue", "churn", "hiring", "logistics", "pricing", "support", "security", "marketing")


def question(number: int) -> str:
    """A long question (about 1,500 characters); the first six paste part of a report too."""
    topic = TOPICS[number % len(TOPICS)]
    ask = (f"Question {number}: looking at {topic} again, compare region {number % 7} with region "
           f"{(number * 3) % 7} and tell me what we should change next quarter. ")
    detail = " ".join(f"In month {m} the {topic} figure for team {number}-{m} moved by {(number * m) % 17} points "
                      "against plan, which the regional lead explained in the weekly notes." for m in range(1, 13))
    if number > PASTES:
        return ask + detail
    lines = range((number - 1) * 120, number * 120)
    report = "\n".join(f"Line {k}: region {k % 7}, {TOPICS[k % 8]} {k * 37 % 1000} units, margin {k % 23}%, "
                       f"owner team {k % 41}, status {'on plan' if k % 3 else 'behind plan'}." for k in lines)
    return ask + detail + "\nHere is the next part of the quarterly report:\n" + report


def answer(number: int) -> list[str]:
    """About 800 characters, streamed in eight pieces."""
    return [f"On question {number}, piece {k}: the figures point to a steady trend, and the next step is "
            f"to review region {(number + k) % 7} with its lead. " for k in range(8)]


def summary(messages: list[dict[str, Any]]) -> str:
    """Nine sections, the sixth listing every question the summarized history asked."""
    from context.compaction import SECTION_TITLES
    from tests.fakes.summaries import summary_input

    asked = sorted({int(n) for n in re.findall(r"Question (\d+):", summary_input(messages))})
    sections = [f"{n}. {SECTION_TITLES[n - 1]}: the discussion of regions and plans so far, with what was decided."
                for n in range(1, 10)]
    sections[5] = "6. All user messages: " + "; ".join(f"Question {n} asked about {TOPICS[n % 8]}" for n in asked)
    return "<summary>\n" + "\n".join(sections) + "\n</summary>"


class Model:
    """The scripted model behind the bridge: summaries after ``latency`` seconds, answers
    streamed in about 0.2 s."""

    def __init__(self, latency: float) -> None:
        self.latency = latency

    def __call__(self, request: Any) -> Any:
        from tests.fakes.responses import chat_stream
        from tests.fakes.summaries import is_summary

        messages = request.json["messages"]
        if is_summary(messages):
            time.sleep(self.latency)  # the provider writing a long summary; this request's thread only
            return chat_stream([summary(messages)])
        asked = [int(n) for m in messages if m["role"] == "user"
                 for n in re.findall(r"^Question (\d+):", str(m["content"]))]
        return chat_stream(answer(asked[-1] if asked else 0), delay=0.02)


class Preparations:
    """A preparation dispatcher: each queued summary is made in a thread named after it, as
    a worker would make it (``run``), or recorded in ``dropped`` and never made."""

    def __init__(self, run: bool) -> None:
        self.run = run
        self.threads: list[threading.Thread] = []
        self.dropped: list[int] = []

    def __call__(self, prepared_id: int) -> None:
        if not self.run:
            self.dropped.append(prepared_id)
            return
        thread = threading.Thread(target=self._prepare, args=(prepared_id,), name=f"prepare-{prepared_id}",
                                  daemon=True)
        self.threads.append(thread)
        thread.start()

    @staticmethod
    def _prepare(prepared_id: int) -> None:
        from django.db import connection

        from runloop.preparation import compaction_prepare

        try:
            compaction_prepare(prepared_id=prepared_id)
        finally:
            connection.close()

    def wait(self) -> None:
        for thread in self.threads:
            thread.join(timeout=300)
            if thread.is_alive():
                raise SystemExit(f"{thread.name} never ended")


CALLS_BY_PREPARATION: dict[int, int] = {}  # model call id -> the preparation whose thread logged it


def _note_call(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    name = threading.current_thread().name
    if created and name.startswith("prepare-"):
        CALLS_BY_PREPARATION[instance.pk] = int(name.removeprefix("prepare-"))


@dataclass
class Measured:
    """What one session measured."""

    stalls: list[int] = field(default_factory=list)
    prepared: list[bool] = field(default_factory=list)
    forms: Counter[str] = field(default_factory=Counter)
    deferred_steps: int = 0
    deferred_compactions: int = 0
    questions: int = 0
    waited: float = 0.0
    elapsed: float = 0.0
    wall: float = 0.0
    largest: int = 0  # the largest action request's input, by the provider's count
    summary_usage: list[dict[str, int]] = field(default_factory=list)
    discarded_usage: list[dict[str, int]] = field(default_factory=list)
    discards: Counter[str] = field(default_factory=Counter)
    rejections: list[Any] = field(default_factory=list)


def _agent(base_url: str, name: str, policy: dict[str, Any]) -> Any:
    from django.contrib.auth import get_user_model

    from agents.services import agent_create, agent_publish
    from core.spaces.services import space_bootstrap_for_user
    from models_catalog.models import ModelConnection
    from sessions.models import Session

    user, _ = get_user_model().objects.get_or_create(username="bench-compaction")
    space = space_bootstrap_for_user(user=user)
    connection = ModelConnection.objects.create(space=space, name=name, provider="anthropic", base_url=base_url,
                                                api_key=KEY, model="claude-fake-4", context_window=WINDOW,
                                                max_output_tokens=OUTPUT)
    agent = agent_create(space=space, name=name, model_connection=connection, instructions="Be thorough.",
                         tools=[], context_policy=policy, created_by=user)
    version = agent_publish(agent=agent, published_by=user)
    return Session.objects.create(space=space, user=user, agent=agent, version=version)


def _between(session: Any, events: list[str]) -> None:
    """The discard scenario: while a summary is ready, the next of ``events`` happens
    before the next question (a manual compaction, a changed policy)."""
    from agents.services import agent_publish, agent_update
    from runloop.compaction_manual import compaction_manual
    from sessions.models import PreparedCompaction
    from sessions.services.manual_compaction import compaction_request

    if not events or not PreparedCompaction.objects.filter(session=session, status="ready").exists():
        return
    what = events.pop(0)
    if what == "manual":  # a person presses Compact between two questions (CTX-43)
        _, run = compaction_request(session=session)
        compaction_manual(run_id=run.pk)
    elif what == "policy":  # the agent is published with another policy; the session moves to it
        agent = session.agent
        agent_update(agent=agent, data={"context_policy": {"context_ratio": 0.78, "target_ratio": 0.58}})
        session.version = agent_publish(agent=agent, published_by=session.user)
        session.save(update_fields=["version"])


def run_session(latency: float, mode: str, *, pause: float, compactions: int | None = None,
                questions: int = MAX_QUESTIONS, events: tuple[str, ...] = ()) -> Measured:
    """One person's session in ``mode`` ("inline" or "prepared"): ``questions`` questions,
    or fewer once it has compacted ``compactions`` times by its triggers. A pause is waited
    out only while a summary is being prepared (nothing else in the session depends on
    the clock); the wall time counts every pause, as the person lives it."""
    from runloop.loop import run_execute
    from sessions.models import CompactionSnapshot
    from sessions.services.dispatch import preparation_dispatcher_set
    from sessions.services.questions import question_ask
    from tests.fakes.anthropic_bridge import AnthropicBridge
    from tests.fakes.fake_provider import FakeProvider

    preparations = Preparations(run=mode == "prepared")
    preparation_dispatcher_set(preparations)
    bridge = AnthropicBridge(Model(latency), api_key=KEY)
    measured = Measured()
    with FakeProvider(bridge) as fake:
        session = _agent(fake.base_url, f"{mode} {latency:g}s{' with discards' if events else ''}", POLICY)
        triggered = CompactionSnapshot.objects.filter(instance__run__session=session).exclude(
            metrics__trigger="manual")
        started, skipped, pending = time.perf_counter(), 0.0, list(events)
        for number in range(1, questions + 1):
            if number > 1:  # the person reads the answer and writes the next question
                if any(thread.is_alive() for thread in preparations.threads):
                    time.sleep(pause)
                else:
                    skipped += pause
                _between(session, pending)
            asked = time.perf_counter()
            run = question_ask(session=session, content=question(number))
            run_execute(run_id=run.pk)
            run.refresh_from_db()
            if run.status != "completed":
                raise SystemExit(f"question {number} ended {run.status}: {run.error}")
            measured.waited += time.perf_counter() - asked
            measured.questions = number
            if compactions is not None and triggered.count() >= compactions:
                break
        measured.elapsed = time.perf_counter() - started
        measured.wall = measured.elapsed + skipped
        preparations.wait()  # what is still being prepared ends before it is counted
        measured.rejections = list(bridge.rejections)
    _measure(session, measured)
    return measured


def _measure(session: Any, measured: Measured) -> None:
    """Read a finished session's compactions, deferrals, preparations and summary calls."""
    from sessions.models import CompactionSnapshot, ModelCall, PreparedCompaction, RunEvent

    deferred = False
    for event in RunEvent.objects.filter(run__session=session).order_by("run_id", "seq"):
        if event.type == "compaction_skipped" and event.payload.get("reason") == "summary_being_prepared":
            measured.deferred_steps += 1
            deferred = True
        elif event.type == "compacted" and event.payload.get("trigger") != "manual":
            measured.deferred_compactions += deferred
            deferred = False
    for snapshot in CompactionSnapshot.objects.filter(instance__run__session=session).order_by("id"):
        if snapshot.metrics["trigger"] != "manual":
            measured.stalls.append(int(snapshot.metrics["stall_ms"]))
            measured.prepared.append(bool(snapshot.metrics["prepared"]))
        measured.forms[snapshot.metrics.get("summary_form") or "none"] += 1
    status = dict(PreparedCompaction.objects.filter(session=session).values_list("id", "status"))
    for row in PreparedCompaction.objects.filter(session=session, status="discarded", claimed_at__isnull=False):
        measured.discards[row.reason] += 1  # preparations that ran (an inline session's never do)
    for call in ModelCall.objects.filter(run__session=session).exclude(usage=None):
        if call.purpose == ModelCall.Purpose.ACTION:
            measured.largest = max(measured.largest, int(call.usage.get("prompt_tokens") or 0))
            continue
        measured.summary_usage.append(call.usage)
        preparation = CALLS_BY_PREPARATION.get(call.pk)
        if preparation is not None and status.get(preparation) == "discarded":
            measured.discarded_usage.append(call.usage)


INPUT = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
# Anthropic's prices of input read from the cache and written to it, against plain input.
PRICE = {"input_tokens": 1.0, "cache_read_input_tokens": 0.1, "cache_creation_input_tokens": 1.25}


def tokens(usages: list[dict[str, int]], *, priced: bool = False) -> float:
    return sum(u.get(k, 0) * (PRICE[k] if priced else 1) for u in usages for k in INPUT)


def cached_share(usages: list[dict[str, int]]) -> str:
    total = tokens(usages)
    return f"{sum(u.get('cache_read_input_tokens', 0) for u in usages) / total:.0%}" if total else "—"


def percentile(values: list[int], share: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latencies", default="0.5,4,20", help="summary latencies, seconds")
    parser.add_argument("--pause", type=float, default=2.0, help="seconds a person takes between questions")
    parser.add_argument("--compactions", type=int, default=3, help="per session (two at 10 s or more)")
    args = parser.parse_args()
    setup()
    from django.db.models.signals import post_save

    from sessions.models import ModelCall
    from sessions.services.dispatch import compaction_dispatcher_set, dispatcher_set

    dispatcher_set(None)  # runs are executed here, in order; nothing goes to a broker
    compaction_dispatcher_set(None)
    post_save.connect(_note_call, sender=ModelCall)
    latencies = [float(x) for x in args.latencies.split(",")]
    results: dict[tuple[float, str], Measured] = {}
    for latency in latencies:
        # Prepared first, to its compactions; inline asks the same questions (its triggers
        # fire no later, so it compacts at least as often).
        prepared = run_session(latency, "prepared", pause=args.pause,
                               compactions=2 if latency >= 10 else args.compactions)
        inline = run_session(latency, "inline", pause=args.pause, questions=prepared.questions)
        results[latency, "inline"], results[latency, "prepared"] = inline, prepared
        print(f"  {latency:g} s summaries: {prepared.elapsed + inline.elapsed:.0f} s", file=sys.stderr, flush=True)
    discards = run_session(latencies[0], "prepared", pause=args.pause, compactions=2, events=("manual", "policy"))
    report(results, latencies, discards, args.pause)


def report(results: dict[tuple[float, str], Measured], latencies: list[float], discards: Measured,
           pause: float) -> None:
    from context.policy import Budget, default_safety_margin

    effective = Budget(WINDOW, OUTPUT, default_safety_margin(WINDOW)).effective_input
    rows = []
    for latency in latencies:
        inline = results[latency, "inline"]
        for mode in ("inline", "prepared"):
            s = results[latency, mode]
            rows.append((f"{latency:g} s", mode, f"{s.questions}", f"{len(s.stalls)} ({sum(s.prepared)} prepared)",
                         f"{percentile(s.stalls, 0.5):,}", f"{percentile(s.stalls, 0.95):,}",
                         f"{s.deferred_compactions} ({s.deferred_steps} steps)", f"{s.largest / effective:.0%}",
                         f"{s.waited:,.1f}", "1.00×" if mode == "inline" else f"{s.waited / inline.waited:.2f}×",
                         f"{s.wall:,.1f}"))
    table(f"(1) person-visible stall per compaction (stall_ms; p95 of so few is the largest), Anthropic wire, "
          f"{WINDOW:,}-token window, {pause:g} s between questions; target p95 ≤ 1,000 ms", rows,
          ("summary latency", "mode", "questions", "compactions", "stall p50 ms", "stall p95 ms",
           "deferred compactions (steps)", "largest request / input", "waited for answers s", "ratio",
           "session wall s"))
    rows = []
    for mode in ("inline", "prepared"):
        usages = [u for latency in latencies for u in results[latency, mode].summary_usage]
        forms = sum((results[latency, mode].forms for latency in latencies), Counter())
        rows.append((mode, f"{len(usages)}", ", ".join(f"{n} {f}" for f, n in forms.items()),
                     f"{tokens(usages):,.0f}", cached_share(usages)))
    table("(2) summary input read from the prompt cache, the sessions of (1); target ≥ 80%", rows,
          ("mode", "summary calls", "summary forms", "input tokens", "read from cache"))
    every = [u for s in results.values() for u in s.summary_usage]
    every_wasted = [u for s in results.values() for u in s.discarded_usage]
    table(f"(3) summary input spent on preparations that were discarded ({latencies[0]:g} s summaries)", [
        _discard_row("a manual compaction, then a changed policy, each while a summary was ready",
                     discards.discards, discards.discarded_usage, discards.summary_usage),
        _discard_row("the sessions of (1), inline and prepared", sum((s.discards for s in results.values()),
                                                                    Counter()), every_wasted, every),
    ], ("sessions", "discarded preparations", "their input tokens", "share of summary input",
        "priced per discard (share): cache read 0.1×, write 1.25×"))
    refused = [r for s in (*results.values(), discards) for r in s.rejections]
    print(f"\nrequests the strict fake refused: {len(refused)}" + (f" {refused[:3]}" if refused else ""))


def _discard_row(label: str, discards: Counter[str], wasted: list[dict[str, int]],
                 spent: list[dict[str, int]]) -> tuple[str, ...]:
    count = sum(discards.values())
    if not spent or not count:
        return label, "none", f"0 of {tokens(spent):,.0f}", "0%", "—"
    priced = tokens(wasted, priced=True)
    return (label, ", ".join(f"{n} {reason}" for reason, n in discards.items()),
            f"{tokens(wasted):,.0f} of {tokens(spent):,.0f}", f"{tokens(wasted) / tokens(spent):.0%}",
            f"{priced / count:,.0f} ({priced / tokens(spent, priced=True):.0%})")


if __name__ == "__main__":
    main()
