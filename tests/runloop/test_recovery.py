"""Nothing stays stuck (LOOP-1): Stop on orphaned runs, one reaper at a time, worker
heartbeats and the health they feed. In-process and on every database; the same paths
through real processes are in tests/faults/test_make_run_recovery.py and
tests/faults/test_worker_recovery.py."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from runloop.housekeeping import REAPER_LEASE, Housekeeper
from runloop.models import Lease, WorkerHeartbeat
from runloop.reaper import runs_interrupt_on_shutdown, runs_reap_interrupted
from runloop.workers import lease_take
from sessions.models import Run, RunEvent, SessionMessage
from sessions.services.questions import question_ask
from sessions.services.run_controls import run_resume
from sessions.services.runs import heartbeat_period, run_claim

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _short_stale_interval(settings):
    settings.AGENTLOOM_HEARTBEAT_STALE_SECONDS = 8  # beats every 2 s; two missed beats = 4 s


def _running(session, *, beat_seconds_ago: float) -> Run:
    """A run a worker claimed and last beat for ``beat_seconds_ago``."""
    run = question_ask(session=session, content="Hi")
    run_claim(run_id=run.pk)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=beat_seconds_ago))
    return Run.objects.get(pk=run.pk)


def _cancel(alice, run: Run) -> dict:
    client = APIClient()
    client.force_authenticate(alice)
    response = client.post(f"/api/v1/runs/{run.pk}/cancel")
    assert response.status_code == 202
    return response.json()


def test_stop_on_a_run_whose_worker_is_gone_ends_it_cancelled_and_resumable(fake_session, alice):
    run = _running(fake_session(), beat_seconds_ago=5)  # two beats missed, stale only at 8 s
    answer = _cancel(alice, run)
    assert answer["status"] == "cancelled"  # the chat shows "Stopped." at once
    finished = RunEvent.objects.get(run=run, type="run_finished")
    assert finished.payload["status"] == "cancelled"  # what an open event stream receives
    assert SessionMessage.objects.filter(run=run, kind="run_status").count() == 1
    run_resume(run=Run.objects.get(pk=run.pk))
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED


def test_stop_on_a_run_whose_worker_beats_leaves_it_to_the_worker(fake_session, alice):
    run = _running(fake_session(), beat_seconds_ago=1)
    answer = _cancel(alice, run)
    assert answer["status"] == "running" and answer["cancel_requested"] is True
    assert runs_reap_interrupted() == []  # alive: the loop ends it at its next safe point


def test_stop_on_a_run_whose_worker_dies_afterwards_is_ended_cancelled_by_the_reaper(fake_session, alice):
    run = _running(fake_session(), beat_seconds_ago=1)
    _cancel(alice, run)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=5))  # then it died
    assert runs_reap_interrupted() == [run.pk]  # well before the 8 s stale interval
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.error is None


def test_a_run_without_a_heartbeat_for_the_stale_interval_is_interrupted_and_resumable(fake_session):
    fresh = _running(fake_session(), beat_seconds_ago=7)
    stale = _running(fake_session(), beat_seconds_ago=9)
    assert runs_reap_interrupted() == [stale.pk]
    stale.refresh_from_db()
    assert stale.status == Run.Status.INTERRUPTED and stale.error["retryable"] is True
    assert Run.objects.get(pk=fresh.pk).status == Run.Status.RUNNING


def test_one_reaper_at_a_time_holds_the_lease_until_it_expires():
    assert lease_take(name=REAPER_LEASE, holder="host-a:1", seconds=30) is True
    assert lease_take(name=REAPER_LEASE, holder="host-b:2", seconds=30) is False
    assert lease_take(name=REAPER_LEASE, holder="host-a:1", seconds=30) is True  # renewed by its holder
    Lease.objects.filter(name=REAPER_LEASE).update(expires_at=timezone.now() - timedelta(seconds=1))  # holder died
    assert lease_take(name=REAPER_LEASE, holder="host-b:2", seconds=30) is True
    assert lease_take(name=REAPER_LEASE, holder="host-a:1", seconds=30) is False


def test_a_worker_reaps_when_it_starts_and_on_its_schedule_only_while_it_holds_the_lease(fake_session):
    lease_take(name=REAPER_LEASE, holder="elsewhere:9", seconds=60)  # another worker reaps on schedule
    starting = Housekeeper(name="here:1")
    first = _running(fake_session(), beat_seconds_ago=30)
    assert starting.tick(first=True) == [first.pk]  # at start, whoever holds the lease
    second = _running(fake_session(), beat_seconds_ago=30)
    assert starting.tick() == []  # on schedule, only the lease holder reaps
    Lease.objects.filter(name=REAPER_LEASE).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert starting.tick() == [second.pk]  # the holder is gone: this worker took over
    assert Lease.objects.get(name=REAPER_LEASE).holder == "here:1"


def test_a_worker_shutting_down_ends_only_the_attempts_it_executes(fake_session):
    mine = _running(fake_session(), beat_seconds_ago=0)
    stopped = _running(fake_session(), beat_seconds_ago=0)
    Run.objects.filter(pk=stopped.pk).update(cancel_requested=True)
    resumed_elsewhere = _running(fake_session(), beat_seconds_ago=0)
    Run.objects.filter(pk=resumed_elsewhere.pk).update(attempt=1)
    ended = runs_interrupt_on_shutdown(attempts={mine.pk: 0, stopped.pk: 0, resumed_elsewhere.pk: 0})
    assert sorted(ended) == sorted([mine.pk, stopped.pk])
    mine.refresh_from_db()
    assert mine.status == Run.Status.INTERRUPTED and "shut down" in mine.error["message"]
    assert Run.objects.get(pk=stopped.pk).status == Run.Status.CANCELLED  # Stop wins
    assert Run.objects.get(pk=resumed_elsewhere.pk).status == Run.Status.RUNNING


def test_healthz_answers_503_until_a_worker_beats_then_lists_it_and_503_again_once_it_is_silent(client,
                                                                                                admin_user):
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["worker"] == "none_seen" and response.json()["database"] == "ok"
    assert client.get("/admin/login/").status_code == 200  # the web keeps serving pages
    client.force_login(admin_user)  # the worker list is for operators

    Housekeeper(name="worker-host:4242").tick(first=True)
    body = client.get("/healthz").json()
    assert body["status"] == "ok" and body["worker"] == "ok"
    (worker,) = body["workers"]
    assert worker["name"] == "worker-host:4242" and worker["runs"] == 0
    assert 0 <= worker["heartbeat_age_seconds"] == body["worker_heartbeat_age_seconds"] < 2
    assert body["worker_stale_after_seconds"] == 8

    WorkerHeartbeat.objects.update(beat_at=timezone.now() - timedelta(seconds=9))
    response = client.get("/healthz")
    assert response.status_code == 503 and response.json()["workers"] == []


def test_a_working_run_beats_four_times_per_stale_interval(settings):
    from runloop.journal import RunWatch

    assert RunWatch(1).heartbeat_every == heartbeat_period() == 2.0
    settings.AGENTLOOM_HEARTBEAT_STALE_SECONDS = 120
    assert RunWatch(1).heartbeat_every == 5.0  # never more than 5 s apart
