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
    rows = []
    for summarizer in summarizers:
        base = sum(o.sent + o.summary_sent for o in results[summarizer, off])
        for config in configs:
            outcomes = results[summarizer, config]
            sent = sum(o.sent for o in outcomes)
            summary = sum(o.summary_sent for o in outcomes)
            cached = sum(o.cache_read for o in outcomes)
            done = sum((o.outcomes for o in outcomes), Counter())
            forms = sum((o.forms for o in outcomes), Counter())
            stopped = sum(1 for o in outcomes if o.stopped)
            rows.append((summarizer, config, ", ".join(f"{n} {w}" for w, n in sorted(done.items())),
                         ", ".join(f"{n} {w}" for w, n in sorted(forms.items())) or "—", str(stopped),
                         f"{sent:,}", f"{summary:,}", f"{(sent + summary) / base:.2f}×" if base else "—",
                         f"{cached:,}", f"{cached / (sent + summary):.0%}" if sent + summary else "—"))
    table("tokens over the sessions, per tier choice (estimated; cache read: prefix match against the previous "
          "action request)", rows, ("summarizer", "tiers", "compactions", "metrics", "stopped", "action tokens",
                                    "summary tokens", "total vs summary only", "cache read", "read share"))
    goals(results, compactions, configs, kinds, carried)


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
    if sent[off]:
        saved = 1 - sent[on] / sent[off]
        print(f"  {'PASS' if saved >= 0.3 else 'FAIL'}  tool-heavy sessions (generated, faithful): tokens sent "
              f"{sent[on]:,} against {sent[off]:,} summary only, {saved:.0%} below (30% wanted)")
    else:
        print("  FAIL  no tool-heavy session was measured")
