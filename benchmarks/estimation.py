"""Benchmark: token estimators against real tokenizers over the corpus transcripts.

    .venv/bin/python -m benchmarks.estimation [--max-steps 400] [--factors 1.1,1.2,1.3,1.4]

Each corpus conversation (tau-bench, the pi session, Claude Code sessions, SWE-agent and
ToolBench trajectories: benchmarks/_transcripts.py) is cut before every assistant response
(at most ``--max-steps`` cuts, evenly spaced): the records before the cut are projected
with ``context.project_records`` as the product does, the estimators estimate the projected
messages, and each real tokenizer counts the body ``build_request_body`` would send (the
template count of benchmarks/_tokenizers.py). Reported:

1. estimate / real per estimator and real tokenizer, no calibration: mean, p5, p95, mean
   and p95 of the absolute relative error, the share of requests estimated below real;
2. the same after calibration (CTX-25 as the run loop does it: the estimate times the
   largest real/estimate ratio of the conversation's last 5 earlier requests, as if the
   provider reported the real count for each); a conversation's first request has no
   calibration and is left out of this table;
3. real / o200k quantiles per source: the safety factor o200k needs before the first count;
   3b. the same for bytes-v1 (its prior, below 1), and machine-made text the corpus lacks
   (digit strings, hex, base64) where a byte count comes closest to the real one;
4. the usable window: per request, the share of the effective input a request would hold
   by the real count if the default trigger (0.8 x effective input) fell on it (4a); and,
   walking each conversation in an 8,192- and a 2,048-token window, the real size of the
   request at which each figure first crosses the trigger and of the largest request sent
   before it, as shares of the effective input (4b);
5. a recommended safety factor for the o200k proxy.

Skips with a message when the corpus is absent; a real tokenizer whose package is not
installed (they are in the ``dev`` extras) is skipped with its column.
"""
from __future__ import annotations

import argparse
import base64
import json
import math
import os
import random
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SHARED = REPO.parent / "shared"
if (SHARED / "tiktoken").is_dir():
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(SHARED / "tiktoken"))
CORPUS_DIR = Path(os.environ.get("AGENTLOOM_CORPUS_DIR", SHARED / "corpus"))

from benchmarks._django import table  # noqa: E402
from benchmarks._tokenizers import (  # noqa: E402
    REPLY_PRIMING,
    RealTokenizer,
    TemplateCount,
    real_tokenizers,
    tiktoken_vocabulary_missing,
)
from benchmarks._transcripts import Conversation, conversations  # noqa: E402
from context import (  # noqa: E402
    Budget,
    BytesEstimator,
    ContextPolicy,
    EstimateCache,
    RequestValidationError,
    build_request_body,
    project_records,
)
from context.calibration import BYTES_PRIOR  # noqa: E402
from context.estimators import tiktoken_estimator  # noqa: E402

CALIBRATION_WINDOW = 5  # the run loop reads the session's last 5 calls with usage
DEFAULT_FACTORS = (1.1, 1.2, 1.3, 1.4)
# (label, context window, output reserve, safety margin). The 2,048 window's margin is 10%.
# (label, context window, output reserve, safety margin, agent instructions left out). The
# 2,048 window's margin is 10% of it; there the instructions are left out, because
# tau-bench's alone (about 1,400 tokens) would fill 90% of the effective input. A 32,768
# window is not walked: the conversations that outgrow it are coding sessions whose single
# tool results exceed a quarter of it (table 4a covers every window).
WINDOWS = (("8,192 / 4,096 out / 1,024 margin", 8_192, 4_096, 1_024, False),
           ("2,048 / 256 out / 205 margin, without the agent's instructions", 2_048, 256, 205, True))
MAX_STEP_SHARE = 0.25  # a walk is measured only where no step adds more than this share


class CharsEstimator:
    """chars/4: characters of each message's compact JSON over four, rounded up."""

    id = "chars/4"

    def message(self, message) -> int:
        return math.ceil(len(json.dumps(message, ensure_ascii=False, separators=(",", ":"))) / 4)

    def tools(self, tools) -> int:
        return sum(self.message(t) for t in tools)

    def request(self, messages, tools=None) -> int:
        return sum(self.message(m) for m in messages) + self.tools(tools or ())


