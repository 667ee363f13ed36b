"""The same session open in two tabs or on two devices of one person (docs/web.md, *Other
tabs and devices*): a run asked in A streams in B with Stop and the supplement box, Stop
in B stops it for A too, a question B sends meanwhile attaches B to the run instead of a
dead end and keeps the text, and B shows how the run ended — all without a reload.

The answers come from the fake provider, held after a few words until the test releases
them (``hold``), so nothing here leans on how fast a page or a worker is."""
from __future__ import annotations

import re
import threading

import pytest

from sessions.models import Run
from tests.browser.conftest import LAST_RUN, SETTLED, STREAMING, answer_text, ask, log_in, screenshot, words
from tests.fakes.fake_provider import chat_stream, sequence

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # WhiteNoise serves the static files with a synchronous iterator under ASGI (SPEC §1).
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]

SUPPLEMENT_BOX = "Add to the running answer (supplement)"


def open_session(page, server, session) -> None:
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    expect(page.get_by_label("Your question")).to_be_visible()


def test_a_run_asked_in_one_tab_streams_in_the_other_and_stop_there_stops_it_for_both(
        page_factory, server, fake_session, fake_provider):
    session = fake_session()
    held = threading.Event()  # the answer waits after a few words until B has pressed Stop
    fake_provider.handler = sequence(chat_stream(words(30), delay=0.06, hold=held, hold_after=8))
    tab_a, tab_b = page_factory(width=1280), page_factory(width=1280)  # two devices: two logins
    open_session(tab_a, server, session)
    open_session(tab_b, server, session)  # opened before the run starts

    ask(tab_a, "Count slowly, from tab A")
    expect(tab_a.locator(STREAMING)).to_contain_text("word3 ")
    # B learns of it by itself: the question, the words streaming live, Stop, the supplement box.
    expect(tab_b.locator(f"{LAST_RUN} .msg-user .bubble-user").first).to_have_text("Count slowly, from tab A")
    expect(tab_b.locator(STREAMING)).to_contain_text("word3 ")
    expect(tab_b.get_by_role("button", name="Stop")).to_be_visible()
    expect(tab_b.get_by_label(SUPPLEMENT_BOX)).to_be_visible()
    expect(tab_b.get_by_role("button", name="Send supplement")).to_be_visible()
    expect(tab_b.locator(".session-list a[aria-current=page] .session-name")).to_have_text("Count slowly, from tab A")
    screenshot(tab_b, "chat-tabs-following")

    with tab_b.expect_response(lambda response: response.url.endswith("/cancel")) as stopped:
        tab_b.get_by_role("button", name="Stop").click()
    assert stopped.value.ok
    held.set()

    for tab in (tab_a, tab_b):  # both show the same ending, and both can ask again
        tab.wait_for_selector(SETTLED, timeout=15_000)
        expect(tab.locator(f"{LAST_RUN} .notice-stopped")).to_have_text("You stopped this answer.")
        expect(tab.get_by_role("button", name="Stop")).to_be_hidden()
        expect(tab.get_by_label("Your question")).to_be_visible()
        assert answer_text(tab).startswith("word0 word1 word2") and "word29" not in answer_text(tab)
        assert tab.script_errors == []
    assert Run.objects.get(session=session).status == Run.Status.CANCELLED


