"""A person's first hour with the chat, in a real browser (issue #27): the meter follows an
answer as it streams and keeps the size of a request that failed; a supplement sits where
the model read it, live and after a reload; Stop says so once; one thing at a time per
session, said in words; tool arguments read as indented JSON, never as markup."""
from __future__ import annotations

import json
import re
import threading

import pytest

from tests.browser.conftest import LAST_RUN, SETTLED, STREAMING, ask, log_in, screenshot, words
from tests.fakes.fake_provider import chat_stream, error, sequence
from tests.faults.support import wait_for

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]

METER = "#context-meter"
FIGURES = "#context-figures"


def _meter_value(page) -> float:
    return float(page.eval_on_selector(METER, "m => m.value"))


def test_the_meter_grows_while_the_answer_streams_and_then_shows_the_servers_figure(page, server, fake_session,
                                                                                    fake_provider):
    session = fake_session()
    fake_provider.handler = sequence(chat_stream(words(60), delay=0.05))
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    assert _meter_value(page) == 0
    ask(page, "Talk for a while")
    expect(page.locator(STREAMING)).to_contain_text("word3 ")
    expect(page.locator(FIGURES)).to_contain_text("a rough count in the browser while the answer streams")
    first, label = _meter_value(page), page.inner_text(FIGURES)
    assert first > 0
    expect(page.locator(FIGURES)).not_to_have_text(label)  # it follows the text
    assert _meter_value(page) > first
    page.wait_for_selector(SETTLED, timeout=15_000)
    expect(page.locator(FIGURES)).not_to_contain_text("rough count")  # the server measured the step
    assert _meter_value(page) > first


def test_after_a_failed_question_the_meter_shows_the_size_of_the_request_that_failed(page, server, fake_session,
                                                                                      fake_provider):
    session = fake_session()
    fake_provider.handler = lambda request: error(401, "no", code="invalid_api_key")
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    question = "Please read this carefully. " * 500  # some 2,500 tokens
    ask(page, question)
    page.wait_for_selector(SETTLED, timeout=15_000)
    expect(page.locator(f"{LAST_RUN} .error-box")).to_be_visible()
    failed = re.compile(r"^about [\d,]+ of [\d,]+ tokens in the request that failed")
    expect(page.locator(FIGURES)).to_contain_text(failed)
    live = _meter_value(page)
    assert live > 2_000
    page.reload()
    expect(page.locator(FIGURES)).to_contain_text("in the request that failed")
    assert _meter_value(page) == live  # the same figure, live and reloaded
    screenshot(page, "chat-meter-failed-request")


def test_a_question_refused_before_its_page_came_shows_its_end_without_a_stream(page, server, fake_session,
                                                                               fake_provider):
    """On a busy server the run can fail before the browser fetches its part of the page;
    no stream then ends it, and the meter kept the browser's rough count (seen in CI). The
    fragment is held back here until the run is over, so the order is certain."""
    from sessions.models import Run

    session = fake_session()
    fake_provider.handler = lambda request: error(401, "no", code="invalid_api_key")
    log_in(page, server, next_path=f"/sessions/{session.pk}/")

    def after_the_run_ended(route):
        wait_for(lambda: Run.objects.filter(session=session, status=Run.Status.FAILED).exists())
        route.continue_()

    page.route("**/chat/runs/*/fragment", after_the_run_ended)
    ask(page, "Please read this carefully. " * 500)
    expect(page.locator(f"{LAST_RUN} .error-box")).to_be_visible(timeout=15_000)
    failed = re.compile(r"^about [\d,]+ of [\d,]+ tokens in the request that failed")
    expect(page.locator(FIGURES)).to_contain_text(failed)
    expect(page.locator(FIGURES)).not_to_contain_text("rough count")
    expect(page.locator("#chat-status")).to_have_text("The run failed — see the message above.")
    assert page.script_errors == []


def _kinds(page) -> list[str]:
    """The order of what the last run shows: q(uestion), s(upplement), a(nswer)."""
    return page.eval_on_selector_all(f"{LAST_RUN} .msg", """nodes => nodes.map(n =>
        n.classList.contains('msg-supplement') ? 's' : n.classList.contains('msg-user') ? 'q' : 'a')""")


