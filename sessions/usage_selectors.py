"""Reads for the usage page of an agent version (SPEC §10): its runs, the tokens their model
calls used and why runs failed — aggregated in the database, so the page costs the same
few queries for ten runs or ten thousand, and the CSV reads runs a chunk at a time.

Token figures follow ``context.usage`` rule for rule (:class:`JsonCount` is the SQL twin
of ``usage_count``), so the totals equal the sum of ``usage_figures`` over the calls.
Only plain columns are read (usage, statuses, error codes, times): nothing decrypted.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import BigIntegerField, Case, Count, F, Func, Max, Min, Q, QuerySet, Sum, Value, When
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce, Greatest, Trunc
from django.db.models.lookups import IsNull

from context.usage import MAX_COUNT, UsageFigures
from sessions.models import ModelCall, Run

PURPOSES = tuple(ModelCall.Purpose.values)  # action, compaction, verification
FIGURES = ("input_uncached", "cache_read", "cache_written", "output")
BUCKET_KINDS = ("day", "week", "month")
MAX_BUCKETS = 62
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
        sql = (f"(CASE WHEN jsonb_typeof({column} #> {path}) = 'number' AND ({column} #>> {path}) ~ '^[0-9]{{1,{digits}}}$' "
               f"THEN ({column} #>> {path})::bigint END)")
        return sql, [*params, *params, *params]

    def as_sql(self, compiler, connection, **extra: Any):
        raise NotImplementedError(f"usage figures are read on SQLite and PostgreSQL, not {connection.vendor}")


def _per_call(queryset: QuerySet[ModelCall]) -> QuerySet[ModelCall]:
    """Model calls with their four figures (and whether they reported usage) as aliases."""
    usage = "usage"
    zero = Value(0)
    return queryset.alias(
        u_read=Coalesce(JsonCount(usage, "prompt_tokens_details", "cached_tokens"),
                        JsonCount(usage, "cache_read_input_tokens"), JsonCount(usage, "prompt_cache_hit_tokens"), zero),
        u_written=Coalesce(JsonCount(usage, "cache_creation_input_tokens"), zero),
        u_prompt=Coalesce(JsonCount(usage, "prompt_tokens"), JsonCount(usage, "input_tokens") + F("u_read")
                          + F("u_written")),
        u_output_raw=Coalesce(JsonCount(usage, "completion_tokens"), JsonCount(usage, "output_tokens")),
        u_output=Coalesce(F("u_output_raw"), zero),
        u_uncached=Case(When(IsNull(F("u_prompt"), True), then=zero),
                        default=Greatest(F("u_prompt") - F("u_read") - F("u_written"), zero)),
    )


def _sums() -> dict[str, Any]:
    """The aggregates of one group: calls, calls without usage, and the four sums."""
    sums: dict[str, Any] = {"calls": Count("id"),
                            "unreported": Count("id", filter=Q(u_prompt__isnull=True, u_output_raw__isnull=True))}
    names = {"input_uncached": "u_uncached", "cache_read": "u_read", "cache_written": "u_written", "output": "u_output"}
    for name, alias in names.items():
        sums[name] = Coalesce(Sum(alias), Value(0))
    return sums


def _figures(row: dict[str, Any]) -> UsageFigures:
    return UsageFigures(**{name: int(row[name]) for name in FIGURES}, reported=row["calls"] > row["unreported"])


@dataclass(frozen=True)
class UsageGroup:
    """The calls of one purpose and one model, in the completed runs or in the others."""

    completed: bool
    purpose: str
    provider: str
    model: str
    calls: int
    unreported: int  # calls whose provider reported no usage (cancelled, failed, or a silent server)
    figures: UsageFigures


def version_usage_groups(*, version) -> list[UsageGroup]:
    """Every call of the version's runs, summed by (run completed or not, purpose, provider,
    model): a handful of rows however many runs there are (one query)."""
    rows = (_per_call(ModelCall.objects.filter(run__version=version))
            .values("run__status", "purpose", "provider", "model").annotate(**_sums())
            .order_by("run__status", "purpose", "provider", "model"))
    merged: dict[tuple[bool, str, str, str], UsageGroup] = {}
    for row in rows:
        key = (row["run__status"] == Run.Status.COMPLETED, row["purpose"], row["provider"], row["model"])
        group = UsageGroup(*key, calls=row["calls"], unreported=row["unreported"], figures=_figures(row))
        if key in merged:
            old = merged[key]
            group = UsageGroup(*key, calls=old.calls + group.calls, unreported=old.unreported + group.unreported,
                               figures=old.figures + group.figures)
        merged[key] = group
    return list(merged.values())


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


def bucket_kind(first: datetime | None, last: datetime | None) -> str:
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

    @property
    def figures(self) -> UsageFigures:
        total = UsageFigures()
        for figures in self.by_model.values():
            total = total + figures
        return total


def version_usage_over_time(*, version, kind: str) -> list[Bucket]:
    """The version's runs and tokens per ``kind`` (day, week, month) of the runs' start,
    oldest first (two queries)."""
    if kind not in BUCKET_KINDS:
        raise ValueError(f"kind must be one of {BUCKET_KINDS}")
    buckets: dict[datetime, Bucket] = {}
    runs = (Run.objects.filter(version=version).annotate(bucket=Trunc("created_at", kind))
            .values("bucket", "status").annotate(n=Count("id")).order_by())
    for row in runs:
        buckets.setdefault(row["bucket"], Bucket(start=row["bucket"])).runs[row["status"]] = row["n"]
    calls = (_per_call(ModelCall.objects.filter(run__version=version)).annotate(bucket=Trunc("run__created_at", kind))
             .values("bucket", "provider", "model").annotate(**_sums()).order_by())
    for row in calls:
        bucket = buckets.setdefault(row["bucket"], Bucket(start=row["bucket"]))
        key = (row["provider"], row["model"])
        bucket.by_model[key] = bucket.by_model.get(key, UsageFigures()) + _figures(row)
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
        rows = (_per_call(ModelCall.objects.filter(run__version=version, run_id__gt=after, run_id__lte=last))
                .values("run_id", "purpose", "provider", "model").annotate(**_sums()).order_by())
        for row in rows:
            calls.setdefault(row["run_id"], []).append(row)
        for run in runs:
            counts = dict.fromkeys(PURPOSES, 0)
            by_purpose = {purpose: UsageFigures() for purpose in PURPOSES}
            by_model: dict[tuple[str, str], UsageFigures] = {}
            for row in calls.get(run["pk"], ()):
                figures = _figures(row)
                counts[row["purpose"]] = counts.get(row["purpose"], 0) + row["calls"]
                by_purpose[row["purpose"]] = by_purpose.get(row["purpose"], UsageFigures()) + figures
                key = (row["provider"], row["model"])
                by_model[key] = by_model.get(key, UsageFigures()) + figures
            yield RunUsage(run_id=run["pk"], session_id=run["session_id"], status=run["status"],
                           error_code=run["error_code"] or "", attempt=run["attempt"], created_at=run["created_at"],
                           finished_at=run["finished_at"], calls=counts, by_purpose=by_purpose, by_model=by_model)
        after = last
