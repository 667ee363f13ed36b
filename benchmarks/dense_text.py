"""Benchmark: dense text under the proxy for unknown tokenizers (CTX-24), old against new.

    .venv/bin/python benchmarks/dense_text.py [--repeat 5]

1. Error table: for every real tokenizer and class of dense text (the committed counts of
   ``tests/context/data/dense_counts.json``: CJK, Russian, digits, number tables, hex,
   base64, UUIDs, and the code-and-English control), the figure a budget reads before any
   provider count -- estimate times the proxy prior -- over the real count, for the old
   proxy (``tiktoken-o200k_base-v1``) and the new (``dense-o200k-v1``): the lowest
   sample (under 1.0 is an under-count; CTX-24 allows 0.90) and the mean.
2. Speed, both estimators in the same run on the same texts: each class repeated to about
   200 KB, a mixed chat of every class, and the code-and-English control alone; time per
   MB and the ratio new / old (the best of ``--repeat`` runs, so a busy machine's noise
   shows as little as it can). Not a timed test: nothing fails on speed.
3. The cost on ordinary work: every conversation of the shared corpus (tau-bench, Claude
   Code, the pi session, SWE-agent, ToolBench), its whole projected history estimated by
   both; new / old per conversation (p50, p95, max) per source. Skipped without the corpus.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from context.calibration import PROXY_PRIOR, calibrated  # noqa: E402
from context.estimators import dense_estimator, tiktoken_estimator  # noqa: E402

DATA = REPO / "tests" / "context" / "data" / "dense_counts.json"
CORPUS_DIR = REPO.parent / "shared" / "corpus"


def error_table(data: dict) -> str:
    old, new = tiktoken_estimator("o200k_base"), dense_estimator()
    ratios: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for sample in data["samples"]:
        figures = {"old": calibrated(old.text(sample["text"]), PROXY_PRIOR),
                   "new": calibrated(new.text(sample["text"]), PROXY_PRIOR)}
        for tokenizer, real in sample["counts"].items():
            for which, figure in figures.items():
                ratios[(sample["class"], tokenizer, which)].append(figure / real)
    tokenizers = data["tokenizers"]
    classes = list(dict.fromkeys(s["class"] for s in data["samples"]))
    lines = ["| class | " + " | ".join(tokenizers) + " |", "|---|" + "---|" * len(tokenizers)]
    for kind in classes:
        cells = []
        for tokenizer in tokenizers:
            o, n = ratios[(kind, tokenizer, "old")], ratios[(kind, tokenizer, "new")]
            cells.append(f"{min(o):.2f} → **{min(n):.2f}** ({sum(n) / len(n):.1f})")
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def speed(data: dict, repeat: int) -> str:
    old, new = tiktoken_estimator("o200k_base"), dense_estimator()
    by_class: dict[str, list[str]] = defaultdict(list)
    for sample in data["samples"]:
        by_class[sample["class"]].append(sample["text"])
    texts = {kind: "\n".join(parts) for kind, parts in by_class.items()}
    texts["mixed chat"] = "\n\n".join(texts.values())
    lines = ["| text | MB | old ms/MB | new ms/MB | new / old |", "|---|---|---|---|---|"]
    for kind, unit in texts.items():
        text = (unit + "\n") * max(1, 200_000 // len(unit.encode()))
        mb = len(text.encode()) / 1e6
        best = {}
        for name, estimator in (("old", old), ("new", new)):
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                estimator.text(text)
                times.append(time.perf_counter() - start)
            best[name] = min(times) * 1000 / mb
        lines.append(f"| {kind} | {mb:.2f} | {best['old']:.0f} | {best['new']:.0f} | {best['new'] / best['old']:.2f} |")
    return "\n".join(lines)


def corpus_cost() -> str:
    if not CORPUS_DIR.is_dir():
        return f"skipped: no corpus at {CORPUS_DIR}"
    from benchmarks._transcripts import conversations
    from context import project_records

    old, new = tiktoken_estimator("o200k_base"), dense_estimator()
    ratios: dict[str, list[float]] = defaultdict(list)
    for conversation in conversations(CORPUS_DIR):
        messages = [{"role": "system", "content": conversation.system},
                    *project_records(conversation.records, open_runs=set())]
        before = old.request(messages, conversation.tools)
        if before:
            ratios[conversation.source].append(new.request(messages, conversation.tools) / before)
    lines = ["| source | conversations | new / old p50 | p95 | max |", "|---|---|---|---|---|"]
    for source, values in sorted(ratios.items()):
        values.sort()
        p50, p95 = (values[min(len(values) - 1, int(q * len(values)))] for q in (0.5, 0.95))
        lines.append(f"| {source} | {len(values)} | {p50:.3f} | {p95:.3f} | {values[-1]:.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    data = json.loads(DATA.read_text(encoding="utf-8"))
    print("1. figure / real count before any provider count, lowest sample: old o200k proxy → "
          "**dense-o200k-v1** (mean of the new)\n")
    print(error_table(data))
    print("\n2. speed, the same texts in the same run (best of", args.repeat, "runs)\n")
    print(speed(data, args.repeat))
    print("\n3. the cost on ordinary work: whole conversations of the corpus, new estimate / old\n")
    print(corpus_cost())


if __name__ == "__main__":
    main()