def test_a_supplement_sits_after_the_answer_it_interrupted_live_and_after_a_reload(page, server, fake_session,
                                                                                  fake_provider):
    session = fake_session()
    second_started = threading.Event()
    # Each answer stops after a few words until the test has read what it reads meanwhile.
    first_held, second_held = threading.Event(), threading.Event()

    def handler(request):
        if any("metric units" in str(m.get("content")) for m in request.json["messages"]):
            second_started.set()
            return chat_stream(words(20), delay=0.05, hold=second_held, hold_after=8)
        return chat_stream(words(25), delay=0.05, hold=first_held, hold_after=8)

    fake_provider.handler = handler
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "Plan a trip")
    expect(page.locator(STREAMING)).to_contain_text("word1 ")
    page.get_by_label("Add to the running answer (supplement)").fill("Please use metric units.")
    page.get_by_role("button", name="Send supplement").click()
    expect(page.locator(f"{LAST_RUN} .msg-supplement .who")).to_have_text("You · supplement (received)")
    first_held.set()
    assert second_started.wait(15)
    expect(page.locator(f"{LAST_RUN}[data-live] .msg")).to_have_count(4)  # read while it streams
    live = _kinds(page)
    expect(page.locator(f"{LAST_RUN}[data-live]")).to_have_count(1)
    assert live == ["q", "a", "s", "a"], live  # the first answer, the supplement, the answer after it
    second_held.set()
    page.wait_for_selector(SETTLED, timeout=15_000)
    assert _kinds(page) == live
    page.reload()
    assert _kinds(page) == live


def test_a_reload_mid_answer_places_a_supplement_as_the_live_page_did(page, server, fake_session, fake_provider):
    session = fake_session()
    fake_provider.handler = sequence(chat_stream(words(25), delay=0.05), chat_stream(words(200), delay=0.05))
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "Plan a trip")
    expect(page.locator(STREAMING)).to_contain_text("word1 ")
    page.get_by_label("Add to the running answer (supplement)").fill("Please use metric units.")
    page.get_by_role("button", name="Send supplement").click()
    expect(page.locator(f"{LAST_RUN} .msg-supplement .who")).to_have_text("You · supplement (received)")
    expect(page.locator(f"{LAST_RUN} .msg")).to_have_count(4, timeout=15_000)
    page.reload()  # mid-answer: the page replays the run's events
    expect(page.locator(f"{LAST_RUN}[data-live] .msg")).to_have_count(4, timeout=15_000)
    assert _kinds(page) == ["q", "a", "s", "a"]
    expect(page.locator(f"{LAST_RUN}[data-live]")).to_have_count(1)  # read while it streams
    expect(page.locator(f"{LAST_RUN} .msg-supplement .bubble")).to_have_text("Please use metric units.")


def test_compact_now_and_a_question_take_turns_and_say_why_in_words(page, server, fake_session, fake_provider):
    from runloop.compaction_manual import compaction_manual
    from sessions.services.dispatch import compaction_dispatcher_set

    session = fake_session()
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    page.get_by_role("button", name="Compact now").click()
    expect(page.locator("#chat-alert")).to_have_text("There is nothing to summarize yet: ask a question first.")

    held = threading.Event()  # the first answer stops mid-way until Compact now was refused
    fake_provider.handler = sequence(chat_stream(words(12), delay=0.05, hold=held, hold_after=8),
                                     chat_stream(["Second answer."]))
    ask(page, "First question")
    expect(page.locator(STREAMING)).to_contain_text("word1 ")
    compact = page.get_by_role("button", name="Compact now")
    expect(compact).to_be_disabled()  # not offered while the agent answers, and says why
    expect(compact).to_have_accessible_description(re.compile("Not available while the agent is answering"))
    held.set()
    page.wait_for_selector(SETTLED, timeout=15_000)

    # The compaction's worker is busy for a while: the session waits for it.
    release = threading.Event()
    threads: list[threading.Thread] = []

    def busy_worker(run_id: int) -> None:
        def work() -> None:
            from django.db import connections

            release.wait(30)
            try:
                compaction_manual(run_id=run_id)
            finally:
                connections.close_all()

        threads.append(threading.Thread(target=work, daemon=True))
        threads[-1].start()

    compaction_dispatcher_set(busy_worker)
    try:
        page.get_by_role("button", name="Compact now").click()
        expect(page.locator("#chat-status")).to_have_text(re.compile("^Summarizing earlier messages…"))
        expect(page.get_by_role("button", name="Compact now")).to_be_disabled()
        ask(page, "Second question")
        expect(page.locator("#chat-alert")).to_contain_text(
            "Earlier messages are being summarized (Compact now). Wait until the summary is done")
        expect(page.get_by_label("Your question")).to_have_value("Second question")  # kept to send again
        screenshot(page, "chat-question-while-compacting")
        release.set()
        expect(page.locator("#chat-status")).to_have_text(
            re.compile("Earlier messages were summarized|Nothing needed summarizing|did not succeed"), timeout=15_000)
        page.get_by_role("button", name="Send").click()
        expect(page.locator(SETTLED)).to_contain_text("Second answer.", timeout=15_000)
    finally:
        release.set()
        for thread in threads:
            thread.join(timeout=20)


