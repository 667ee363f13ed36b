"""The continuity benchmark's tables and its goals (CTX-52, issue #47)."""
from __future__ import annotations

from collections import Counter
from typing import Any

from _django import table as _plain

MARKDOWN = False  # --markdown: the tables as docs/performance.md shows them


def table(title: str, rows: list[tuple[str, ...]], headers: tuple[str, ...]) -> None:
    if not MARKDOWN:
        _plain(title, rows, headers)
        return
    print(f"\n{title}\n\n| " + " | ".join(headers) + " |\n|" + "---|" * len(headers))
    for row in rows:
        print("| " + " | ".join(row) + " |")


def share(outcomes: list[Any], k: int, kinds: tuple[str, ...]) -> tuple[float | None, int]:
    """The share of the facts of ``kinds`` present after compaction ``k`` (1-based), and
    how many sessions reached it."""
    kept = total = reached = 0
    for outcome in outcomes:
        if len(outcome.present) < k:
            continue
        reached += 1
        for kind in kinds:
            got, of = outcome.present[k - 1].get(kind, (0, 0))
            kept, total = kept + got, total + of
    return (kept / total if total else None), reached


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def report(results: dict[tuple[str, str], list[Any]], compactions: int, configs: tuple[str, ...],
           kinds: tuple[str, ...], carried: tuple[str, ...]) -> None:
    on, off = configs
    summarizers = list(dict.fromkeys(s for s, _ in results))
    for summarizer in summarizers:
        rows = []
        for kind in kinds:
            cells = []
            for k in range(1, compactions + 1):
                a, _ = share(results[summarizer, on], k, (kind,))
                b, _ = share(results[summarizer, off], k, (kind,))
                cells.append(f"{_pct(a)} / {_pct(b)}")
            rows.append((kind, *cells))
        rows.append(("(sessions)", *(f"{share(results[summarizer, on], k, kinds)[1]} / "
                                     f"{share(results[summarizer, off], k, kinds)[1]}"
                                     for k in range(1, compactions + 1))))
        table(f"facts present in the request after compaction k, {summarizer} summarizer: {on} / {off}", rows,
              ("kind", *(f"after {k}" for k in range(1, compactions + 1))))
    _tokens(results, summarizers, configs, "every session", lambda o: True)
    _tokens(results, summarizers, configs, "the generated tool-heavy sessions", lambda o: o.source == "generated")
    goals(results, compactions, configs, kinds, carried)


def _tokens(results: dict[tuple[str, str], list[Any]], summarizers: list[str], configs: tuple[str, ...],
            label: str, keep: Any) -> None:
    """Tokens sent and read from the cache over the sessions ``keep`` selects, per tier choice."""
    off = configs[1]
    rows = []
    for summarizer in summarizers:
        base = [o for o in results[summarizer, off] if keep(o)]
        base_total = sum(o.sent + o.summary_sent for o in base)
        base_uncached = base_total - sum(o.cache_read for o in base)
        for config in configs:
            outcomes = [o for o in results[summarizer, config] if keep(o)]
            sent, summary = sum(o.sent for o in outcomes), sum(o.summary_sent for o in outcomes)
            total, cached = sent + summary, sum(o.cache_read for o in outcomes)
            done = sum((o.outcomes for o in outcomes), Counter())
            forms = sum((o.forms for o in outcomes), Counter())
            rows.append((summarizer, config, ", ".join(f"{n} {w}" for w, n in sorted(done.items())),
                         ", ".join(f"{n} {w}" for w, n in sorted(forms.items())) or "—",
                         str(sum(1 for o in outcomes if o.stopped)), str(sum(o.summary_calls for o in outcomes)),
                         f"{sent:,}", f"{summary:,}", f"{total:,} ({total / base_total:.2f}×)" if base_total else "—",
                         f"{cached:,} ({cached / total:.0%})" if total else "—",
                         f"{total - cached:,} ({(total - cached) / base_uncached:.2f}×)" if base_uncached else "—"))
    table(f"tokens sent over {label}, per tier choice (estimated; ratios against summary only)", rows,
          ("summarizer", "tier choice", "compactions", "metrics", "stopped", "summary calls", "action tokens",
           "summary tokens", "total", "cache read (share)", "not from cache"))


def goals(results: dict[tuple[str, str], list[Any]], compactions: int, configs: tuple[str, ...],
          kinds: tuple[str, ...], carried: tuple[str, ...]) -> None:
    on, off = configs
    print("\ngoals (issue #47)")
    for kind in carried:
        value, reached = share(results["junk", on], compactions, (kind,))
        verdict = "PASS" if value == 1.0 else "FAIL"
        print(f"  {verdict}  junk summarizer, after {compactions} compactions: {kind} present "
              f"{_pct(value)} (100% wanted; {reached} sessions reached it)")
    for kind in (k for k in kinds if k not in carried and "(" not in k):
        worse = []
        for k in range(1, compactions + 1):
            a, _ = share(results["faithful", on], k, (kind,))
            b, _ = share(results["faithful", off], k, (kind,))
            if a is None or (b is not None and a < b):
                worse.append(f"after {k}: {_pct(a)} < {_pct(b)}")
        print(f"  {'FAIL' if worse else 'PASS'}  faithful summarizer: {kind} at least summary-only's share "
              f"after every compaction{' (' + '; '.join(worse) + ')' if worse else ''}")
    heavy = {c: [o for o in results["faithful", c] if o.source == "generated"] for c in configs}
    sent = {c: sum(o.sent + o.summary_sent for o in heavy[c]) for c in configs}
    uncached = {c: sent[c] - sum(o.cache_read for o in heavy[c]) for c in configs}
    if sent[off]:
        saved = 1 - sent[on] / sent[off]
        print(f"  {'PASS' if saved >= 0.3 else 'FAIL'}  tool-heavy sessions (generated, faithful): tokens sent "
              f"{sent[on]:,} against {sent[off]:,} summary only, {saved:.0%} below (30% wanted; not from the "
              f"cache: {uncached[on]:,} against {uncached[off]:,}, {1 - uncached[on] / max(1, uncached[off]):.0%} "
              "below)")
    else:
        print("  FAIL  no tool-heavy session was measured")
