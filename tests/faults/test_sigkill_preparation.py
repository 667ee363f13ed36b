"""SIGKILL of a worker while it prepares a summary in the background (CTX-45): nothing
stays stuck — the lapsed lease ends the preparation, the next trigger compacts inline —
and nothing of it is half-applied: its summary never reaches a checkpoint or a view."""
from __future__ import annotations

import threading

import pytest
from celery import Celery
from django.utils import timezone

from context.compaction import SECTION_TITLES
from sessions.models import CompactionSnapshot, PreparedCompaction, SessionMessage
from sessions.services.dispatch import preparation_dispatcher_set
from tests.fakes.responses import chat_stream
from tests.fakes.summaries import is_summary
from tests.faults.support import FaultWorker
from tests.runloop.test_prepared_compaction import ASKED, LONG, SMALL, ask
from tests.runloop.worker import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]
SUMMARY = "<summary>\n" + "\n".join(f"{n}. {SECTION_TITLES[n - 1]}: noted." for n in range(1, 10)) + "\n</summary>"


def test_ctx45_a_worker_killed_while_preparing_leaves_nothing_stuck_and_nothing_half_applied(
        fake_session, strict, private_redis, tmp_path, settings):
    settings.AGENTLOOM_PREPARATION_LEASE_SECONDS = 2  # as the worker below reads it too
    arrived, release = threading.Event(), threading.Event()

    def handler(request):
        if is_summary(request.json["messages"]):
            arrived.set()
            release.wait(timeout=120)  # the worker is killed while it waits for this answer
        return chat_stream([SUMMARY if is_summary(request.json["messages"]) else "Noted. " + "Growth is steady. " * 6])

    strict.handler = handler
    sender = Celery("agentloom-preparation-sender", broker=private_redis.url, set_as_current=False)
    preparation_dispatcher_set(lambda prepared_id: sender.send_task("agentloom.compaction_prepare",
                                                                    args=[prepared_id]))
    session = fake_session(**SMALL)
    number = 1
    try:
        with FaultWorker(broker_url=private_redis.url, log_path=tmp_path / "worker.log",
                         env={"AGENTLOOM_PREPARATION_LEASE_SECONDS": "2"}) as worker:
            while not PreparedCompaction.objects.filter(session=session).exists():
                ask(session, f"{ASKED} {number}. {LONG}")
                number += 1
                assert number < 20, "the session never reached the prepare point"
            assert arrived.wait(timeout=60), worker.output()
            lost = PreparedCompaction.objects.get(session=session)
            assert lost.status == "preparing" and lost.claimed_at is not None
            worker.kill()
    finally:
        preparation_dispatcher_set(lambda prepared_id: None)
        sender.close()
        release.set()
    assert not CompactionSnapshot.objects.filter(instance__run__session=session).exists()
    wait_for(lambda: PreparedCompaction.objects.get(pk=lost.pk).lease_until < timezone.now(), timeout=30)

    # The next question crosses the trigger: the lost preparation is ended, the summary made now.
    run = ask(session, f"{ASKED} {number}. {LONG * 3}")
    lost.refresh_from_db()
    assert (lost.status, lost.reason, lost.summary) == ("discarded", "abandoned", "")
    [snapshot] = CompactionSnapshot.objects.filter(instance__run__session=session)
    assert snapshot.instance.run_id == run.pk and snapshot.metrics["prepared"] is False
    assert SessionMessage.objects.filter(session=session, kind="compaction_summary").count() == 1
    assert not PreparedCompaction.objects.filter(session=session, status__in=("preparing", "ready"),
                                                 created_at__lt=run.created_at).exists()
    assert strict.rejections == []
