"""The serving processes settle Python's garbage collector once start-up is over
(agentloom/collector.py, issue #29): start-up's objects frozen, young collections rarer.

Each case runs in a process of its own: freezing is for the life of a process, and the
suite's own process keeps the interpreter's defaults.
"""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap

import pytest
from django.db import connections

from agentloom.collector import YOUNG_THRESHOLD
from agentloom.launch import web_command
from tests.conftest import REPO
from tests.runloop.worker import test_database_url as database_url_of_tests

WEB = """
    import asyncio, gc, json
    from agentloom.asgi import application

    async def main():
        before = {"young": gc.get_threshold()[0], "frozen": gc.get_freeze_count()}
        messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
        sent = []

        async def receive():
            return messages.pop(0)

        async def send(message):
            sent.append(message["type"])

        await application({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
        after = {"young": gc.get_threshold()[0], "frozen": gc.get_freeze_count()}
        print(json.dumps({"before": before, "after": after, "sent": sent}))

    asyncio.run(main())
"""

WORKER = """
    import gc, json
    import django
    django.setup()
    from celery import signals
    import agentloom.celery  # noqa: F401
    from runloop.housekeeping import worker_hooks_connect

    worker_hooks_connect()
    # Everything the worker does when ready, but the housekeeping thread (it needs the database).
    signals.worker_ready.disconnect(dispatch_uid="agentloom-housekeeping")
    before = {"young": gc.get_threshold()[0], "frozen": gc.get_freeze_count()}
    signals.%s.send(sender=None)
    after = {"young": gc.get_threshold()[0], "frozen": gc.get_freeze_count()}
    print(json.dumps({"before": before, "after": after}))
"""


def in_own_process(code: str, **env: str) -> dict:
    """``code`` run in a process of its own, on this test's database (what a serving
    process opens as it starts, since issue #29's warm start, is this test's too); the
    JSON its last line prints."""
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentloom.settings_test", **env}
    if connections["default"].vendor == "postgresql":
        environment["DATABASE_URL"] = database_url_of_tests()
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=environment,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


DEFAULTS = {"young": gc.get_threshold()[0], "frozen": 0}  # the interpreter's, kept by this process


@pytest.mark.django_db
def test_the_web_process_settles_its_collector_when_the_server_starts_not_when_imported():
    seen = in_own_process(WEB)
    assert seen["sent"] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    # Importing the application (as the suite's in-process server does) changes nothing.
    assert seen["before"] == DEFAULTS != {"young": YOUNG_THRESHOLD, "frozen": 0}
    assert seen["after"]["young"] == YOUNG_THRESHOLD
    assert seen["after"]["frozen"] > 10_000  # Django and the apps, loaded before start-up ends


def test_the_shipped_web_commands_start_the_lifespan_that_settles_it():
    command = web_command(python="python", host="127.0.0.1", port=8000, trusted_proxies=[])
    assert command[command.index("--lifespan") + 1] == "on"
    for shipped in ("Dockerfile", "docker-compose.yml"):
        text = (REPO / shipped).read_text()
        assert '"--lifespan", "on"' in text and '"--lifespan", "off"' not in text, shipped


@pytest.mark.django_db
@pytest.mark.parametrize("signal", ["worker_ready", "worker_process_init"])
def test_a_worker_settles_its_collector_when_it_is_ready(signal):
    """``worker_ready`` in the process that runs the threads pool's tasks; ``worker_process_init``
    in each child of a prefork pool."""
    seen = in_own_process(WORKER % signal)
    assert seen["before"] == DEFAULTS
    assert seen["after"]["young"] == YOUNG_THRESHOLD
    assert seen["after"]["frozen"] > 10_000
