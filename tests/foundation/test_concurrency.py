"""Concurrency on PostgreSQL: seq allocation and the one-active-run rule under real threads."""
from __future__ import annotations

import threading

import pytest
from django.db import close_old_connections, connection

from core.errors import ActiveRunConflict
from sessions.models import Run, SessionMessage
from sessions.services.records import record_append
from sessions.services.runs import run_create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]


def _in_threads(count: int, work) -> list:
    """Start ``count`` threads at once (a barrier), each with its own connection."""
    barrier = threading.Barrier(count)
    results: list = [None] * count

    def target(index: int) -> None:
        try:
            barrier.wait(timeout=10)
            results[index] = work(index)
        except Exception as exc:  # collected and asserted on by the test
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    close_old_connections()
    return results


def test_twenty_threads_appending_get_unique_gap_free_seqs(make_session, alice):
    session = make_session(alice)
    run = run_create(session=session)
    main = run.instances.get()

    def append(index: int):
        return record_append(session=session, run=run, instance=main, kind="supplement",
                             message={"role": "user", "content": f"note {index}"}, entry_key=f"s{index}")

    results = _in_threads(20, append)
    assert not [r for r in results if isinstance(r, Exception)]
    seqs = sorted(SessionMessage.objects.filter(session=session).values_list("seq", flat=True))
    assert seqs == list(range(1, 21))


def test_the_same_entry_key_from_many_threads_leaves_one_row(make_session, alice):
    session = make_session(alice)
    run = run_create(session=session)
    main = run.instances.get()

    def append(index: int):
        return record_append(session=session, run=run, instance=main, kind="assistant",
                             message={"role": "assistant", "content": "once"}, entry_key="step-1")

    results = _in_threads(8, append)
    assert not [r for r in results if isinstance(r, Exception)]
    assert sum(1 for r in results if r is not None) == 1
    assert SessionMessage.objects.filter(session=session).count() == 1


def test_run1_two_concurrent_questions_exactly_one_wins(make_session, alice):
    session = make_session(alice)
    results = _in_threads(2, lambda index: run_create(session=session))
    winners = [r for r in results if isinstance(r, Run)]
    losers = [r for r in results if isinstance(r, ActiveRunConflict)]
    assert len(winners) == 1 and len(losers) == 1, results
    assert Run.objects.filter(session=session).count() == 1
