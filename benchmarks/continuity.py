"""Benchmark (CTX-52): what the agent still knows after 1…5 chained compactions.

    .venv/bin/python benchmarks/continuity.py [--generated 4] [--per-source 2] [--compactions 5]
        [--memory-sessions 5] [--memory-fillers 3] [--memory-only | --no-memory]

Sessions: real transcripts of ``../shared/corpus`` (tau-bench, pi-mono, Claude Code,
SWE-agent, ToolBench; skipped with a printed reason when the corpus is absent) and
generated tool-heavy ones. Each opens with planted facts of every kind (``_continuity.py``:
the goal as the first question, a standing instruction, an artifact, a decision, an open
task, a sub-agent's result, a call whose outcome is unknown, a pinned message), then the
transcript's records, then generated tool steps up to a fixed size, so every session is
long enough for five compactions in a 16,384-token window.

Path: the worker's compaction path without Django -- each step's request is projected
from the records (``project_records`` with the last checkpoint's view, as the pipeline
does), the CTX-22 triggers are evaluated, and ``compact()`` runs with the inputs the
worker's ``runloop.compaction.compaction_request`` gives it (anchor, runtime state with
unknown calls, ledger, pins, history facts) and the summarizer answering its calls. Not
the run loop on a fake provider: the transcripts' tools (Claude Code's ``Read``, SWE-agent's
``str_replace_editor``, …) do not exist on the platform, so the loop would record errors
instead of their outputs; an unknown outcome needs a worker lost during a call; and 13
sessions × about 55 steps × 3 summarizers × 2 tier choices (over 4,000 steps, each with its
database writes) does not fit five minutes on a busy 2-core machine.

Compared in the same run, per summarizer (faithful, terse, junk):
* §5a -- the policy's first tier on (``mask_tool_results``), the goal and the pinned
  message pinned, the artifact ledger and the history facts (for the summary written by
  code) given to the engine -- each only when main has the feature (printed first);
* summary only -- ``mask_tool_results: false``, no pins, no ledger, no history facts:
  whatever the summary alone carries (the runtime state's unknown calls stay, CTX-36).

Reported: per kind, the share of planted facts present (``_continuity.present``) in the
first request after compaction k; the tokens sent over each session (action requests and
summary calls) and the tokens a prefix cache would have served, the fake provider's
way: the longest run of whole messages (tools and system first) equal to the previous
action request's; and PASS/FAIL per goal of issue #47. The process exits 0 either way.

Then the cross-session case (MEM-3, ``_continuity_memory.py``): facts given in session 1,
asked in sessions 2…5 with compactions between, through the run loop on the fake provider,
with memory against the same sessions without it: the share recalled, the tokens memory
adds to each request and what it adds to the cache read on Anthropic's wire.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from _continuity import (
    CARRIED_BY_CODE,
    ROWS,
    SUMMARIZERS,
    TOOLS,
    Session,
    extend,
    generated_steps,
    open_session,
    present,
    prompt_text,
    tally,
)
from _continuity_inputs import features, history_facts, ledger
from _django import REPO

sys.path.insert(0, str(REPO))

from context import Budget, ContextPolicy, Counters, evaluate_triggers, get_estimator, project_records  # noqa: E402
from context.compaction import CompactionRequest, RuntimeState, SummaryReply, compact, drive  # noqa: E402
from context.pipeline import throttled  # noqa: E402
from context.policy import POLICY_DEFAULTS, default_safety_margin  # noqa: E402
from context.truncation import DEFAULT_TOOL_RESULT_LIMIT  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus"
WINDOW, OUTPUT = 16_384, 1_024
SESSION_CHARS = 150_000  # every session is topped up with generated steps to about this size
MIN_STEPS = 30  # and at least this many generated steps after the transcript
TRANSCRIPT_CHARS = 80_000  # of a real transcript, at most this much is used
CONFIGS = ("§5a", "summary only")
# The provider modelled has an automatic prefix cache (OpenAI's, DeepSeek's): the worker
# sends its summary requests in the cached form (CTX-46, ``ride_cache``); --no-cache: not.
RIDE_CACHE = True


@dataclass
class Outcome:
    """One session under one summarizer and one tier choice."""

    session: str
    source: str
    present: list[dict[str, tuple[int, int]]] = field(default_factory=list)  # per compaction: kind -> (kept, of)
    outcomes: Counter[str] = field(default_factory=Counter)
    forms: Counter[str] = field(default_factory=Counter)  # tiers / summary source, from the metrics
    sent: int = 0
    summary_sent: int = 0
    summary_calls: int = 0
    cache_read: int = 0
    stopped: str | None = None
    steps: int = 0


def _size(records: list[dict[str, Any]]) -> int:
    """Characters the records add to a view (a long tool result is cut there, CTX-7)."""
    return sum(min(len(json.dumps(r["message"])), DEFAULT_TOOL_RESULT_LIMIT) for r in records)


def sessions(generated: int, per_source: int) -> list[Session]:
    out: list[Session] = []
    if CORPUS.is_dir():
        from _transcripts import conversations

        taken: Counter[str] = Counter()
        for conversation in conversations(CORPUS):
            records = [r for r in conversation.records if r["kind"] in ("user", "assistant", "tool_result")]
            if taken[conversation.source] >= per_source or len(records) < 10:
                continue
            taken[conversation.source] += 1
            kept, size = [], 0
            for record in records:
                size += _size([record])
                if size > TRANSCRIPT_CHARS and record["kind"] == "user":
                    break  # whole turns only
                kept.append(record)
            s = open_session(conversation.source, conversation.name, conversation.system, len(out) + 1)
            extend(s, kept)
            out.append(s)
    else:
        print(f"corpus not found at {CORPUS}: real transcripts skipped, generated sessions only")
    for number in range(generated):
        s = open_session("generated", f"tool-heavy #{number + 1}", "You are a coding agent. Use the tools.",
                         len(out) + 1)
        out.append(s)
    for s in out:  # the same size for every session: generated tool steps after the transcript
        steps = max(MIN_STEPS, (SESSION_CHARS - _size(s.records)) // 2_900)
        generated_steps(s, steps)
    return out


def _unknown_calls(records: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """CTX-36: calls of an ended run that never got a result (the worker lists them from its records)."""
    answered = {r["message"].get("tool_call_id") for r in records if r["kind"] == "tool_result"}
    last_run = records[-1]["run"] if records else None
    return tuple({"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                 for r in records if r["kind"] == "assistant" and r["run"] != last_run
                 for c in r["message"].get("tool_calls") or () if c["id"] not in answered)


def _cached(previous: list[dict[str, Any]] | None, current: list[dict[str, Any]], estimator: Any) -> int:
    """Tokens a prefix cache serves: tools, then whole messages equal to the previous request's."""
    if previous is None:
        return 0
    total = estimator.tools(TOOLS)
    for before, now in zip(previous, current):
        if before != now:
            break
        total += estimator.message(now)
    return total