def base_estimators() -> dict[str, object]:
    found: dict[str, object] = {"bytes-v1": BytesEstimator(), "chars/4": CharsEstimator()}
    for name in ("cl100k", "o200k"):
        missing = tiktoken_vocabulary_missing(f"{name}_base")
        if missing:
            print(f"estimator tiktoken-{name}: skipped ({missing})")
            continue
        try:
            found[name] = tiktoken_estimator(f"{name}_base")
        except Exception as exc:  # noqa: BLE001 - an estimator that cannot load is a skipped row
            print(f"estimator tiktoken-{name}: skipped ({type(exc).__name__}: {exc})")
    return found


@dataclass
class Series:
    """One conversation's requests: each estimator's figure and each real count, in order."""

    source: str
    name: str
    estimates: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    real: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    system: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # the instructions' share
    invalid: int = 0

    def without_system(self) -> Series:
        """The same requests without the agent's instructions (every figure is a sum over
        messages, so the system message's share comes off each request)."""
        return Series(self.source, self.name,
                      {k: [v - self.system[k] for v in vs] for k, vs in self.estimates.items()},
                      {k: [v - self.system[k] for v in vs] for k, vs in self.real.items()})


def measure(conversation: Conversation, estimators: dict, reals: list[RealTokenizer], max_steps: int) -> Series:
    """Cut the conversation before each assistant response and count every request."""
    series = Series(conversation.source, conversation.name)
    records = conversation.records
    points = [i for i, r in enumerate(records) if r["kind"] == "assistant" and i > 0]
    if len(points) > max_steps:
        points = [points[round(k * (len(points) - 1) / (max_steps - 1))] for k in range(max_steps)]
    system = [{"role": "system", "content": conversation.system}] if conversation.system else []
    tools = conversation.tools or None
    caches = {name: EstimateCache(e) for name, e in estimators.items()}
    counts = {t.name: EstimateCache(TemplateCount(t)) for t in reals}
    for name, cache in [*caches.items(), *counts.items()]:
        series.system[name] = sum(cache.message(m) for m in system)
    for cut in points:
        messages = [*system, *project_records(records[:cut])]
        try:
            body = build_request_body(messages, dialect="openai", model="benchmark", max_output_tokens=4_096,
                                      tools=tools)
        except RequestValidationError:
            series.invalid += 1
            continue
        for name, cache in caches.items():
            series.estimates[name].append(cache.request(messages, tools))
        for name, cache in counts.items():
            series.real[name].append(cache.request(body["messages"], body.get("tools")))
    return series


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))] if ordered else float("nan")


def scaled(values: list[int], factor: float) -> list[int]:
    return values if factor == 1.0 else [math.ceil(v * factor) for v in values]


def calibrated(estimates: list[int], real: list[int], first_factor: float = 1.0) -> list[int]:
    """CTX-25 as the run loop applies it: each figure is the estimate times the largest
    real/estimate ratio of the last 5 earlier requests; the first is the estimate times
    ``first_factor`` (the safety factor before any provider count)."""
    out, ratios = [], []
    for estimate, count in zip(estimates, real):
        ratio = max(ratios[-CALIBRATION_WINDOW:]) if ratios else first_factor
        out.append(math.ceil(estimate * ratio))
        if estimate > 0:
            ratios.append(count / estimate)
    return out


def error_row(label: str, pairs: list[tuple[int, int]]) -> tuple[str, ...]:
    ratios = [e / r for e, r in pairs if r > 0]
    errors = [abs(x - 1) for x in ratios]
    below = sum(1 for x in ratios if x < 1) / len(ratios)
    well_below = sum(1 for x in ratios if x < 0.98) / len(ratios)
    headroom = quantile([1 / x for x in ratios if x > 0], 0.99)
    return (label, f"{sum(ratios) / len(ratios):.2f}", f"{quantile(ratios, 0.05):.2f}", f"{quantile(ratios, 0.95):.2f}",
            f"{sum(errors) / len(errors):.1%}", f"{quantile(errors, 0.95):.1%}", f"{below:.1%}", f"{well_below:.1%}",
            f"{min(ratios):.2f}", f"{headroom:.2f}")


ERROR_HEADERS = ("real / estimator", "mean e/r", "p5 e/r", "p95 e/r", "mean |err|", "p95 |err|", "below real",
                 "below by >2%", "min e/r", "p99 r/e")


