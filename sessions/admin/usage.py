"""Usage and cost of an agent version (SPEC §10): its runs, the share completed, tokens per
completed run (uncached input, cache read, cache written, output; summary and
verification calls apart), why runs failed, a chart over time and a CSV of every run.

Cost comes from the admin-set ``ModelPrice`` of each model the calls used; a model
without a price shows tokens only. A call whose provider reported no usage counts our
estimates (``sessions.selectors.usage.call_usage``), and every row, bar and CSV line built on
them says so (``tokens_source``: provider, estimated, mixed). Figures only: nothing encrypted is shown, so the
page writes no access-audit row (docs/operators.md says why). The one encrypted column read,
``Run.memory``, is counted into an estimate of tokens and never shown (``memory_usage``).
"""
from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal

from django.contrib.admin import ModelAdmin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils import timezone
from django.utils.safestring import mark_safe

from context.usage import TokenPrices, UsageFigures, usage_cost
from models_catalog.selectors import model_prices
from sessions.admin.memory_usage import memory_cost, memory_tokens_beside
from sessions.admin.pages import object_or_404, render_page
from sessions.admin.usage_chart import UsageBar, usage_chart
from sessions.models import ModelCall, Run
from sessions.selectors.usage import (
    FIGURES,
    PURPOSES,
    RunUsage,
    UsageGroup,
    bucket_kind,
    tokens_source,
    usage_groups,
    version_failure_reasons,
    version_run_span,
    version_run_statuses,
    version_usage_cells,
    version_usage_over_time,
    version_usage_runs,
)

PURPOSE_LABELS = {"action": "Action calls", "compaction": "Summary calls", "verification": "Verification calls"}
ACTIVE = {Run.Status.QUEUED, Run.Status.RUNNING}
PERIOD_FORMATS = {"day": "%d %b", "week": "wk of %d %b", "month": "%b %Y"}

Prices = dict[tuple[str, str], TokenPrices | None]


@dataclass(frozen=True)
class Money:
    """Amounts by currency (a version whose models are priced in two currencies shows both)."""

    amounts: tuple[tuple[str, Decimal], ...]
    partial: bool  # some calls used a model without a price

    @property
    def text(self) -> str:
        return " + ".join(f"{amount:,.4f} {currency}" for currency, amount in self.amounts) or "0"

    @property
    def value(self) -> Decimal | None:
        """The exact amount, when there is one currency."""
        return self.amounts[0][1] if len(self.amounts) == 1 else None


def _prices(keys: Iterable[tuple[str, str]]) -> tuple[Prices, dict[tuple[str, str], str]]:
    """Each model's prices (None without), and the currency of the priced ones."""
    wanted = set(keys)
    found = model_prices(models=wanted)
    prices: Prices = {}
    currencies: dict[tuple[str, str], str] = {}
    for key in wanted:
        row = found.get(key)
        prices[key] = None if row is None else TokenPrices(
            input=row.input_per_million, output=row.output_per_million,
            cached_input=row.cached_input_per_million, cache_write=row.cache_write_per_million)
        if row is not None:
            currencies[key] = row.currency
    return prices, currencies


def _cost(parts: Iterable[tuple[tuple[str, str], UsageFigures]], prices: Prices,
          currencies: dict[tuple[str, str], str]) -> Money:
    amounts: dict[str, Decimal] = {}
    partial = False
    for key, figures in parts:
        price = prices.get(key)
        if price is None:
            partial = partial or figures.input_total + figures.output > 0  # provider's counts or our estimates
            continue
        amounts[currencies[key]] = amounts.get(currencies[key], Decimal(0)) + usage_cost(figures, price)
    return Money(amounts=tuple(sorted(amounts.items())), partial=partial)


@dataclass(frozen=True)
class TokenRow:
    """A line of a tokens table: calls and the four figures (averaged per run, or totals)."""

    key: str
    label: str
    calls: float
    unreported: int
    estimated: int  # calls whose figures are our estimates (the provider reported none)
    source: str  # provider, estimated, mixed or none (``sessions.selectors.usage.tokens_source``)
    input_uncached: float
    cache_read: float
    cache_written: float
    output: float
    cost: Money | None


def _row(key: str, label: str, groups: list[UsageGroup], *, per: int | None, prices: Prices | None,
         currencies: dict[tuple[str, str], str]) -> TokenRow:
    """Totals of ``groups``, or their average over ``per`` runs."""
    figures = UsageFigures()
    for group in groups:
        figures = figures + group.figures

    def scaled(value: int) -> float:
        return value / per if per else value

    cost = None
    if prices is not None:
        money = _cost((((g.provider, g.model), g.figures) for g in groups), prices, currencies)
        cost = money if not per else Money(amounts=tuple((c, a / per) for c, a in money.amounts), partial=money.partial)
    calls, unreported = sum(g.calls for g in groups), sum(g.unreported for g in groups)
    estimated = sum(g.estimated for g in groups)
    return TokenRow(key=key, label=label, calls=scaled(calls), unreported=unreported, estimated=estimated,
                    source=tokens_source(calls=calls, unreported=unreported, estimated=estimated),
                    **{name: scaled(getattr(figures, name)) for name in FIGURES}, cost=cost)


