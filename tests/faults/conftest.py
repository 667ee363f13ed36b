"""Fixtures of the fault suite (issue 9): the strict fake provider, a private Redis, the probe tool.

People come from tests/conftest.py; the provider fixtures are the run loop's own.
"""
from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest

from tests.fakes.fake_provider import chat_stream
from tests.faults.approvals import counting, pay_session, redis_dispatch  # noqa: F401
from tests.faults.probe import PROBE_FILE_ENV, probe_install, probe_uninstall
from tests.faults.support import RedisServer
from tests.runloop.conftest import extra_sink, fake, fake_agent_factory, fake_session, strict  # noqa: F401


@pytest.fixture(autouse=True)
def _fast_provider_limits(settings):
    """Time-outs and back-off short enough that a fault test takes a second, not minutes."""
    settings.AGENTLOOM_PROVIDER_READ_TIMEOUT = 0.4
    settings.AGENTLOOM_PROVIDER_ATTEMPTS = 3
    settings.AGENTLOOM_RETRY_BASE_DELAY = 0.01



@pytest.fixture
def private_redis(tmp_path) -> Iterator[RedisServer]:
    """A Redis of this test alone (never the machine's): free to kill and restart."""
    if shutil.which("redis-server") is None:
        pytest.skip("needs the redis-server binary (CI installs it)")
    with RedisServer(tmp_path) as server:
        yield server


@pytest.fixture
def probe(tmp_path, monkeypatch):
    """The ``fault_probe`` tool, registered here and in worker processes; returns its log path."""
    path = tmp_path / "probe.jsonl"
    monkeypatch.setenv(PROBE_FILE_ENV, str(path))
    monkeypatch.delenv("AGENTLOOM_FAULT_KILL_IN_TOOL", raising=False)
    probe_install()
    yield path
    probe_uninstall()


def calc(call_id: str, expression: str) -> dict:
    return {"id": call_id, "name": "calculator", "arguments": json.dumps({"expression": expression})}


@pytest.fixture
def session_with_history(fake_session, strict):
    """A session that already holds one finished question with a tool exchange.

    Fault tests then compare the records before and after the faulted run, so "nothing
    lost, nothing duplicated" is checked against real earlier history, not an empty list.
    """
    from runloop.loop import run_execute
    from sessions.services.questions import question_ask

    def make(**agent_options):
        session = fake_session(**agent_options)
        replies = iter([chat_stream(tool_calls=[calc("warm-1", "20+22")]), chat_stream(["Earlier answer: 42."])])
        strict.handler = lambda request: next(replies)
        run = question_ask(session=session, content="What is 20+22?")
        run_execute(run_id=run.pk)
        run.refresh_from_db()
        assert run.status == "completed", run.error
        strict.handler = lambda request: None
        return session

    return make