def test_sending_from_the_other_tab_during_a_run_attaches_to_it_and_keeps_the_text(
        page_factory, server, fake_session, fake_provider):
    session = fake_session()
    held = threading.Event()  # the first answer waits until B's supplement was received
    fake_provider.handler = sequence(chat_stream(words(12), delay=0.06, hold=held, hold_after=8),
                                     chat_stream(["Noted: ", "in metres."]))
    tab_a = page_factory(width=1280)
    open_session(tab_a, server, session)
    tab_b = tab_a.context.new_page()  # two tabs of one browser: one login
    tab_b.script_errors = []
    tab_b.on("pageerror", lambda error: tab_b.script_errors.append(str(error)))
    tab_b.goto(f"{server.url}/sessions/{session.pk}/")
    expect(tab_b.get_by_label("Your question")).to_be_visible()

    # B's own check of the session has not come round yet (here: it fails, as on a flaky
    # network) until B sends: so B sends a question while A's run works.
    b_sent = threading.Event()
    tab_b.on("request", lambda request: b_sent.set() if request.url.endswith("/questions") else None)
    tab_b.route(re.compile(r".*/chat/sessions/\d+/state.*"),
                lambda route: route.continue_() if b_sent.is_set() else route.abort())

    ask(tab_a, "Measure the room")
    expect(tab_a.locator(STREAMING)).to_contain_text("word3 ")
    expect(tab_b.locator("#transcript section.run")).to_have_count(0)  # B has not learned of it

    with tab_b.expect_response(lambda response: response.url.endswith("/questions")) as refused:
        ask(tab_b, "Use metres, please.")
    assert refused.value.status == 409
    # Instead of a dead end: B follows the run, with the controls its message names.
    expect(tab_b.locator(STREAMING)).to_contain_text("word3 ")
    expect(tab_b.locator(f"{LAST_RUN} .msg-user .bubble-user").first).to_have_text("Measure the room")
    expect(tab_b.get_by_role("button", name="Stop")).to_be_visible()
    alert = tab_b.locator("#chat-alert")
    expect(alert).to_contain_text("already running in this session, asked from another tab or device")
    expect(alert).to_contain_text("Your text is still in the box: press Send supplement")
    expect(tab_b.get_by_role("button", name="Send supplement")).to_be_visible()
    expect(tab_b.get_by_label(SUPPLEMENT_BOX)).to_have_value("Use metres, please.")  # nothing typed is lost
    assert Run.objects.filter(session=session).count() == 1  # and nothing was asked twice

    tab_b.get_by_role("button", name="Send supplement").click()
    expect(tab_b.locator(f"{LAST_RUN} .msg-supplement .who")).to_have_text("You · supplement (received)")
    held.set()

    for tab in (tab_a, tab_b):
        tab.wait_for_selector(SETTLED, timeout=15_000)
        expect(tab.locator(f"{LAST_RUN} .msg-supplement .bubble")).to_have_text("Use metres, please.")
        assert "Noted: in metres." in answer_text(tab)
        expect(tab.locator("#chat-status")).to_have_text("Answer complete.")
        assert tab.script_errors == []
    expect(alert).to_be_hidden()  # its words named controls that are gone now
    expect(tab_b.get_by_label("Your question")).to_have_value("")
    sent = fake_provider.requests[-1].json["messages"]
    assert any(m["role"] == "user" and "metres" in str(m.get("content")) for m in sent)


def test_on_a_phone_the_other_device_follows_the_run_and_shows_how_it_ended(
        page_factory, server, fake_session, fake_provider):
    session = fake_session()
    held = threading.Event()
    fake_provider.handler = sequence(chat_stream(words(12), delay=0.06, hold=held, hold_after=8),
                                     chat_stream(["Second ", "answer."]))
    desk = page_factory(width=1280)
    phone = page_factory(width=390, height=844, mobile=True)
    open_session(desk, server, session)
    open_session(phone, server, session)

    ask(desk, "Count on the desk")
    expect(phone.locator(STREAMING)).to_contain_text("word3 ")
    stop = phone.get_by_role("button", name="Stop")
    expect(stop).to_be_visible()
    expect(phone.get_by_label(SUPPLEMENT_BOX)).to_be_visible()
    box = stop.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390 and box["y"] + box["height"] <= 844  # on screen
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(phone, "chat-tabs-phone-following")

    held.set()
    phone.wait_for_selector(SETTLED, timeout=15_000)
    assert answer_text(phone) == "".join(words(12)).strip()
    expect(phone.locator("#chat-status")).to_have_text("Answer complete.")
    expect(stop).to_be_hidden()
    expect(phone.get_by_label("Your question")).to_be_visible()

    # A later question from the desk shows on the phone too, answered, whether the phone
    # saw it working or only once it was over.
    desk.wait_for_selector(SETTLED, timeout=15_000)
    ask(desk, "And again")
    expect(phone.locator(f"{LAST_RUN} .msg-user .bubble-user").first).to_have_text("And again", timeout=15_000)
    expect(phone.locator(SETTLED)).to_contain_text("Second answer.", timeout=15_000)
    expect(phone.locator("#transcript section.run")).to_have_count(2)
    assert phone.script_errors == [] and desk.script_errors == []


def test_a_chat_gone_elsewhere_says_so_once_instead_of_asking_forever(page_factory, server, fake_session):
    from sessions.models import Session

    session = fake_session()
    tab = page_factory(width=1280)
    open_session(tab, server, session)
    states = []
    tab.on("request", lambda request: states.append(request.url) if "/state" in request.url else None)
    Session.objects.filter(pk=session.pk).delete()  # deleted from another tab or device

    expect(tab.locator("#chat-alert")).to_have_text(
        "This chat can no longer be opened here: it was deleted, or you are no longer a member of its space. "
        "Start a new chat from the list.", timeout=15_000)
    asked = len(states)
    # Shown again, the page would ask at once if it still asked; a request sent right after
    # that marks the point by which it would have.
    with tab.expect_request(lambda request: request.url.endswith("/healthz?barrier")):
        tab.evaluate("() => { document.dispatchEvent(new Event('visibilitychange')); fetch('/healthz?barrier'); }")
    assert len(states) == asked  # it stopped asking
    assert tab.script_errors == []
