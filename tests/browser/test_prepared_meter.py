"""CTX-45 in the chat, in a real browser: the meter marks where a summary starts being
prepared, and says in words while one is being prepared in the background, when it is
ready, and no more once a compaction used it — from a working run's events, and for an
idle session from the session itself (on load, and while it waits for the worker).
"""
from __future__ import annotations

import threading

import pytest
from django.db import connections

from tests.browser.conftest import FAKE_KEY, LAST_RUN, ask, log_in, screenshot
from tests.fakes.summaries import is_summary
from tests.runloop.test_compaction import LONG, Provider
from tests.runloop.worker import wait_for
from web.transcript import COMPACTED_NOTICE

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]

PREPARING = "Preparing a summary of earlier messages in the background; you can go on meanwhile."
READY = ("A summary of earlier messages is ready in advance; it is used when summarizing is needed, "
         "if what it covers has not changed.")
QUESTION = LONG * 3  # a step smaller than the gap between the prepare point and the trigger
MAX_QUESTIONS = 15


@pytest.fixture
def session_4k(space, alice, fake_provider):
    """A session on a 4,000-token window counted with tiktoken, under the default policy
    (the prepare point halfway between target and trigger), so a few questions reach it."""
    from agents.services import agent_create, agent_publish
    from models_catalog.models import ModelConnection
    from sessions.models import Session

    connection = ModelConnection.objects.create(
        space=space, name="Small", provider="openai", base_url=fake_provider.base_url, api_key=FAKE_KEY,
        model="gpt-4o-mini", context_window=4_000, max_output_tokens=1_024)
    agent = agent_create(space=space, name="Analyst", model_connection=connection, instructions="Be brief.",
                         tools=[], created_by=alice)
    version = agent_publish(agent=agent, published_by=alice)
    return Session.objects.create(space=space, user=alice, agent=agent, version=version)


def _settled(number: int) -> str:
    return f"#transcript section.run:nth-of-type({number}):not([data-live])"


def _completed(session) -> int:
    from sessions.models import Run

    return Run.objects.filter(session=session, status=Run.Status.COMPLETED).count()


def _snapshots(session):
    from sessions.models import CompactionSnapshot

    return list(CompactionSnapshot.objects.filter(instance__run__session=session))


def test_the_meter_marks_the_prepare_point_between_target_and_trigger(page, server, session_4k):
    from agents.selectors import version_budget

    budget = version_budget(version=session_4k.version)
    log_in(page, server, next_path=f"/sessions/{session_4k.pk}/")
    marks = {name: page.locator(f"[data-mark={name}]") for name in ("target", "prepare", "trigger")}
    for mark in marks.values():
        expect(mark).to_be_visible()
    left = {name: mark.evaluate("m => m.getBoundingClientRect().left") for name, mark in marks.items()}
    assert left["target"] < left["prepare"] < left["trigger"]
    share = marks["prepare"].evaluate("m => parseFloat(m.style.left)")
    assert share == pytest.approx(100 * budget["prepare_tokens"] / budget["effective_input_tokens"], abs=0.01)
    expect(page.locator("#prepared-note")).to_be_hidden()
    assert page.script_errors == []


def test_an_idle_session_says_its_summary_is_being_prepared_then_that_it_is_ready(
        page, server, session_4k, fake_provider, dispatched_preparations):
    """The worker is this test: it prepares the queued summary after the runs ended, while
    the page waits; no event reaches a page when no run is active."""
    from runloop.preparation import compaction_prepare

    fake_provider.handler = Provider()
    log_in(page, server, next_path=f"/sessions/{session_4k.pk}/")
    note = page.locator("#prepared-note")
    for number in range(1, MAX_QUESTIONS + 1):
        ask(page, f"Question {number}. {QUESTION}")
        page.wait_for_selector(_settled(number), timeout=15_000)
        if dispatched_preparations:
            break
        expect(note).to_be_hidden()
    else:
        pytest.fail("the session never reached the prepare point")
    assert not _snapshots(session_4k)
    expect(note).to_have_text(PREPARING)
    expect(note).to_be_visible()

    assert compaction_prepare(prepared_id=dispatched_preparations.pop(0)) == "ready"
    expect(note).to_have_text(READY, timeout=20_000)  # the page asked the session again
    screenshot(page, "chat-summary-ready")
    page.reload()
    expect(page.locator("#prepared-note")).to_have_text(READY)
    assert page.script_errors == []