def usage_view(model_admin: ModelAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    """The usage page of one agent version: a few aggregate queries, however many runs."""
    version = _version(model_admin, request, object_id)
    statuses = version_run_statuses(version=version)
    total_runs = sum(statuses.values())
    completed = statuses.get(Run.Status.COMPLETED, 0)
    ended = total_runs - sum(statuses.get(s, 0) for s in ACTIVE)
    first, last = version_run_span(version=version)
    kind = bucket_kind(first=first, last=last)
    cells = version_usage_cells(version=version, kind=kind)
    groups = usage_groups(cells=cells)
    prices, currencies = _prices({(g.provider, g.model) for g in groups})
    priced = any(price is not None for price in prices.values())
    shown = prices if priced else None
    done = [g for g in groups if g.completed]
    per_run = [_row(p, PURPOSE_LABELS[p], [g for g in done if g.purpose == p], per=completed, prices=shown,
                    currencies=currencies) for p in PURPOSES]
    per_run.append(_row("all", "All calls", done, per=completed, prices=shown, currencies=currencies))
    totals = [_row("completed", f"Completed runs ({completed})", done, per=None, prices=shown, currencies=currencies),
              _row("other", f"Other runs ({total_runs - completed})", [g for g in groups if not g.completed],
                   per=None, prices=shown, currencies=currencies),
              _row("all", f"All runs ({total_runs})", groups, per=None, prices=shown, currencies=currencies)]
    buckets = version_usage_over_time(version=version, kind=kind, cells=cells)
    bars, periods = [], []
    for bucket in buckets:
        label = timezone.localtime(bucket.start).strftime(PERIOD_FORMATS[kind])
        figures = bucket.figures
        bars.append(UsageBar(label=label, runs=sum(bucket.runs.values()),
                             completed=bucket.runs.get(Run.Status.COMPLETED, 0), source=bucket.tokens_source,
                             **{name: getattr(figures, name) for name in FIGURES}))
        periods.append((bars[-1], _cost(bucket.by_model.items(), prices, currencies) if priced else None))
    context = {
        "version": version, "statuses": sorted(statuses.items(), key=lambda item: -item[1]), "total_runs": total_runs,
        "completed": completed, "ended": ended, "share_completed": completed / ended if ended else None,
        "per_run": per_run, "totals": totals, "priced": priced, "estimated": sum(g.estimated for g in groups),
        "unpriced": sorted(f"{p}: {m}" for (p, m), price in prices.items() if price is None),
        "failures": version_failure_reasons(version=version), "kind": kind, "periods": periods,
        "chart": mark_safe(usage_chart(bars)),  # every text escaped by usage_chart
        "memory": memory_cost(version=version),  # MEM-3: only the runs that carried memory
    }
    return render_page(model_admin, request, "version/usage.html", version, "Usage and cost", context)


def _version(model_admin: ModelAdmin, request: HttpRequest, object_id: str):
    """The version, for a staff user who may view it, its runs and their model calls."""
    version = object_or_404(model_admin, request, object_id, ModelCall)
    if not request.user.has_perm("agent_sessions.view_run"):
        raise PermissionDenied
    return version


CSV_HEADER = ["run", "session", "status", "error_code", "attempt", "created_at", "finished_at",
              *(f"{purpose}_{name}" for purpose in PURPOSES for name in ("calls", *FIGURES)),
              *(f"total_{name}" for name in FIGURES), "memory_tokens_estimated", "tokens_source", "cost", "currency"]


class _Echo:
    def write(self, value: str) -> str:
        return value


def _cell(value: object) -> object:
    """Text a spreadsheet would run as a formula is written as text."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def _csv_rows(runs: Iterable[tuple[RunUsage, int | None]]) -> Iterator[list[object]]:
    """One row per run; ``runs`` pairs each with its memory's tokens (None: no memory, MEM-3)."""
    prices: Prices = {}
    currencies: dict[tuple[str, str], str] = {}
    for run, memory_tokens in runs:
        missing = [key for key in run.by_model if key not in prices]
        if missing:  # a query only when a run uses a model not seen before
            found, found_currencies = _prices(missing)
            prices.update(found)
            currencies.update(found_currencies)
        total = UsageFigures()
        for figures in run.by_purpose.values():
            total = total + figures
        money = _cost(run.by_model.items(), prices, currencies)
        single = len(money.amounts) == 1 and not money.partial
        yield [run.run_id, run.session_id, run.status, run.error_code, run.attempt,
               run.created_at.isoformat(), run.finished_at.isoformat() if run.finished_at else "",
               *(value for purpose in PURPOSES for value in (
                   run.calls[purpose], *(getattr(run.by_purpose[purpose], name) for name in FIGURES))),
               *(getattr(total, name) for name in FIGURES), "" if memory_tokens is None else memory_tokens,
               run.tokens_source,
               f"{money.amounts[0][1]:.6f}" if single else "", money.amounts[0][0] if single else ""]


def usage_csv_view(model_admin: ModelAdmin, request: HttpRequest, object_id: str) -> StreamingHttpResponse:
    """One row per run of the version, streamed a chunk of runs at a time."""
    version = _version(model_admin, request, object_id)
    writer = csv.writer(_Echo())

    def lines() -> Iterator[str]:
        yield writer.writerow(CSV_HEADER)
        for row in _csv_rows(memory_tokens_beside(version_usage_runs(version=version), version=version)):
            yield writer.writerow([_cell(value) for value in row])  # every cell: a price's currency too

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="usage-agent-{version.agent_id}-v{version.version}.csv"'
    return response
