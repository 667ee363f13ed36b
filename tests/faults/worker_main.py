"""Entry point of the fault suite's worker process: the real Celery worker, plus hooks.

``python -m tests.faults.worker_main --concurrency=2`` with, in the environment:

- ``AGENTLOOM_FAULT_KILL_AT=<event type>[#n]``: SIGKILL this process right after the n-th
  event of that type is committed (a sink, the public extension point of LOOP-6);
- ``AGENTLOOM_FAULT_KILL_IN_TOOL=1``: the ``fault_probe`` tool kills the process after
  its side effect;
- ``AGENTLOOM_FAULT_KILL_BEFORE_CLAIM=1``: SIGKILL this process when a run task is
  delivered, before it claims the run (Celery's ``task_prerun``);
- ``AGENTLOOM_FAULT_KILL_ON_INSERT=<table>[:<value>][#n]``: SIGKILL this process when it
  sends the n-th INSERT into that table (whose parameters include ``value``), inside the transaction that
  would have stored the row, so the kill rolls it back (a Django ``execute_wrapper`` on every
  connection, the public extension point of the database layer);
- ``AGENTLOOM_FAULT_PROBE_FILE``: where ``fault_probe`` logs its executions;
- ``AGENTLOOM_FAULT_LOGLEVEL``: the worker's log level (default WARNING).

Only ever started by ``tests.faults.support.FaultWorker``.
"""
from __future__ import annotations

import os
import signal
import sys
import threading


def _killer(spec: str):
    event_type, _, nth = spec.partition("#")
    wanted = int(nth or 1)
    seen = {"count": 0}
    lock = threading.Lock()

    def sink(event) -> None:
        if event.type != event_type:
            return
        with lock:
            seen["count"] += 1
            if seen["count"] == wanted:
                os.kill(os.getpid(), signal.SIGKILL)

    return sink


def _insert_killer(spec: str):
    spec, _, nth = spec.partition("#")
    table, _, value = spec.partition(":")
    prefix = f'INSERT INTO "{table}"'
    wanted = int(nth or 1)
    seen = {"count": 0}
    lock = threading.Lock()

    def wrapper(execute, sql, params, many, context):
        if sql.startswith(prefix) and (not value or value in (params or ())):
            with lock:
                seen["count"] += 1
                if seen["count"] == wanted:
                    os.kill(os.getpid(), signal.SIGKILL)
        return execute(sql, params, many, context)

    def install(sender=None, connection=None, **kwargs) -> None:
        if wrapper not in connection.execute_wrappers:  # a wrapper reconnects: its hooks stay
            connection.execute_wrappers.append(wrapper)

    return install


def _kill_on_run_task(sender=None, **kwargs) -> None:
    if getattr(sender, "name", "") == "agentloom.run_execute":
        os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentloom.settings_test")
    import django

    django.setup()
    from agentloom.celery import app
    from sessions.services import events
    from tests.faults.probe import probe_install

    probe_install()
    kill_at = os.environ.get("AGENTLOOM_FAULT_KILL_AT")
    if kill_at:
        events.sinks.insert(0, _killer(kill_at))
    kill_on_insert = os.environ.get("AGENTLOOM_FAULT_KILL_ON_INSERT")
    if kill_on_insert:
        from django.db.backends.signals import connection_created

        connection_created.connect(_insert_killer(kill_on_insert), weak=False)
    if os.environ.get("AGENTLOOM_FAULT_KILL_BEFORE_CLAIM") == "1":
        from celery.signals import task_prerun

        task_prerun.connect(_kill_on_run_task, weak=False)
    app.worker_main(["worker", "--pool=threads", "--without-heartbeat", "--without-mingle", "--without-gossip",
                     f"--loglevel={os.environ.get('AGENTLOOM_FAULT_LOGLEVEL', 'WARNING')}", *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
