"""Context engine benchmarks (SPEC §12): run ``.venv/bin/python benchmarks/context_engine.py``.

Prints one table. Each figure is compared with a baseline measured in the same run, so
the ratios mean something on a shared 2-core machine even when absolute times wander.

1. Projection throughput on 10k- and 100k-record histories (target: 100k in under 1 s).
2. Starting from a reusable view: projecting the records after its watermark versus
   re-projecting the whole 100k-record session.
3. Per-step token estimation over a 500-step session: the per-message cache versus a
   full recount at every step (target: at least 20x cheaper at step 500).
"""

from __future__ import annotations

import functools
import gc
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
_SHARED_TIKTOKEN = REPO.parent / "shared" / "tiktoken"
if _SHARED_TIKTOKEN.is_dir():
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(_SHARED_TIKTOKEN))

from context import BytesEstimator, EstimateCache, project_records  # noqa: E402
from context.estimators import tiktoken_estimator  # noqa: E402

WORDS = "the a build test error file path value result line module function request user".split()


def _text(rng: random.Random, size: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(size // 5))


def synthetic_history(n_records: int, seed: int = 1) -> list[dict[str, Any]]:
    """A session shaped like real agent work: questions, tool loops, metadata, stops."""
    rng = random.Random(seed)
    records: list[dict[str, Any]] = []
    run = 0

    def add(kind: str, message: dict[str, Any]) -> None:
        records.append({"seq": len(records) + 1, "run": f"r{run}", "instance": "main",
                        "kind": kind, "message": message})

    while len(records) < n_records:
        run += 1
        add("user", {"role": "user", "content": _text(rng, 200)})
        for _step in range(rng.randint(1, 8)):
            calls = [{"id": f"call_{rng.randint(0, 50)}", "type": "function",
                      "function": {"name": rng.choice(["read", "run", "browser_use"]),
                                   "arguments": '{"path": "src/app.py"}'}} for _ in range(rng.randint(1, 2))]
            add("assistant", {"role": "assistant", "content": _text(rng, 120), "tool_calls": calls})
            for call in calls:
                if rng.random() < 0.97:
                    add("tool_result", {"role": "tool", "tool_call_id": call["id"],
                                        "content": _text(rng, rng.choice([200, 800, 3000])), "status": "ok"})
            if rng.random() < 0.1:
                add("label", {"text": "checkpoint"})
        add("assistant", {"role": "assistant", "content": _text(rng, 300)})
        add("run_status", {"status": rng.choice(["completed", "completed", "cancelled"])})
    return records[:n_records]


def best_of(repeat: int, fn: Callable[[], Any]) -> float:
    """The fastest of ``repeat`` runs, in seconds (the least disturbed by neighbours).

    Garbage left by earlier measurements is collected first so one benchmark does not
    pay for another's full collections.
    """
    gc.collect()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def bench_projection(rows: list[tuple[str, str, str]]) -> None:
    for size in (10_000, 100_000):
        records = synthetic_history(size)
        seconds = best_of(3, functools.partial(project_records, records))
        target = " (target < 1 s: " + ("met" if seconds < 1 else "MISSED") + ")" if size == 100_000 else ""
        rows.append((f"projection, {size:,} records", f"{seconds * 1000:,.0f} ms",
                     f"{size / seconds:,.0f} records/s{target}"))


def bench_start_view(rows: list[tuple[str, str, str]]) -> None:
    records = synthetic_history(100_000)
    watermark = records[-200]["seq"]
    view = project_records([r for r in records if r["seq"] <= watermark], open_runs=())
    tail = [r for r in records if r["seq"] > watermark]
    full = best_of(3, lambda: project_records(records))
    # A real view is compacted and small; this one is the uncompacted prefix, which is
    # the worst case for the view path (it re-reads every message of the view).
    with_view = best_of(3, lambda: project_records(tail, start_view=view, start_watermark=watermark))
    compact_view = view[-40:]
    small = best_of(5, lambda: project_records(tail, start_view=compact_view, start_watermark=watermark))
    rows.append(("worst case: view = whole uncompacted prefix", f"{with_view * 1000:,.1f} ms",
                 f"{full / with_view:,.1f}x faster than re-projecting"))
    rows.append(("start view (40 msgs) + 199 newer records", f"{small * 1000:,.2f} ms",
                 f"{full / small:,.0f}x faster than re-projecting (target >= 50x)"))


def session_steps(steps: int, seed: int = 2) -> list[list[dict[str, Any]]]:
    """The message list at each step of a long tool loop (two messages per step)."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [{"role": "user", "content": _text(rng, 400)}]
    out = []
    for step in range(steps):
        call_id = f"call_{step + 1}"
        messages.append({"role": "assistant", "content": _text(rng, 100), "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "run", "arguments": '{"cmd": "make"}'}}]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": _text(rng, rng.choice([300, 1500, 4000]))})
        out.append(list(messages))
    return out


def bench_estimation(rows: list[tuple[str, str, str]], name: str, estimator: Any) -> None:
    steps = session_steps(500)
    cache = EstimateCache(estimator)
    # Each step re-projects: fresh dicts, the same strings (as project_records returns).
    # Building those lists is the projector's cost, so it happens outside the timings.
    for messages in steps[:-1]:
        cache.request([dict(m) for m in messages])
    last = [dict(m) for m in steps[-1]]
    full = best_of(5, lambda: estimator.request(last))
    incremental = best_of(30, lambda: cache.request(last))
    rebuilt = [[dict(x) for x in m] for m in steps]
    total_full = best_of(1, lambda: [estimator.request(m) for m in rebuilt])
    fresh = EstimateCache(estimator)
    total_incr = best_of(1, lambda: [fresh.request(m) for m in rebuilt])
    verdict = "met" if full / incremental >= 20 else "MISSED"
    rows.append((f"estimate step 500 ({name}), full recount", f"{full * 1000:,.2f} ms", f"{len(last)} messages"))
    rows.append((f"estimate step 500 ({name}), incremental", f"{incremental * 1000:,.3f} ms",
                 f"{full / incremental:,.0f}x cheaper (target >= 20x: {verdict})"))
    rows.append((f"500 steps ({name}), full vs incremental", f"{total_full:,.2f} s vs {total_incr:,.2f} s",
                 f"{total_full / total_incr:,.0f}x"))


def main() -> None:
    rows: list[tuple[str, str, str]] = []
    bench_projection(rows)
    bench_start_view(rows)
    bench_estimation(rows, "bytes-v1", BytesEstimator())
    try:
        bench_estimation(rows, "tiktoken o200k", tiktoken_estimator("o200k_base"))
    except Exception as exc:  # noqa: BLE001 - the benchmark reports, never crashes
        rows.append(("estimation (tiktoken o200k)", "skipped", f"{type(exc).__name__}: {exc}"))
    widths = [max(len(r[i]) for r in rows + [("measure", "time", "result")]) for i in range(3)]
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    header = ("measure", "time", "result")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))


if __name__ == "__main__":
    main()
