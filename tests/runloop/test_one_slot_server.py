"""Two people on a one-request model server both get their answers (CAT-11).

The server is the FAKE of llama-cpp-python's (``tests/fakes/one_slot.py``): a second
request ends the answer it is streaming with ``[DONE]`` and no finish reason. Alice's and
bob's runs are executed at once, each in a worker thread of its own, as two workers would;
the first answer is held after its first words until the other run is seen waiting — so
without the slot semaphore the second request certainly arrives mid-answer.
"""
from __future__ import annotations

import threading

import pytest
from django.db import connections

from agents.services import agent_create, agent_publish
from models_catalog.models import ModelConnection
from models_catalog.slots import slots_held
from runloop.loop import run_execute
from sessions.models import Run, RunEvent, Session
from sessions.services.questions import question_ask
from tests.fakes.one_slot import MODEL, OneSlotServer
from tests.runloop.worker import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def one_slot():
    with OneSlotServer() as server:
        yield server


def _session_on(server: OneSlotServer, space, person, *, concurrency: int | None, by) -> Session:
    connection = ModelConnection.objects.filter(base_url=server.base_url).first() or ModelConnection.objects.create(
        space=space, name="Local llama", provider="openai_compatible", base_url=server.base_url, model=MODEL,
        context_window=8192, max_output_tokens=512, concurrency=concurrency,
        concurrency_source="server_kind" if concurrency else "")
    agent = agent_create(space=space, name=f"Helper of {person.username}", model_connection=connection,
                         instructions="Be brief.", tools=[], created_by=by)
    return Session.objects.create(space=space, user=person, agent=agent,
                                  version=agent_publish(agent=agent, published_by=by))


def _execute(run_id: int) -> None:
    try:
        run_execute(run_id=run_id)
    finally:
        connections.close_all()


def _events(run: Run, kind: str) -> list[dict]:
    return [event.payload for event in RunEvent.objects.filter(run=run, type=kind).order_by("seq")]


def _ask_both(one_slot, space, alice, bob, *, concurrency: int | None) -> tuple[Run, Run]:
    runs = [question_ask(session=_session_on(one_slot, space, person, concurrency=concurrency, by=alice),
                         content=f"{person.username} asks for a short answer")
            for person in (alice, bob)]
    threads = [threading.Thread(target=_execute, args=(run.pk,)) for run in runs]
    for thread in threads:
        thread.start()
    try:
        # The held first answer is released once the other run waits for the server (or, with
        # no bound, once the second request cut it: then the wait below fails the test).
        wait_for(lambda: RunEvent.objects.filter(run__in=runs, type="model_waiting").exists()
                 or one_slot.interrupted, timeout=60)
    finally:
        one_slot.release.set()
        for thread in threads:
            thread.join(timeout=120)
    return Run.objects.get(pk=runs[0].pk), Run.objects.get(pk=runs[1].pk)


def test_two_people_asking_a_one_slot_server_at_once_both_get_whole_answers(one_slot, space, alice, bob):
    alices, bobs = _ask_both(one_slot, space, alice, bob, concurrency=1)

    assert (alices.status, bobs.status) == ("completed", "completed"), (alices.error, bobs.error)
    assert one_slot.interrupted == 0  # no answer was cut by the other person's request
    assert one_slot.most_at_once == 1  # the server never had two requests at once
    assert one_slot.completed == 2
    # One of them waited, and the chat was told so, then that the wait was over.
    waited = [run for run in (alices, bobs) if _events(run, "model_waiting")]
    assert len(waited) == 1
    assert _events(waited[0], "model_waiting") == [{"instance": "main", "purpose": "action", "concurrency": 1}]
    assert [sorted(payload) for payload in _events(waited[0], "model_waited")] == [["instance", "purpose",
                                                                                   "seconds"]]
    assert slots_held(one_slot.base_url) == 0  # every slot given back


def test_without_a_known_concurrency_the_second_request_cuts_the_first_answer(one_slot, space, alice, bob):
    """What the bound prevents, shown on the same fake: a connection whose concurrency is
    unknown (no bound) sends both at once, and the server cuts the first answer."""
    _ask_both(one_slot, space, alice, bob, concurrency=None)
    assert one_slot.most_at_once == 2
    assert one_slot.interrupted >= 1


def test_stop_while_waiting_for_the_server_ends_the_run_without_asking_it(one_slot, space, alice):
    from models_catalog.slots import slot_acquire
    from sessions.services.run_controls import run_cancel

    session = _session_on(one_slot, space, alice, concurrency=1, by=alice)
    busy = slot_acquire(base_url=one_slot.base_url, concurrency=1)  # another worker's call is streaming
    run = question_ask(session=session, content="alice asks while the server is busy")
    thread = threading.Thread(target=_execute, args=(run.pk,))
    thread.start()
    try:
        wait_for(lambda: RunEvent.objects.filter(run=run, type="model_waiting").exists(), timeout=60)
        run_cancel(run=Run.objects.get(pk=run.pk))
    finally:
        thread.join(timeout=60)
        assert busy is not None
        busy.release()
    assert Run.objects.get(pk=run.pk).status == "cancelled"
    assert one_slot.streams == 0 and one_slot.most_at_once == 0  # the server was never asked
