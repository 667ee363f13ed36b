"""Recovery with several workers on PostgreSQL + Redis (LOOP-1, RUN-6).

Real Celery worker processes (``FaultWorker``) on the test database and a private Redis,
with a 2 s stale interval: a 0.5 s heartbeat and reap period, and a 4 s visibility
timeout after which Redis delivers an unacknowledged task again.
"""
from __future__ import annotations

import json
import threading
import time

import pytest
import redis

from runloop.models import WorkerHeartbeat
from sessions.models import Run, RunEvent, SessionMessage
from sessions.services.dispatch import dispatcher_set
from sessions.services.questions import question_ask
from sessions.services.run_controls import run_resume
from tests.fakes.fake_provider import Hang, chat_stream
from tests.faults.support import FaultWorker, celery_dispatcher, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]

STALE = 2.0
PERIOD = STALE / 4
REDELIVERY = 2 * STALE
SLACK = 1.0  # scheduling and polling on a shared 2-core machine
WORKER_ENV = {"AGENTLOOM_HEARTBEAT_STALE_SECONDS": str(int(STALE))}


class Model:
    """A calculator call; once its result is in, silence until ``resumed`` — then the answer."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.resumed = threading.Event()

    def __call__(self, request):
        if not any(m["role"] == "tool" for m in request.json["messages"]):
            return chat_stream(tool_calls=[{"id": "calc-1", "name": "calculator",
                                            "arguments": json.dumps({"expression": "6*7"})}])
        if not self.resumed.is_set():
            self.arrived.set()
            return Hang(seconds=60)
        return chat_stream(["It is 42."])


@pytest.fixture
def broker(private_redis):
    dispatch, close = celery_dispatcher(private_redis.url)
    dispatcher_set(dispatch)
    yield private_redis
    dispatcher_set(lambda run_id: None)
    close()


def _status(run_id: int) -> str:
    return Run.objects.get(pk=run_id).status


def _workers_ready(count: int) -> None:
    wait_for(lambda: WorkerHeartbeat.objects.count() == count, timeout=60, what=f"{count} worker heartbeats")


def _broker_drained(url: str) -> None:
    """Every delivery acknowledged, nothing waiting: the redelivered task was consumed too."""
    client = redis.Redis.from_url(url)
    wait_for(lambda: client.hlen("unacked") == 0 and client.llen("celery") == 0, timeout=REDELIVERY + 15,
             interval=0.2, what="every task acknowledged")


def test_of_two_workers_one_killed_mid_answer_the_other_ends_the_run_and_completes_its_resume(
        fake_session, strict, broker, tmp_path):
    model = Model()
    strict.handler = model
    session = fake_session()
    with FaultWorker(broker_url=broker.url, log_path=tmp_path / "a.log", env=WORKER_ENV) as first, \
            FaultWorker(broker_url=broker.url, log_path=tmp_path / "b.log", env=WORKER_ENV) as second:
        _workers_ready(2)
        run = question_ask(session=session, content="Work through it")
        assert model.arrived.wait(timeout=30), first.output() + second.output()
        # Which one has it: its heartbeat row lists the run from its next beat on.
        wait_for(lambda: WorkerHeartbeat.objects.filter(runs__contains=[run.pk]).exists(), timeout=30,
                 what="the executing worker's heartbeat")
        executing = WorkerHeartbeat.objects.get(runs__contains=[run.pk])
        victim, survivor = (first, second) if executing.pid == first.process.pid else (second, first)
        victim.kill()
        killed = time.monotonic()
        wait_for(lambda: _status(run.pk) != Run.Status.RUNNING, timeout=30, interval=0.05, what="the run ended")
        took = time.monotonic() - killed
        run.refresh_from_db()
        assert run.status == Run.Status.INTERRUPTED and run.error["retryable"] is True
        # Not before the heartbeat went stale (a lower bound: load only makes it later); ended
        # by the survivor's reaper, which the wait above gives the time it needs.
        assert took >= STALE - PERIOD - SLACK, took

        model.resumed.set()
        run_resume(run=run)
        wait_for(lambda: _status(run.pk) in {"completed", "failed"}, timeout=30, what="the resumed run finished")
        assert _status(run.pk) == Run.Status.COMPLETED, Run.objects.get(pk=run.pk).error
        _broker_drained(broker.url)  # the killed worker's task came back after the visibility timeout
        assert survivor.process.poll() is None
    types = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("type", flat=True))
    assert types.count("run_started") == 2  # attempt 0, its resume; the redelivery claimed nothing
    assert types.count("tool_started") == 1  # RUN-6: the finished tool never ran again
    assert list(SessionMessage.objects.filter(run=run).order_by("seq").values_list("kind", "entry_key")) == [
        ("user", "question"), ("assistant", "assistant-1"), ("tool_result", "result-1-0"), ("run_status", "status-0"),
        ("run_status", "resumed-1"), ("assistant", "assistant-2"), ("run_status", "status-1")]
    assert strict.rejections == []


def test_a_task_whose_worker_died_before_claiming_its_run_is_delivered_again_and_answered(
        fake_session, strict, broker, tmp_path):
    strict.handler = lambda request: chat_stream(["Here it is."])
    session = fake_session()
    with FaultWorker(broker_url=broker.url, log_path=tmp_path / "a.log",
                     env={**WORKER_ENV, "AGENTLOOM_FAULT_KILL_BEFORE_CLAIM": "1"}) as doomed:
        run = question_ask(session=session, content="Hello?")
        assert doomed.died_by_sigkill(timeout=60), doomed.output()
        died = time.monotonic()
    assert _status(run.pk) == Run.Status.QUEUED  # received, never claimed: only a redelivery can save it
    with FaultWorker(broker_url=broker.url, log_path=tmp_path / "b.log", env=WORKER_ENV) as other:
        wait_for(lambda: _status(run.pk) != Run.Status.QUEUED, timeout=REDELIVERY + 30, what="the run claimed")
        took = time.monotonic() - died
        wait_for(lambda: _status(run.pk) in {"completed", "failed"}, timeout=30, what="the run answered")
        assert _status(run.pk) == Run.Status.COMPLETED, other.output()
    assert took <= 2 * REDELIVERY + 15, took  # delivered again once unacknowledged that long, not never
    assert RunEvent.objects.filter(run=run, type="run_started").count() == 1
