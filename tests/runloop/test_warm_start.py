"""A process loads what its first requests and runs need as it starts (agentloom/warmup.py,
issue #29): its pool's standing connections, opened side by side; in a worker also the
modules a run imports, the model client's TLS context and the tokenizer.

The lifecycle cases run in a process of their own, as the servers do (what is loaded
stays loaded for the life of a process); the pool cases run on PostgreSQL in this one,
counting connections as the server counts them.
"""
from __future__ import annotations

import psycopg
import pytest
from django.db import connections

from core.db_pool import pool_fill, pool_options
from tests.browser.netdrop import DroppingProxy
from tests.runloop.test_collector import in_own_process
from tests.runloop.test_connection_pool import _connections_named, _server_dsn, pool_of
from tests.runloop.worker import wait_for

STANDING = 3  # AGENTLOOM_DB_POOL_MIN in the started processes

REPORT = """
    def report(**extra):
        import sys
        from django.db import connections
        from context.estimators import PROXY_ENCODING, _encodings
        from models_catalog.http import _tls_context

        pool = getattr(connections["default"], "pool", None)
        stats = pool.get_stats() if pool is not None and not pool.closed else {}
        return {"pool": pool is not None, "pool_available": stats.get("pool_available", 0),
                "modules": [name for name in ("runloop.loop", "jsonschema") if name in sys.modules],
                "tokenizer": PROXY_ENCODING in _encodings, "tls": _tls_context.cache_info().currsize, **extra}
"""

WEB = REPORT + """
    import asyncio, json
    from agentloom.asgi import application

    async def main():
        before = report()
        messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]

        async def receive():
            return messages.pop(0)

        async def send(message):
            pass

        await application({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
        print(json.dumps({"before": before, "after": report()}))

    asyncio.run(main())
"""

WORKER = REPORT + """
    import json
    import django
    django.setup()
    from celery import signals
    from celery.concurrency import prefork
    import agentloom.celery  # noqa: F401
    from runloop.housekeeping import worker_hooks_connect

    class Sender:  # the parts of Celery's worker (worker_init) and consumer (worker_ready) read
        concurrency = %(threads)d
        pool = prefork.TaskPool() if %(prefork)s else None

    worker_hooks_connect()
    # Everything the worker does as it starts, but the housekeeping thread (a database of its own).
    signals.worker_ready.disconnect(dispatch_uid="agentloom-housekeeping")
    signals.worker_init.send(sender=Sender())
    before = report()
    signals.%(signal)s.send(sender=Sender())
    print(json.dumps({"before": before, "after": report()}))
"""


def _run(code: str) -> dict:
    return in_own_process(code, AGENTLOOM_DB_POOL_MIN=str(STANDING))


NOTHING_LOADED = {"pool_available": 0, "modules": [], "tokenizer": False, "tls": 0}


@pytest.mark.django_db
def test_the_web_process_opens_its_standing_connections_when_the_server_starts_not_when_imported():
    seen = _run(WEB)
    assert {key: seen["before"][key] for key in NOTHING_LOADED} == NOTHING_LOADED
    if seen["after"]["pool"]:  # PostgreSQL; SQLite has no pool
        assert seen["after"]["pool_available"] == STANDING  # opened, idle, waiting for the first request
    # What only runs need is left to the workers.
    assert (seen["after"]["modules"], seen["after"]["tokenizer"], seen["after"]["tls"]) == ([], False, 0)


@pytest.mark.django_db
@pytest.mark.parametrize("signal", ["worker_ready", "worker_process_init"])
def test_a_worker_loads_what_a_run_needs_before_its_first_run(signal):
    """``worker_ready`` in the process that runs the threads pool's tasks; ``worker_process_init``
    in each child of a prefork pool."""
    seen = _run(WORKER % {"signal": signal, "threads": 5, "prefork": False})
    assert {key: seen["before"][key] for key in NOTHING_LOADED} == NOTHING_LOADED
    after = seen["after"]
    assert after["modules"] == ["runloop.loop", "jsonschema"]
    assert after["tokenizer"] is True and after["tls"] == 1
    if after["pool"]:
        assert after["pool_available"] == 5  # one standing connection for each thread, opened


@pytest.mark.django_db
def test_a_prefork_parent_runs_no_run_and_loads_nothing_for_one():
    seen = _run(WORKER % {"signal": "worker_ready", "threads": 5, "prefork": True})
    assert {key: seen["after"][key] for key in NOTHING_LOADED} == NOTHING_LOADED


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("require_postgres")
def test_a_filled_pool_holds_its_standing_connections_before_any_query():
    with pool_of(6, timeout=5, name="agentloom-test-standing", min_size=4):
        assert _connections_named("agentloom-test-standing") == 0
        assert pool_fill(timeout=30) is True
        assert _connections_named("agentloom-test-standing") == 4
        with connections["default"].cursor() as cursor:  # served from them: the pool did not grow
            cursor.execute("SELECT 1")
        assert _connections_named("agentloom-test-standing") == 4


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("require_postgres")
def test_a_database_that_is_not_there_at_start_costs_the_wait_then_serves_once_it_is():
    """The start gives up after its wait and leaves the pool filling (psycopg's own wait
    would close it, and take up to three connect time-outs more doing so): once the
    database answers, the first query is served from it."""
    connection = connections["default"]
    settings_dict = connection.settings_dict
    real_port = settings_dict.get("PORT")
    # A loopback relay to the database whose every connection is closed at once until plugged in.
    with DroppingProxy(int(real_port or 5432)) as late, pool_of(3, timeout=60, name="agentloom-test-late", min_size=2):
        late.unplug()
        settings_dict["PORT"] = late.port
        try:
            assert pool_fill(timeout=0.5) is False
            assert not connection.pool.closed  # still trying, in the background
            late.plug()
            with connection.cursor() as cursor:  # waits for the pool, as any first query would
                cursor.execute("SELECT 1")
                assert cursor.fetchone() == (1,)
        finally:
            connections.close_all()
            settings_dict["PORT"] = real_port


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("require_postgres")
def test_standing_connections_the_server_ended_are_replaced_not_handed_out():
    """A restart, a failover or the server's idle-session time-out ends every standing
    connection; the next requests must not each fail once on one of them."""
    name = "agentloom-test-ended"
    with pool_of(5, timeout=30, name=name, min_size=3):
        assert pool_fill(timeout=30) is True
        with psycopg.connect(_server_dsn(), autocommit=True) as admin:
            ended = admin.execute("SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                  "WHERE application_name = %s) AS t", [name]).fetchone()
        assert ended == (3,)
        wait_for(lambda: _connections_named(name) == 0)
        for _ in range(4):  # each borrow, given back after: the three ended ones are never handed out
            with connections["default"].cursor() as cursor:
                cursor.execute("SELECT 1")
                assert cursor.fetchone() == (1,)
            connections["default"].close()


def test_a_pool_keeps_at_least_one_and_never_more_standing_than_it_may_hold():
    assert pool_options(max_size=4, min_size=9, timeout=1, name="x")["min_size"] == 4
    assert pool_options(max_size=4, min_size=0, timeout=1, name="x")["min_size"] == 1