def test_tool_arguments_read_as_indented_json_and_never_as_markup(page, server, fake_session, fake_provider):
    session = fake_session()
    arguments = {"expression": "6*7", "note": "<img src=x onerror=window.__owned=1>"}
    held = threading.Event()  # the answer after the step stops until the step was read live
    fake_provider.handler = sequence(
        chat_stream(tool_calls=[{"id": "c1", "name": "calculator", "arguments": json.dumps(arguments)}]),
        chat_stream(words(20), delay=0.05, hold=held, hold_after=8))
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "What is 6*7?")
    expected = json.dumps(arguments, indent=2)
    step = page.locator(f"{LAST_RUN}[data-live] details.step").first
    step.locator("summary").click()
    expect(step.locator(".step-pre").first).to_have_text(expected)
    expect(page.locator(STREAMING)).to_be_visible()  # read live, while the answer after it streams
    held.set()
    page.wait_for_selector(SETTLED, timeout=20_000)
    for _ in range(2):
        step = page.locator(f"{LAST_RUN} details.step").first
        step.locator("summary").click()
        expect(step.locator(".step-pre").first).to_have_text(expected)
        assert page.locator(f"{LAST_RUN} .step img").count() == 0
        assert page.evaluate("window.__owned") is None
        page.reload()
    screenshot(page, "chat-tool-arguments")


LONG_NAME = "Demo assistant for the quarterly planning of the northern regional offices"


@pytest.mark.parametrize(("width", "height", "mobile"), [(1280, 850, False), (390, 844, True)])
def test_new_chat_shows_whole_agent_names_and_creates_the_session_only_with_the_first_question(
        page_factory, server, fake_session, fake_provider, width, height, mobile):
    from sessions.models import Session

    session = fake_session(name=LONG_NAME)
    Session.objects.filter(pk=session.pk).delete()  # the agent stays; no session yet
    fake_provider.handler = sequence(chat_stream(["Hello ", "there."]))
    page = page_factory(width=width, height=height, mobile=mobile)
    log_in(page, server)
    for _ in range(3):  # New chat, again and again: pages, not sessions
        if mobile:
            page.get_by_role("button", name="Sessions").click()
        link = page.get_by_role("link", name=f"New chat with {LONG_NAME}")
        expect(link).to_be_visible()
        # The whole name is shown: it wraps inside the sidebar, nothing is cut or hidden.
        fits = page.eval_on_selector(".new-chat-agent-name", """name => {
            const link = name.closest('a'), bar = name.closest('.sidebar').getBoundingClientRect();
            const box = name.getBoundingClientRect();
            return link.scrollWidth <= link.clientWidth && box.left >= bar.left && box.right <= bar.right + 0.5;
        }""")
        assert fits
        expect(page.locator(".new-chat-agent-name")).to_have_text(LONG_NAME)
        link.click()
        page.wait_for_url(re.compile(r"/sessions/new\?agent=\d+$"))
        expect(page.get_by_label("Your question")).to_be_visible()
    screenshot(page, f"chat-new-chat-{width}")
    assert Session.objects.count() == 0
    ask(page, "Hello?")
    page.wait_for_url(re.compile(r"/sessions/\d+/$"))
    expect(page.locator(SETTLED)).to_contain_text("Hello there.", timeout=15_000)
    created = Session.objects.get()
    assert page.url.endswith(f"/sessions/{created.pk}/") and created.title == "Hello?"