def run(session: Session, summarizer: str, config: str, compactions: int) -> Outcome:
    estimator = get_estimator("gpt-4o")
    budget = Budget(WINDOW, OUTPUT, default_safety_margin(WINDOW))
    on = config == "§5a"
    policy_data = {} if "mask_tool_results" not in POLICY_DEFAULTS else {"mask_tool_results": on}
    policy = ContextPolicy.from_dict(policy_data)
    system = {"role": "system", "content": session.system}
    records = session.records
    outcome = Outcome(session.name, session.source)
    view, watermark, traces, failure = None, 0, None, None
    previous: list[dict[str, Any]] | None = None
    write = SUMMARIZERS[summarizer]

    def summarize(call: Any) -> SummaryReply:
        outcome.summary_sent += call.estimated_tokens
        outcome.summary_calls += 1
        if call.tools is not None:  # the cached form (CTX-46): the action request's prefix, then the instruction
            outcome.cache_read += _cached(previous, call.messages, estimator)
        return SummaryReply(text=write(prompt_text(call.messages, cached=call.tools is not None)))

    for position in range(1, len(records) + 1):
        if position < len(records) and records[position]["kind"] != "assistant":
            continue  # a request is made before each assistant record, and one at the end
        seen = records[:position]
        sources: list[Any] = []
        traced: list[Any] = []
        current = {seen[-1]["run"]}  # the run in progress: its unanswered calls are pending
        options: dict[str, Any] = {"open_runs": current, "sources_out": sources, "traces_out": traced}
        if view is not None:
            options.update(start_view=view, start_watermark=watermark, start_traces=traces)
        messages = project_records([r for r in seen if r["seq"] > watermark], **options)
        tokens = estimator.request([system, *messages], TOOLS)
        fired = evaluate_triggers(policy=policy, budget=budget, estimated_tokens=tokens, counters=Counters())
        if fired and not throttled(failure, tokens, budget, now=time.time()):
            anchor = next((r["message"] for r in reversed(seen) if r["kind"] == "user"), None)
            state = RuntimeState(unknown_calls=_unknown_calls(seen), ledger=ledger(seen, current) if on else ())
            request = CompactionRequest(
                system=system, messages=messages, sources=sources, task_anchor=anchor, runtime_state=state,
                budget=budget, policy=policy, estimator=estimator, tools=TOOLS, trigger="budget",
                max_summary_calls=policy.max_compaction_calls, dialect="openai", ride_cache=RIDE_CACHE,
                traces=traced if len(traced) == len(messages) else None,
                pinned=frozenset(session.pinned) if on else frozenset(),
                history=history_facts(seen, current) if on else None)
            result = drive(compact(request), summarize)
            outcome.outcomes[result.outcome] += 1
            for key in ("tiers", "tier", "summary_source"):
                value = result.metrics.get(key)
                if value:
                    outcome.forms[f"{key}={value if isinstance(value, str) else '+'.join(map(str, value))}"] += 1
            if result.outcome == "compacted":
                view, watermark, traces, failure = result.messages, seen[-1]["seq"], result.traces, None
                messages = list(result.messages or [])
                tokens = estimator.request([system, *messages], TOOLS)
                if len(outcome.present) < compactions:
                    outcome.present.append(tally(present([f for f in session.facts if f.seq <= watermark],
                                                         [system, *messages])))
            elif result.outcome == "failed":
                failure = {"tokens": tokens, "at": time.time(), "reason": result.reason}
        if not budget.fits(tokens):
            outcome.stopped = f"context_overflow at step {outcome.steps + 1}"
            break
        request_messages = [system, *messages]
        outcome.sent += tokens
        outcome.cache_read += _cached(previous, request_messages, estimator)
        previous = request_messages
        outcome.steps += 1
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--generated", type=int, default=3, help="generated tool-heavy sessions")
    parser.add_argument("--per-source", type=int, default=2, help="real transcripts per corpus source")
    parser.add_argument("--compactions", type=int, default=5)
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    parser.add_argument("--no-cache", action="store_true", help="summary requests in the transcript form")
    parser.add_argument("--memory-sessions", type=int, default=5, help="the cross-session case: sessions 1…N")
    parser.add_argument("--memory-fillers", type=int, default=3, help="long questions per session (compactions)")
    parser.add_argument("--memory-only", action="store_true", help="only the cross-session case (MEM-3)")
    parser.add_argument("--no-memory", action="store_true", help="leave out the cross-session case")
    args = parser.parse_args()
    if args.memory_only:
        _memory_case(args)
        return
    global RIDE_CACHE
    RIDE_CACHE = not args.no_cache
    on = features()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                            check=False).stdout.strip() or "unknown"
    print(f"measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at commit {commit}")
    print("features on this tree: " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in on.items()))
    all_sessions = sessions(args.generated, args.per_source)
    print(f"{len(all_sessions)} sessions: " + ", ".join(f"{s.source} {s.name} ({len(s.records)} records)"
                                                       for s in all_sessions), flush=True)
    started = time.perf_counter()
    results: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for summarizer in SUMMARIZERS:
        for config in CONFIGS:
            for s in all_sessions:
                results[summarizer, config].append(run(s, summarizer, config, args.compactions))
        print(f"  {summarizer}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    import _continuity_report
    from _continuity_report import report

    _continuity_report.MARKDOWN = args.markdown
    report(results, args.compactions, CONFIGS, ROWS, CARRIED_BY_CODE)
    if not args.no_memory:
        _memory_case(args)


def _memory_case(args: argparse.Namespace) -> None:
    """Across sessions (MEM-3): facts of session 1 asked in sessions 2…N, memory against none
    (``_continuity_memory.py``: the run loop on the fake provider, a database)."""
    from _continuity_memory import run_case

    print(f"\ncross-session case: {args.memory_sessions} sessions, {args.memory_fillers} long questions each",
          flush=True)
    run_case(sessions=args.memory_sessions, fillers=args.memory_fillers)


if __name__ == "__main__":
    main()