def report_errors(all_series: list[Series], reals: list[RealTokenizer], names: list[str], factors: tuple) -> None:
    rows = []
    for tokenizer in reals:
        for name in names:
            rows.append(error_row(f"{tokenizer.name} / {name}", [
                (e, r) for s in all_series for e, r in zip(s.estimates[name], s.real[tokenizer.name])]))
        if "o200k" in names:
            for factor in factors:
                rows.append(error_row(f"{tokenizer.name} / o200k×{factor:g}", [
                    (e, r) for s in all_series
                    for e, r in zip(scaled(s.estimates["o200k"], factor), s.real[tokenizer.name])]))
    table("1. Estimate / real count per request, no calibration", rows, ERROR_HEADERS)
    rows = []
    for tokenizer in reals:
        for name in names:
            rows.append(error_row(f"{tokenizer.name} / {name} (calibrated)", [
                (e, r) for s in all_series
                for e, r in list(zip(calibrated(s.estimates[name], s.real[tokenizer.name]),
                                     s.real[tokenizer.name]))[1:]]))
    table("2. Calibrated figure / real count (every request after a conversation's first; o200k×f "
          "calibrates to the same figures as o200k)", rows, ERROR_HEADERS)


def report_factors(all_series: list[Series], reals: list[RealTokenizer], base: str = "o200k",
                   title: str = "3. Real count / o200k estimate per request: p50 / p95 / p99 / max "
                                "(the factor o200k needs)") -> dict[str, list[float]]:
    """real / ``base`` per request, by source: the factor ``base`` needs to stay above real."""
    needed: dict[str, list[float]] = {t.name: [] for t in reals}
    by_source: dict[tuple[str, str], list[float]] = defaultdict(list)
    for s in all_series:
        for tokenizer in reals:
            for e, r in zip(s.estimates[base], s.real[tokenizer.name]):
                needed[tokenizer.name].append(r / e)
                by_source[(s.source, tokenizer.name)].append(r / e)
    sources = sorted({s.source for s in all_series})
    rows = [(source, *(_spread(by_source[(source, t.name)]) for t in reals)) for source in sources]
    rows.append(("all requests", *(_spread(needed[t.name]) for t in reals)))
    table(title, rows, ("source", *(t.name for t in reals)))
    return needed


def report_bytes_prior(all_series: list[Series], reals: list[RealTokenizer]) -> None:
    """The prior bytes-v1 needs (context.calibration.BYTES_PRIOR): real / bytes-v1 over the
    corpus, then over machine-made text, one tool result each, where bytes count closest."""
    needed = report_factors(all_series, reals, "bytes-v1", "3b. Real count / bytes-v1 estimate per request: "
                            "p50 / p95 / p99 / max (the prior bytes-v1 needs)")
    worst = max(max(values) for values in needed.values())
    print(f"\nreal / bytes-v1, worst tokenizer and request: {worst:.3f} -> a prior of "
          f"{math.ceil(worst * 1.1 * 20) / 20:.2f} stays above every request measured with a tenth to spare")
    rng = random.Random(7)
    probes = {"prose (the corpus's kind)": "The flight leaves at nine from gate twelve, and the fare includes "
                                           "one checked bag. " * 60,
              "digit strings": " ".join(str(rng.randint(0, 10**9)) for _ in range(800)),
              "hex": "".join(rng.choice("0123456789abcdef") for _ in range(8_000)),
              "base64": base64.b64encode(rng.randbytes(6_000)).decode()}
    rows = []
    for label, text in probes.items():
        message = [{"role": "tool", "tool_call_id": "call_1", "content": text}]
        estimate = BytesEstimator().request(message)
        rows.append((label, *(f"{TemplateCount(t).request(message) / estimate:.2f}" for t in reals)))
    table("3c. Real count / bytes-v1 on machine-made tool output (not in the corpus)", rows,
          ("text", *(t.name for t in reals)))


def _spread(values: list[float]) -> str:
    if not values:
        return "—"
    return " / ".join(f"{quantile(values, q):.2f}" for q in (0.5, 0.95, 0.99)) + f" / {max(values):.2f}"


def window_modes(names: list[str], factors: tuple) -> list[tuple[str, str, float, bool]]:
    """(label, base estimator, factor before the first count, calibrated afterwards)."""
    modes = [(f"bytes-v1×{BYTES_PRIOR:g}, then calibrated", "bytes-v1", BYTES_PRIOR, True),
             (f"bytes-v1×{BYTES_PRIOR:g}, no usage", "bytes-v1", BYTES_PRIOR, False),
             ("chars/4, calibrated", "chars/4", 1.0, True), ("chars/4, no usage", "chars/4", 1.0, False)]
    if "o200k" in names:
        modes += [("o200k, calibrated", "o200k", 1.0, True), ("o200k, no usage", "o200k", 1.0, False)]
        for factor in factors:
            modes += [(f"o200k×{factor:g}, then calibrated", "o200k", factor, True),
                      (f"o200k×{factor:g}, no usage", "o200k", factor, False)]
    return [m for m in modes if m[1] in names]


