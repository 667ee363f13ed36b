"""Python's cyclic garbage collector, set for a process that serves (issue #29).

A web or worker process holds about 150,000 objects made at start-up (Django, the apps,
their models and URL patterns, the compiled tokenizer tables) and keeps them to the end.
With the interpreter's defaults every full collection walks all of them again, and the
youngest generation is collected every 700 allocations.

At start-up's end the survivors are frozen (moved to a generation no collection walks)
and the youngest generation is collected every ``YOUNG_THRESHOLD`` allocations: what a
question allocates is mostly freed by reference counting before then, so each collection
finds little and collections are 30 times rarer. Cycles made after start-up are still
collected; the frozen objects are the ones the process would keep anyway.

Applied by the processes that serve: the web process on the ASGI lifespan's start-up
(uvicorn sends it; the test suite's in-process server runs without a lifespan, so the
suite's own process keeps the defaults) and the worker when it is ready
(``runloop/housekeeping.py``).
"""
from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

from agentloom.warmup import web_warm

logger = logging.getLogger("agentloom.collector")

YOUNG_THRESHOLD = 20_000  # allocations between collections of the youngest generation (default 700)


def collector_settle() -> None:
    """Freeze what exists now and collect the youngest generation less often. Once per process."""
    gc.collect()  # garbage of start-up is freed, not frozen with the rest
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)


class SettleAtStartup:
    """ASGI wrapper: answers the lifespan protocol (Django's handler refuses it) and, when
    the server starts, loads what the first requests would (``agentloom/warmup.py``), then
    settles the collector; every other scope goes to ``app``."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await asyncio.to_thread(web_warm)  # before the collector: what it loads is kept for good
                try:
                    collector_settle()
                except Exception:  # noqa: BLE001 - a slower process still serves; never refuse to start over it
                    logger.warning("the garbage collector keeps its defaults", exc_info=True)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
