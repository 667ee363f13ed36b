"""Benchmark: tokens sent per step with and without compaction over a 400-step session.

    .venv/bin/python benchmarks/compaction_tokens.py [--steps 400]

A generated tool-heavy session (each step: an assistant tool call and a 3,000-character
tool output, a new user question every 20 steps) is driven through the pure engine twice:
without compaction (the request is the whole projected history) and with it (the CTX-22
budget trigger and the engine, with an instant scripted summarizer). Reported: tokens
sent at steps 100/200/400 and in total, compactions, summary calls per compaction, and the
preparation time per step excluding model latency. The window is a 128k-token model's.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from context import Budget, ContextPolicy, Counters, evaluate_triggers, get_estimator, project_records  # noqa: E402
from context.compaction import SECTION_TITLES, CompactionRequest, RuntimeState, SummaryReply, compact, drive  # noqa: E402

SYSTEM = {"role": "system", "content": "You are a coding agent. Use tools to inspect and fix the repository."}
TOOLS = [{"type": "function", "function": {
    "name": "run", "description": "Run a shell command.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}]


def records_for(steps: int) -> list[dict]:
    records, seq = [], 0

    def add(kind, message):
        nonlocal seq
        seq += 1
        records.append({"seq": seq, "run": 1, "instance": "main", "kind": kind, "message": message})

    for step in range(steps):
        if step % 20 == 0:
            add("user", {"role": "user", "content": f"Task {step // 20 + 1}: fix the failing tests in module {step}."})
        call = f"c{step}"
        add("assistant", {"role": "assistant", "content": f"Step {step}: checking.",
                          "tool_calls": [{"id": call, "type": "function", "function": {
                              "name": "run", "arguments": f'{{"cmd": "pytest -k t{step}"}}'}}]})
        output = "\n".join(f"line {i} of step {step}: test_{i} PASSED in 0.0{i % 10}s" for i in range(70))
        add("tool_result", {"role": "tool", "tool_call_id": call, "name": "run", "content": output, "status": "ok"})
    return records


def summarize(call) -> SummaryReply:
    sections = "\n".join(f"{n}. {SECTION_TITLES[n - 1]}: the work so far, briefly." for n in range(1, 10))
    return SummaryReply(text=f"<summary>\n{sections}\n</summary>")


def run(steps: int, compacting: bool) -> dict:
    estimator = get_estimator("gpt-4o")
    budget = Budget(context_window=128_000, max_output_tokens=4_096, safety_margin_tokens=1_024)
    policy = ContextPolicy()
    records = records_for(steps)
    view, watermark, counters = None, 0, Counters()
    sent, prep, compactions, summary_calls = [], [], 0, []
    step_index = 0
    for position, record in enumerate(records):
        if record["kind"] != "assistant":
            continue
        step_index += 1
        started = time.perf_counter()
        visible = [r for r in records[:position] if r["seq"] > watermark]
        options = {"open_runs": set()}
        if view is not None:
            options.update(start_view=view, start_watermark=watermark)
        messages = project_records(visible, **options)
        tokens = estimator.request([SYSTEM, *messages], TOOLS)
        if compacting and evaluate_triggers(policy=policy, budget=budget, estimated_tokens=tokens, counters=counters):
            anchor = next((m for m in reversed(messages) if m["role"] == "user"), None)
            calls = []
            result = drive(compact(CompactionRequest(
                system=SYSTEM, messages=messages, sources=[None] * len(messages), task_anchor=anchor,
                runtime_state=RuntimeState(), budget=budget, policy=policy, estimator=estimator, tools=TOOLS,
                trigger="budget", max_summary_calls=policy.max_compaction_calls, dialect="openai")),
                lambda call: calls.append(call) or summarize(call))  # noqa: B023  (drive calls it in this iteration)
            if result.outcome == "compacted":
                view, watermark = result.messages, records[position - 1]["seq"]
                messages = result.messages
                tokens = estimator.request([SYSTEM, *messages], TOOLS)
                compactions += 1
                summary_calls.append(len(calls))
        prep.append(time.perf_counter() - started)
        sent.append(tokens)
    return {"sent": sent, "prep": prep, "compactions": compactions, "summary_calls": summary_calls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()
    plain, compacted = run(args.steps, False), run(args.steps, True)
    marks = [m for m in (100, 200, 400) if m <= args.steps]
    print(f"\nTokens sent per step over a {args.steps}-step tool-heavy session (128k window, trigger at 80%)")
    print(f"{'step':>6}  {'no compaction':>14}  {'with compaction':>16}")
    for mark in marks:
        print(f"{mark:>6}  {plain['sent'][mark - 1]:>14,}  {compacted['sent'][mark - 1]:>16,}")
    total_plain, total_compacted = sum(plain["sent"]), sum(compacted["sent"])
    print(f"{'total':>6}  {total_plain:>14,}  {total_compacted:>16,}   "
          f"({total_plain / total_compacted:.1f}× fewer tokens sent)")
    over = sum(1 for t in plain["sent"] if t + 4_096 > 128_000 - 1_024)
    print(f"\nwithout compaction, {over} of {args.steps} steps would exceed the window (stopped by CTX-39)")
    calls = compacted["summary_calls"]
    print(f"compactions: {compacted['compactions']}, summary calls per compaction: "
          f"{statistics.mean(calls) if calls else 0:.1f} (max {max(calls) if calls else 0})")
    print(f"preparation per step, median: {statistics.median(plain['prep']) * 1000:.1f} ms without, "
          f"{statistics.median(compacted['prep']) * 1000:.1f} ms with compaction "
          f"(max {max(compacted['prep']) * 1000:.0f} ms, a compacting step); model latency excluded")


if __name__ == "__main__":
    main()
