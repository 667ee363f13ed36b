"""The model server's slots, across workers (CAT-11, ``models_catalog.slots``).

Workers here are threads with database connections of their own, as the embedded
worker's are; every wait is on a condition (a waiter row, an event), never a sleep.
"""
from __future__ import annotations

import threading
import time

import pytest
from django.db import connections

from models_catalog.models import ModelSlotLease, ModelSlotWaiter
from models_catalog.slots import ACTION, BACKGROUND, ServerBusy, Waiting, server_key, slot_acquire, slots_held
from tests.runloop.worker import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
SERVER = "http://127.0.0.1:8080/v1"


def test_unknown_concurrency_is_no_bound_and_stores_nothing():
    assert slot_acquire(base_url=SERVER, concurrency=None) is None
    assert not ModelSlotLease.objects.exists()


def test_connections_with_other_paths_to_one_server_share_its_slots():
    assert server_key("http://LOCALHOST:8080/v1") == server_key("http://localhost:8080/") == "http://localhost:8080"
    assert server_key("https://example.org/v1") == "https://example.org:443"


def test_a_full_server_makes_a_call_wait_and_a_bounded_wait_gives_up_leaving_nothing_behind():
    held = slot_acquire(base_url=SERVER, concurrency=1)
    told = []
    with pytest.raises(ServerBusy):
        slot_acquire(base_url=SERVER, concurrency=1, max_wait=0.2, waiting=Waiting(on_wait=lambda: told.append(1)))
    assert told == [1]
    assert not ModelSlotWaiter.objects.exists()
    assert held is not None
    held.release()
    assert slot_acquire(base_url=SERVER, concurrency=1, max_wait=0) is not None


def test_the_slot_of_a_worker_that_died_holding_it_frees_itself_when_its_lease_expires():
    # A worker killed mid-call never releases nor renews: only the expiry frees the slot.
    dead = slot_acquire(base_url=SERVER, concurrency=1, lifetime=0.5)
    assert dead is not None and slots_held(SERVER) == 1
    started = time.monotonic()
    waits: list[float] = []
    lease = slot_acquire(base_url=SERVER, concurrency=1, max_wait=30,
                         waiting=Waiting(on_waited=waits.append))
    assert lease is not None and lease.holder != dead.holder
    assert len(waits) == 1 and time.monotonic() - started >= 0.4  # it did wait for the expiry
    assert slots_held(SERVER) == 1


def test_a_renewed_lease_is_kept_past_its_lifetime():
    lease = slot_acquire(base_url=SERVER, concurrency=1, lifetime=0.6)
    assert lease is not None
    deadline = time.monotonic() + 1.5
    for _ in lease.kept(iter(range(10**9))):  # an answer streaming for longer than the lease lives
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert ModelSlotLease.objects.filter(holder=lease.holder).exists()
    with pytest.raises(ServerBusy):
        slot_acquire(base_url=SERVER, concurrency=1, max_wait=0.1)


def _take(kind: str, order: list[str], took: threading.Event | None = None) -> None:
    try:
        lease = slot_acquire(base_url=SERVER, concurrency=1, kind=kind, max_wait=60)
        order.append(kind)
        if took is not None:
            took.set()
        assert lease is not None
        lease.release()
    finally:
        connections.close_all()


def test_a_background_summary_waiting_first_yields_the_slot_to_an_action_call():
    running = slot_acquire(base_url=SERVER, concurrency=1)
    assert running is not None
    order: list[str] = []
    background = threading.Thread(target=_take, args=(BACKGROUND, order))
    background.start()
    wait_for(lambda: ModelSlotWaiter.objects.filter(kind=BACKGROUND).exists(), timeout=30, interval=0.02)
    action = threading.Thread(target=_take, args=(ACTION, order))
    action.start()
    wait_for(lambda: ModelSlotWaiter.objects.filter(kind=ACTION).exists(), timeout=30, interval=0.02)
    running.release()
    for thread in (action, background):
        thread.join(timeout=60)
    assert order == [ACTION, BACKGROUND]


def test_workers_racing_for_two_slots_never_hold_three():
    holding = 0
    most = 0
    count = threading.Lock()
    order: list[str] = []

    def work() -> None:
        nonlocal holding, most
        try:
            lease = slot_acquire(base_url=SERVER, concurrency=2, max_wait=60)
            with count:
                holding += 1
                most = max(most, holding)
            time.sleep(0.05)
            with count:
                holding -= 1
            assert lease is not None
            lease.release()
            order.append("done")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert order == ["done"] * 6
    assert most <= 2
