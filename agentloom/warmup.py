"""What a process loads once as it starts, before its first request or run (issue #29).

A web process or worker that had just started served its first questions three to five
times slower than the next ones (50 users asking at once: first token after 2.4 s instead
of 0.6 s). Every one of the first runs waited on the same one-time work, one after
another or done again side by side: the database pool growing one connection at a time,
the tokenizer's vocabulary (~0.3 s of CPU), the TLS context's certificate bundle (built by
each thread that found it missing), modules imported on first use. Done here, as the
process starts, it is paid while nobody waits — and after a restart at nine in the
morning the first people to ask see the same first token as the rest.

Nothing here may stop a process from starting: whatever fails is logged and left to be
done on first use, as before.
"""
from __future__ import annotations

import importlib
import logging
import time

from core.db_pool import pool_fill

logger = logging.getLogger(__name__)

# When this process started, near enough: the web server imports this module as it starts
# (agentloom/collector.py), before the first request. ``/healthz`` reads it to tell a 503
# while the process is still warming up (no worker heartbeat yet) from a real failure.
STARTED = time.monotonic()

POOL_FILL_SECONDS = 5.0  # a database this slow to answer is left to the first query
# Imported on a run's first step, not at the worker's start (each to keep something light
# that imports it: the task module, the tool argument check).
RUN_MODULES = ("runloop.loop", "jsonschema", "jsonschema.exceptions")


def seconds_since_start() -> float:
    return time.monotonic() - STARTED


def warming_up() -> bool:
    """Whether this process started less than ``AGENTLOOM_WARMUP_SECONDS`` ago: a worker
    started beside it may not have written its first heartbeat yet."""
    from django.conf import settings

    return seconds_since_start() < settings.AGENTLOOM_WARMUP_SECONDS


def web_warm() -> None:
    """The web process: its pool's standing connections."""
    _pool_fill()


def worker_warm() -> None:
    """A process that runs runs: its pool's connections (one per thread), what every
    model call loads, the tokenizer the estimates count with."""
    _pool_fill()
    _step("the modules a run imports", _import_run_modules)
    _step("the model client's TLS context", _model_client)
    _step("the tokenizer", _tokenizer)


def _pool_fill() -> None:
    started = time.monotonic()
    try:
        filled = pool_fill(timeout=POOL_FILL_SECONDS)
    except Exception:  # noqa: BLE001 - the first query tries again; a process must start without this
        logger.warning("could not open the database pool at start; the first query opens it", exc_info=True)
        return
    if not filled:
        logger.warning("the database pool was not full after %.1f s; it goes on opening connections meanwhile",
                       time.monotonic() - started)


def _step(what: str, work) -> None:
    try:
        work()
    except Exception:  # noqa: BLE001 - done on first use instead
        logger.warning("could not load %s at start; the first run loads it", what, exc_info=True)


def _import_run_modules() -> None:
    for name in RUN_MODULES:
        importlib.import_module(name)


def _model_client() -> None:
    from models_catalog.http import build_client

    build_client().close()  # the transport's module and the process's one TLS context


def _tokenizer() -> None:
    from context.estimators import get_estimator

    get_estimator()  # the proxy vocabulary every model without its own tokenizer counts with
