"""Benchmark: history preparation with and without a reusable view; records API keyset pages.

    .venv/bin/python benchmarks/history.py [--records 100000] [--api-records 1000000]

(a) Preparing the context of a long session: starting from a view at N-100 versus
    re-projecting all N records (RUN-8; target ≥ 50× faster with the view).
(b) The records API on PostgreSQL: a page of 100 at the end versus at the start of a
    session with many records (keyset on (session, seq); target within 2×).
Ratios, not absolute times: both sides run in the same process on the same data.
"""
from __future__ import annotations

import argparse
import statistics
import time

from _django import setup, table


def _timed(fn, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def _fill(session, run, instance, count: int, *, start_seq: int = 1, batch: int = 5000) -> None:
    from sessions.models import Session, SessionMessage

    seq = start_seq
    while seq < start_seq + count:
        rows = []
        for _ in range(min(batch, start_seq + count - seq)):
            kind, message = (("user", {"role": "user", "content": f"question {seq}"}) if seq % 2 else
                             ("assistant", {"role": "assistant", "content": f"answer {seq} " + "x" * 80}))
            rows.append(SessionMessage(session=session, seq=seq, run=run, instance=instance, in_main=True, kind=kind,
                                       entry_key=f"bench-{seq}", message=message))
            seq += 1
        SessionMessage.objects.bulk_create(rows)
    Session.objects.filter(pk=session.pk).update(last_seq=seq - 1)
    session.last_seq = seq - 1


def _world():
    from django.contrib.auth import get_user_model

    from agents.services import agent_create, agent_publish
    from core.spaces.services import space_bootstrap_for_user
    from models_catalog.models import ModelConnection
    from sessions.models import Session

    user, _ = get_user_model().objects.get_or_create(username="bench")
    space = space_bootstrap_for_user(user=user)
    connection = ModelConnection.objects.create(space=space, name="demo", provider="demo", model="agentloom-demo")
    agent = agent_create(space=space, name="bench", model_connection=connection)
    version = agent_publish(agent=agent)
    return user, Session.objects.create(space=space, user=user, agent=agent, version=version)


def bench_views(records: int) -> None:
    from sessions.models import Instance, Run, SessionView
    from sessions.selectors.context import context_project

    user, session = _world()
    old = Run.objects.create(session=session, version=session.version, status=Run.Status.COMPLETED)
    old_main = Instance.objects.create(run=old, key="main")
    _fill(session, old, old_main, records)
    run = Run.objects.create(session=session, version=session.version, status=Run.Status.COMPLETED,
                             inherited_watermark=records)
    main = Instance.objects.create(run=run, key="main")
    without = _timed(lambda: context_project(run=run, instance=main), 3)
    SessionView.objects.create(session=session, watermark=records - 100,
                               messages=[{"role": "user", "content": "[summary of the first records]"}],
                               estimator_id="bytes-v1")
    with_view = _timed(lambda: context_project(run=run, instance=main), 20)
    a, b = statistics.median(without), statistics.median(with_view)
    table(f"(a) context preparation, {records:,}-record session", [
        ("no view (re-project all)", f"{a * 1000:,.1f}", "1.0×"),
        (f"view at {records - 100:,}", f"{b * 1000:,.2f}", f"{a / b:,.0f}× faster"),
    ], ("start", "median ms", "ratio"))


def bench_records_api(records: int, vendor: str) -> None:
    from rest_framework.test import APIClient

    from sessions.models import Instance, Run

    if vendor != "postgresql":
        print("\n(b) records API: skipped (needs PostgreSQL: set DATABASE_URL=postgres://…)")
        return
    user, session = _world()
    run = Run.objects.create(session=session, version=session.version, status=Run.Status.COMPLETED)
    main = Instance.objects.create(run=run, key="main")
    started = time.perf_counter()
    _fill(session, run, main, records, batch=20000)
    fill_seconds = time.perf_counter() - started
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE agent_sessions_sessionmessage")
    client = APIClient()
    client.force_authenticate(user)
    url = f"/api/v1/sessions/{session.pk}/messages"
    first = _timed(lambda: client.get(url, {"after": 0, "limit": 100}), 30)
    last = _timed(lambda: client.get(url, {"after": records - 100, "limit": 100}), 30)
    a, b = statistics.median(first), statistics.median(last)
    table(f"(b) records API, {records:,} records in one session (filled in {fill_seconds:,.0f} s)", [
        ("first page (after=0)", f"{a * 1000:,.2f}", "1.00"),
        (f"last page (after={records - 100:,})", f"{b * 1000:,.2f}", f"{b / a:,.2f}"),
    ], ("page of 100", "median ms", "ratio to first"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--api-records", type=int, default=1_000_000)
    args = parser.parse_args()
    vendor = setup()
    bench_views(args.records)
    bench_records_api(args.api_records, vendor)


if __name__ == "__main__":
    main()