@dataclass
class Crossing:
    """One estimator's window figures over the conversations measured."""

    crossing: list[float] = field(default_factory=list)
    sent: list[float] = field(default_factory=list)
    over_input: int = 0
    over_window: int = 0
    conversations: int = 0

    def add(self, figures: list[int], real: list[int], budget: Budget, threshold: float) -> None:
        """Walk the conversation until the figure first reaches the trigger (that request is
        compacted, not sent): the real share there, the largest request sent before it, and
        whether one of those was over the effective input or over the window."""
        self.conversations += 1
        largest = over_input = over_window = 0
        for figure, count in zip(figures, real):
            if figure >= threshold:
                self.crossing.append(count / budget.effective_input)
                break
            largest = max(largest, count)
            over_input |= count > budget.effective_input
            over_window |= count + budget.max_output_tokens > budget.context_window
        self.sent.append(largest / budget.effective_input)
        self.over_input += over_input
        self.over_window += over_window

    def cell(self) -> str:
        if not self.conversations:
            return "—"
        crossing = f"{quantile(self.crossing, 0.5):.0%}" if self.crossing else "never"
        return (f"{crossing} | {sum(self.sent) / len(self.sent):.0%} / {min(self.sent):.0%} | "
                f"{self.over_input} / {self.over_window}")


def report_windows(all_series: list[Series], reals: list[RealTokenizer], names: list[str], factors: tuple) -> dict:
    policy, results = ContextPolicy(), {}
    columns = [t for t in reals if t.name != "cl100k"]  # cl100k reads like o200k here
    for label, window, output, margin, bare in WINDOWS:
        budget = Budget(context_window=window, max_output_tokens=output, safety_margin_tokens=margin)
        threshold = budget.trigger_threshold(policy)
        modes = window_modes(names, factors)
        cells: dict[tuple[str, str], Crossing] = defaultdict(Crossing)
        population: dict[str, int] = defaultdict(int)
        for s in (x.without_system() if bare else x for x in all_series):
            for tokenizer in columns:
                real = s.real[tokenizer.name]
                # Measured where the first request leaves room to grow (under 60% of the
                # effective input), the real count reaches the trigger, and no step adds
                # more than a quarter of the effective input (else the step size, not the
                # estimator, decides where the trigger falls).
                steps = [b - a for a, b in zip(real, real[1:])]
                if (not real or real[0] >= 0.6 * budget.effective_input or max(real) < threshold
                        or max(steps, default=0) > MAX_STEP_SHARE * budget.effective_input):
                    continue
                population[tokenizer.name] += 1
                for mode, base, factor, calibrate in modes:
                    estimates = s.estimates[base]
                    figures = calibrated(estimates, real, factor) if calibrate else scaled(estimates, factor)
                    cells[(mode, tokenizer.name)].add(figures, real, budget, threshold)
        rows = [(mode, *(cells[(mode, t.name)].cell() for t in columns)) for mode, *_ in modes]
        headers = ("estimator", *(f"{t.name} (n={population[t.name]})" for t in columns))
        table(f"4b. Usable window, {label}: effective input {budget.effective_input:,}, trigger "
              f"{budget.trigger_tokens(policy):,}. Per cell, as shares of the effective input by the real count: "
              f"median size of the request at the first trigger | largest request sent before it, mean / min | "
              f"conversations that sent a request over the effective input / over the window", rows, headers)
        results[label] = cells
    return results


def report_usable(all_series: list[Series], reals: list[RealTokenizer], names: list[str], factors: tuple) -> None:
    """Per request: if the trigger fell exactly on this request, how much of the effective
    input would it hold by the real count (0.8 x real / figure). Free of step sizes; a
    figure over 1/0.8 of real compacts early, one under real eats into the margin."""
    policy, columns = ContextPolicy(), [t for t in reals if t.name != "cl100k"]
    rows = []
    for mode, base, factor, calibrate in window_modes(names, factors):
        cells = []
        for tokenizer in columns:
            shares = []
            for s in all_series:
                real = s.real[tokenizer.name]
                figures = (calibrated(s.estimates[base], real, factor) if calibrate
                           else scaled(s.estimates[base], factor))
                shares += [policy.context_ratio * r / f for f, r in zip(figures, real) if f > 0]
            cells.append(f"{sum(shares) / len(shares):.0%} / {quantile(shares, 0.05):.0%} / {max(shares):.0%}")
        rows.append((mode, *cells))
    table("4a. Usable share of the effective input at the trigger, per request (0.8 × real / figure): mean / p5 / "
          "max. Over 100% eats the safety margin; over 133% would overflow an 8,192 window (4,096 out, 1,024 "
          "margin), over 113% a 2,048 one (256 out, 205 margin)", rows, ("estimator", *(t.name for t in columns)))


