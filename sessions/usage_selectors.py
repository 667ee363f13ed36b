"""Reads for the usage page of an agent version (SPEC §10): its runs, the tokens their model
calls used and why runs failed — aggregated in the database, so the page costs the same
few queries for ten runs or ten thousand, and the CSV reads runs a chunk at a time.

Token figures follow ``context.usage`` rule for rule (:class:`JsonCount` is the SQL twin
of ``usage_count``, ``_FIGURES_SQL`` and ``_SUMS_SQL`` of ``usage_figures``). A call whose
provider reported no usage (a local server that sends none, the demo model) but answered
counts our estimates instead, marked estimated: the request's as uncached input, the
answer's as output. So the totals equal the sum of :func:`call_usage` over the calls.
Only plain columns are read (usage, estimates, outcomes, statuses, error codes, times):
nothing decrypted.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import BigIntegerField, Case, Count, F, Func, Max, Min, QuerySet, Value, When
from django.db.models.fields.json import KT
from django.db.models.functions import Trunc
from django.utils import timezone

from context.usage import MAX_COUNT, UsageFigures, usage_figures
from sessions.models import ModelCall, Run

PURPOSES = tuple(ModelCall.Purpose.values)  # action, compaction, verification
FIGURES = ("input_uncached", "cache_read", "cache_written", "output")
BUCKET_KINDS = ("day", "week", "month")
MAX_BUCKETS = 62
# The outcomes of a call the provider answered (in full, cut at its output limit, stopped
# mid-answer, or with nothing in it): only those are billed, so only those are estimated.
ANSWERED = ("ok", "output_limit", "cancelled", "empty")
_KEY = re.compile(r"^[a-z_]+$")


class JsonCount(Func):
    """The whole number from 0 to ``MAX_COUNT`` at ``path`` of a JSON column, else NULL —
    ``context.usage.usage_count`` in SQL (SQLite and PostgreSQL). A provider's odd value
    (a string, a fraction, a negative) is absent, never an error that breaks the page."""

    output_field = BigIntegerField()

    def __init__(self, column: str, *path: str) -> None:
        if not path or not all(_KEY.match(key) for key in path):
            raise ValueError("JSON keys must be plain lower-case names")  # they are written into the SQL
        super().__init__(F(column))
        self.path = path

    def as_sqlite(self, compiler, connection, **extra: Any):
        column, params = compiler.compile(self.source_expressions[0])
        path = "'$." + ".".join(f'"{key}"' for key in self.path) + "'"
        sql = (f"(CASE WHEN json_type({column}, {path}) = 'integer' AND json_extract({column}, {path}) "
               f"BETWEEN 0 AND {MAX_COUNT} THEN json_extract({column}, {path}) END)")
        return sql, [*params, *params, *params]

    def as_postgresql(self, compiler, connection, **extra: Any):
        column, params = compiler.compile(self.source_expressions[0])
        path = "'{" + ",".join(self.path) + "}'"
        digits = len(str(MAX_COUNT))
        sql = (f"(CASE WHEN jsonb_typeof({column} #> {path}) = 'number' "
               f"AND ({column} #>> {path}) ~ '^[0-9]{{1,{digits}}}$' "
               f"THEN ({column} #>> {path})::bigint END)")
        return sql, [*params, *params, *params]

    def as_sql(self, compiler: Any, connection: Any, *args: Any, **extra: Any) -> Any:
        raise NotImplementedError(f"usage figures are read on SQLite and PostgreSQL, not {connection.vendor}")


# The usage fields each call's JSON is read for, once per call.
RAW_FIELDS = {
    "details_cached": ("prompt_tokens_details", "cached_tokens"),
    "cache_read": ("cache_read_input_tokens",),
    "cache_hit": ("prompt_cache_hit_tokens",),
    "cache_creation": ("cache_creation_input_tokens",),
    "prompt": ("prompt_tokens",),
    "input": ("input_tokens",),
    "completion": ("completion_tokens",),
    "output": ("output_tokens",),
}
# context.usage's rules over those columns (plain SQL, the same on SQLite and PostgreSQL).
_READ = "COALESCE(j_details_cached, j_cache_read, j_cache_hit, 0)"
_WRITTEN = "COALESCE(j_cache_creation, 0)"
_FIGURES_SQL = (f"{_READ} AS u_read, {_WRITTEN} AS u_written, "
                f"COALESCE(j_prompt, j_input + {_READ} + {_WRITTEN}) AS u_prompt, "
                "COALESCE(j_completion, j_output) AS u_out")
_UNREPORTED = "(u_prompt IS NULL AND u_out IS NULL)"
_ESTIMATED = f"({_UNREPORTED} AND e_answered = 1)"
_SUMS_SQL = (f"COUNT(*) AS calls, SUM(CASE WHEN {_UNREPORTED} THEN 1 ELSE 0 END) AS unreported, "
             f"SUM(CASE WHEN {_ESTIMATED} THEN 1 ELSE 0 END) AS estimated, "
             f"SUM(CASE WHEN {_ESTIMATED} THEN e_in "
             "WHEN u_prompt - u_read - u_written > 0 THEN u_prompt - u_read - u_written ELSE 0 END) "
             "AS input_uncached, SUM(u_read) AS cache_read, SUM(u_written) AS cache_written, "
             f"SUM(CASE WHEN {_ESTIMATED} THEN COALESCE(e_out, 0) ELSE COALESCE(u_out, 0) END) AS output")
_ESTIMATES = {"e_in": F("estimated_tokens"), "e_out": F("estimated_output_tokens"),
              "e_answered": Case(When(outcome__in=ANSWERED, then=Value(1)), default=Value(0))}


def call_usage(*, usage: Any, outcome: str, estimated_tokens: int,
               estimated_output_tokens: int | None) -> tuple[UsageFigures, str]:
    """One call's four figures and where they come from — the pure twin of the sums.

    ``provider``: the provider's usage, when it reported any. ``estimated``: it reported
    none but answered (``ANSWERED``), so our estimates count — the request's as uncached
    input, the answer's as output (none kept for calls logged before it was: 0). ``none``:
    no usage and no answer (a refused or failed call), nothing counted.
    """
    figures = usage_figures(usage)
    if figures.reported:
        return figures, "provider"
    if outcome in ANSWERED:
        return UsageFigures(input_uncached=estimated_tokens, output=estimated_output_tokens or 0), "estimated"
    return figures, "none"


def tokens_source(*, calls: int, unreported: int, estimated: int) -> str:
    """Where a sum's figures come from: ``provider``, ``estimated``, ``mixed``, or ``none``
    when no call counted anything."""
    reported = calls - unreported
    if estimated and reported:
        return "mixed"
    return "estimated" if estimated else "provider" if reported else "none"


def _summed(calls: QuerySet[ModelCall], **keys: Any) -> list[dict[str, Any]]:
    """``calls`` grouped by ``keys`` (name → field or expression), each group with its calls,
    the calls that reported no usage and the four sums.

    The JSON is read once per call in a derived table (the ORM writes it, so the filters
    and keys are the ORM's); the rules are applied and summed over its columns. Writing
    the rules as nested ORM expressions instead reads each field a dozen times per call.
    """
    inner = (calls.annotate(**{f"k_{name}": expr for name, expr in keys.items()},
                            **{f"j_{name}": JsonCount("usage", *path) for name, path in RAW_FIELDS.items()},
                            **_ESTIMATES)
             .values(*(f"k_{name}" for name in keys), *(f"j_{name}" for name in RAW_FIELDS), *_ESTIMATES)
             .order_by())
    sql, params = inner.query.sql_with_params()
    group = ", ".join(f"k_{name}" for name in keys)
    # A fence, so the planner does not fold the derived table back into the sums (which
    # would read each field again for every rule that uses it).
    fence = "OFFSET 0" if connection.vendor == "postgresql" else "LIMIT -1"
    query = (f"SELECT {group}, {_SUMS_SQL} FROM (SELECT {group}, {_FIGURES_SQL}, {', '.join(_ESTIMATES)} "
             f"FROM ({sql} {fence}) AS usage_json) AS usage_rows GROUP BY {group}")
    with connection.cursor() as cursor:
        cursor.execute(query, params)
        names = [column[0] for column in cursor.description]
        rows = [dict(zip(names, row)) for row in cursor.fetchall()]
    for row in rows:
        for name in ("calls", "unreported", "estimated", *FIGURES):
            row[name] = int(row[name] or 0)  # PostgreSQL sums bigints as numeric
    return rows


def _figures(row: dict[str, Any]) -> UsageFigures:
    return UsageFigures(**{name: row[name] for name in FIGURES}, reported=row["calls"] > row["unreported"])


def _moment(value: Any) -> datetime:
    """A period's start as the database returned it (SQLite: text in the current zone)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return timezone.make_aware(value) if timezone.is_naive(value) else value


@dataclass(frozen=True)
class UsageGroup:
    """The calls of one purpose and one model, in the completed runs or in the others."""

    completed: bool
    purpose: str
    provider: str
    model: str
    calls: int
    unreported: int  # calls whose provider reported no usage (cancelled, failed, or a silent server)
    estimated: int  # of those, the calls it answered: their figures are our estimates
    figures: UsageFigures


@dataclass(frozen=True)
class UsageCell:
    """The calls of one period, run status, purpose and model."""

    start: datetime
    status: str
    purpose: str
    provider: str
    model: str
    calls: int
    unreported: int
    estimated: int
    figures: UsageFigures


def version_usage_cells(*, version, kind: str) -> list[UsageCell]:
    """Every call of the version's runs, summed by the ``kind`` (day, week, month) its run
    was asked in, the run's status, the call's purpose and its model: at most a few
    thousand rows however many runs there are, one query."""
    if kind not in BUCKET_KINDS:
        raise ValueError(f"kind must be one of {BUCKET_KINDS}")
    rows = _summed(ModelCall.objects.filter(run__version=version), bucket=Trunc("run__created_at", kind),
                   status=F("run__status"), purpose=F("purpose"), provider=F("provider"), model=F("model"))
    return [UsageCell(start=_moment(row["k_bucket"]), status=row["k_status"], purpose=row["k_purpose"],
                      provider=row["k_provider"], model=row["k_model"], calls=row["calls"],
                      unreported=row["unreported"], estimated=row["estimated"], figures=_figures(row))
            for row in rows]


def usage_groups(*, cells: list[UsageCell]) -> list[UsageGroup]:
    """The cells summed by (run completed or not, purpose, provider, model)."""
    merged: dict[tuple[bool, str, str, str], UsageGroup] = {}
    for cell in cells:
        key = (cell.status == Run.Status.COMPLETED, cell.purpose, cell.provider, cell.model)
        old = merged.get(key)
        merged[key] = UsageGroup(*key, calls=cell.calls + (old.calls if old else 0),
                                 unreported=cell.unreported + (old.unreported if old else 0),
                                 estimated=cell.estimated + (old.estimated if old else 0),
                                 figures=cell.figures + old.figures if old else cell.figures)
    return [merged[key] for key in sorted(merged)]


def version_run_statuses(*, version) -> dict[str, int]:
    """How many of the version's runs are in each status (one query)."""
    rows = Run.objects.filter(version=version).values("status").annotate(n=Count("id")).order_by()
    return {row["status"]: row["n"] for row in rows}


def version_failure_reasons(*, version) -> list[tuple[str, str, int]]:
    """``(status, error code, runs)`` for the runs that did not complete and carry an error
    code (``Run.error["code"]``) — or none, counted as "" — most frequent first."""
    rows = (Run.objects.filter(version=version, status__in=[Run.Status.FAILED, Run.Status.CANCELLED,
                                                            Run.Status.INTERRUPTED])
            .values("status", code=KT("error__code")).annotate(n=Count("id")).order_by("-n", "status", "code"))
    return [(row["status"], row["code"] or "", row["n"]) for row in rows]


def version_run_span(*, version) -> tuple[datetime | None, datetime | None]:
    span = Run.objects.filter(version=version).aggregate(first=Min("created_at"), last=Max("created_at"))
    return span["first"], span["last"]


def bucket_kind(*, first: datetime | None, last: datetime | None) -> str:
    """Days for up to two months of runs, then weeks, then months: a chart of at most
    about sixty bars."""
    if first is None or last is None or (last - first).days < MAX_BUCKETS:
        return "day"
    return "week" if (last - first).days < MAX_BUCKETS * 7 else "month"


@dataclass
class Bucket:
    """One period of the chart (by the time the run was asked): runs by status, and the
    tokens of their calls by model (for cost)."""

    start: datetime
    runs: dict[str, int] = field(default_factory=dict)
    by_model: dict[tuple[str, str], UsageFigures] = field(default_factory=dict)
    calls: int = 0
    unreported: int = 0
    estimated: int = 0

    @property
    def figures(self) -> UsageFigures:
        total = UsageFigures()
        for figures in self.by_model.values():
            total = total + figures
        return total

    @property
    def tokens_source(self) -> str:
        return tokens_source(calls=self.calls, unreported=self.unreported, estimated=self.estimated)


def version_usage_over_time(*, version, kind: str, cells: list[UsageCell]) -> list[Bucket]:
    """The version's runs per ``kind`` (by status, one query) with the tokens of ``cells``
    (``version_usage_cells`` of the same kind) per model, oldest first."""
    buckets: dict[datetime, Bucket] = {}
    runs = (Run.objects.filter(version=version).annotate(bucket=Trunc("created_at", kind))
            .values("bucket", "status").annotate(n=Count("id")).order_by())
    for row in runs:
        buckets.setdefault(row["bucket"], Bucket(start=row["bucket"])).runs[row["status"]] = row["n"]
    for cell in cells:
        bucket = buckets.setdefault(cell.start, Bucket(start=cell.start))
        key = (cell.provider, cell.model)
        bucket.by_model[key] = bucket.by_model.get(key, UsageFigures()) + cell.figures
        bucket.calls += cell.calls
        bucket.unreported += cell.unreported
        bucket.estimated += cell.estimated
    return [buckets[start] for start in sorted(buckets)]


@dataclass(frozen=True)
class RunUsage:
    """One run for the CSV: its plain columns and its calls' figures by purpose and by model."""

    run_id: int
    session_id: int
    status: str
    error_code: str
    attempt: int
    created_at: datetime
    finished_at: datetime | None
    calls: dict[str, int]
    by_purpose: dict[str, UsageFigures]
    by_model: dict[tuple[str, str], UsageFigures]
    unreported: int = 0
    estimated: int = 0

    @property
    def tokens_source(self) -> str:
        return tokens_source(calls=sum(self.calls.values()), unreported=self.unreported, estimated=self.estimated)


RUNS_CHUNK = 500


def version_usage_runs(*, version, chunk: int = RUNS_CHUNK) -> Iterator[RunUsage]:
    """Every run of the version in id order with its usage, read ``chunk`` runs at a time
    (two queries per chunk, keyset on the run id: never a query per run)."""
    after = 0
    while True:
        runs = list(Run.objects.filter(version=version, pk__gt=after).order_by("pk")
                    .values("pk", "session_id", "status", "attempt", "created_at", "finished_at",
                            error_code=KT("error__code"))[:chunk])
        if not runs:
            return
        last = runs[-1]["pk"]
        calls: dict[int, list[dict[str, Any]]] = {}
        rows = _summed(ModelCall.objects.filter(run__version=version, run_id__gt=after, run_id__lte=last),
                       run=F("run_id"), purpose=F("purpose"), provider=F("provider"), model=F("model"))
        for row in rows:
            calls.setdefault(row["k_run"], []).append(row)
        for run in runs:
            counts = dict.fromkeys(PURPOSES, 0)
            by_purpose = {purpose: UsageFigures() for purpose in PURPOSES}
            by_model: dict[tuple[str, str], UsageFigures] = {}
            unreported = estimated = 0
            for row in calls.get(run["pk"], ()):
                unreported += row["unreported"]
                estimated += row["estimated"]
                figures = _figures(row)
                counts[row["k_purpose"]] = counts.get(row["k_purpose"], 0) + row["calls"]
                by_purpose[row["k_purpose"]] = by_purpose.get(row["k_purpose"], UsageFigures()) + figures
                key = (row["k_provider"], row["k_model"])
                by_model[key] = by_model.get(key, UsageFigures()) + figures
            yield RunUsage(run_id=run["pk"], session_id=run["session_id"], status=run["status"],
                           error_code=run["error_code"] or "", attempt=run["attempt"], created_at=run["created_at"],
                           finished_at=run["finished_at"], calls=counts, by_purpose=by_purpose, by_model=by_model,
                           unreported=unreported, estimated=estimated)
        after = last


# CAT-10: how many of a session's latest counted calls a truncation suspicion reads.
RECENT_COUNTS = 50


def session_largest_prompt_count(*, session_id: int) -> int | None:
    """The largest input count the model's server reported for the session's latest calls
    that it answered (any purpose), or None when it reported none: a server that truncates
    caps every count at its window (CAT-10). Read only when a count looks short."""
    rows = (ModelCall.objects.filter(run__session_id=session_id, usage__isnull=False)
            .exclude(outcome="truncated_prompt").order_by("-id").values_list("usage", flat=True)[:RECENT_COUNTS])
    counts: list[int] = []
    for usage in rows:
        count = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            counts.append(count)
    return max(counts) if counts else None