def test_a_working_run_says_when_its_summary_is_ready_and_the_compaction_that_uses_it_clears_it(
        page, server, session_4k, fake_provider):
    from runloop.preparation import compaction_prepare
    from sessions.services.dispatch import preparation_dispatcher_set

    asked, held, release, summarize = (threading.Event() for _ in range(4))
    hold_answer, answer_held, answer_released = (threading.Event() for _ in range(3))
    preparing: list[threading.Thread] = []

    def prepare(prepared_id: int) -> None:
        try:
            compaction_prepare(prepared_id=prepared_id)
        finally:
            connections.close_all()

    def dispatch(prepared_id: int) -> None:  # a worker takes the preparation at once
        asked.set()
        thread = threading.Thread(target=prepare, args=(prepared_id,), daemon=True)
        preparing.append(thread)
        thread.start()

    provider = Provider()

    def handler(request):
        if is_summary(request.json["messages"]):
            summarize.wait(timeout=60)  # the summary takes as long as the test needs
            return provider(request)
        if asked.is_set() and not release.is_set():
            held.set()  # the run works on while its summary is prepared
            release.wait(timeout=60)
        if hold_answer.is_set():
            answer_held.set()
            answer_released.wait(timeout=60)
        return provider(request)

    fake_provider.handler = handler
    preparation_dispatcher_set(dispatch)
    log_in(page, server, next_path=f"/sessions/{session_4k.pk}/")
    note = page.locator("#prepared-note")
    for number in range(1, MAX_QUESTIONS + 1):
        ask(page, f"Question {number}. {QUESTION}")
        wait_for(lambda asked_now=number: asked.is_set() or _completed(session_4k) >= asked_now)
        if asked.is_set():
            break
        page.wait_for_selector(_settled(number), timeout=15_000)
    else:
        pytest.fail("the session never reached the prepare point")
    expect(note).to_have_text(PREPARING)
    if not held.is_set():  # asked for at the end of the run: the next question's run works meanwhile
        page.wait_for_selector(_settled(number), timeout=15_000)
        number += 1
        ask(page, f"Question {number}. {LONG}")
    wait_for(held.is_set)
    summarize.set()
    expect(note).to_have_text(READY, timeout=15_000)
    expect(page.locator(f"{LAST_RUN}[data-live='1']")).to_have_count(1)  # said while the run works
    release.set()
    page.wait_for_selector(_settled(number), timeout=15_000)
    expect(note).to_have_text(READY)  # the run's end leaves it ready for the next question

    number += 1
    hold_answer.set()  # the answer after the compaction waits until the page is looked at
    ask(page, f"Question {number}. {LONG * 6}")  # crosses the trigger: the prepared summary is committed
    wait_for(answer_held.is_set)
    expect(page.locator(f"{LAST_RUN} .notice")).to_have_text(COMPACTED_NOTICE)  # the compacted event has come
    expect(note).to_be_hidden()
    expect(page.locator(f"{LAST_RUN}[data-live='1']")).to_have_count(1)
    answer_released.set()
    page.wait_for_selector(_settled(number), timeout=15_000)
    expect(note).to_be_hidden()
    [snapshot] = _snapshots(session_4k)
    assert snapshot.metrics["prepared"] is True
    for thread in preparing:
        thread.join(timeout=20)
    assert page.script_errors == []