def recommend(needed: dict[str, list[float]], reals: list[RealTokenizer], factors: tuple, windows: dict) -> None:
    """The factor that keeps o200k at or above the non-OpenAI real counts for 95% and 99%
    of requests, and what each candidate costs in window before the first count."""
    others = [t for t in reals if not t.openai]
    if not others:
        print("\n5. No non-OpenAI tokenizer installed (`make install-dev`): no safety factor can be measured.")
        return
    rows = []
    for factor in factors:
        cover = [sum(1 for x in needed[t.name] if x <= factor) / len(needed[t.name]) for t in others]
        label = next(iter(windows))
        shares = [windows[label][(f"o200k×{factor:g}, no usage", t.name)] for t in others]
        rows.append((f"o200k×{factor:g}", *(f"{c:.1%}" for c in cover), *(s.cell() for s in shares)))
    table(f"5. Safety factor candidates: share of requests where o200k×f ≥ real; then, with no usage at all, "
          f"the window table's cell ({next(iter(windows))})", rows,
          ("factor", *(f"covers {t.name}" for t in others), *(f"window {t.name}" for t in others)))
    p95 = max(quantile(needed[t.name], 0.95) for t in others)
    p99 = max(quantile(needed[t.name], 0.99) for t in others)
    print(f"\nreal / o200k, worst non-OpenAI tokenizer: p95 {p95:.2f}, p99 {p99:.2f} -> a factor of "
          f"{math.ceil(p95 * 20) / 20:.2f} covers 95% and {math.ceil(p99 * 20) / 20:.2f} covers 99% of requests "
          f"for every tokenizer measured")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-steps", type=int, default=400, help="requests sampled per conversation at most")
    parser.add_argument("--factors", default=",".join(f"{f:g}" for f in DEFAULT_FACTORS))
    args = parser.parse_args()
    factors = tuple(float(f) for f in args.factors.split(","))
    if not CORPUS_DIR.is_dir():
        print(f"skipped: the corpus is not at {CORPUS_DIR} (set AGENTLOOM_CORPUS_DIR)")
        return
    reals, skipped = real_tokenizers()
    for line in skipped:
        print(line)
    estimators = base_estimators()
    names = list(estimators)
    if not reals:
        print("skipped: no real tokenizer could load")
        return
    started = time.perf_counter()
    all_series = [s for c in conversations(CORPUS_DIR) for s in [measure(c, estimators, reals, args.max_steps)]
                  if s.real[reals[0].name]]
    by_source: dict[str, list[Series]] = defaultdict(list)
    for s in all_series:
        by_source[s.source].append(s)
    print(f"\n{sum(len(s.real[reals[0].name]) for s in all_series):,} requests from {len(all_series)} conversations "
          f"in {time.perf_counter() - started:.0f} s; template count: {REPLY_PRIMING} + per message 4 + content "
          f"(+ per call 8 + name + arguments), tools as JSON")
    table("Corpus", [(source, str(len(group)), f"{sum(len(s.real[reals[0].name]) for s in group):,}",
                      f"{max(max(s.real['o200k'], default=0) for s in group) if 'o200k' in group[0].real else 0:,}",
                      str(sum(s.invalid for s in group)))
                     for source, group in sorted(by_source.items())],
          ("source", "conversations", "requests", "largest (o200k)", "not buildable"))
    print("\nreal tokenizers: " + "; ".join(f"{t.name} = {t.models}" for t in reals))
    report_errors(all_series, reals, names, factors if "o200k" in names else ())
    needed = report_factors(all_series, reals) if "o200k" in names else {}
    report_bytes_prior(all_series, reals)
    report_usable(all_series, reals, names, factors)
    windows = report_windows(all_series, reals, names, factors)
    if needed:
        recommend(needed, reals, factors, windows)


if __name__ == "__main__":
    main()
