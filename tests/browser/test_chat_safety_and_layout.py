"""The chat in a real browser: hostile markup stays inert, a phone-sized screen works,
the keyboard alone sends and stops, a compaction shows a quiet notice."""
from __future__ import annotations

import io
import re

import pytest

from tests.browser.conftest import (
    LAST_RUN,
    PASSWORD,
    SETTLED,
    STREAMING,
    answer_text,
    ask,
    log_in,
    screenshot,
    words,
)
from tests.fakes.fake_provider import chat_stream, sequence

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # WhiteNoise serves the static files with a synchronous iterator under ASGI (SPEC §1).
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]

HOSTILE = "<script>alert(1)</script> <img src=x onerror=alert(1)> [x](javascript:alert(1))"


def test_script_tags_onerror_images_and_javascript_links_render_inert(page, server, fake_session, fake_provider):
    session = fake_session()
    fake_provider.handler = sequence(chat_stream(["Look: ", HOSTILE, "\n\n```html\n<b>kept as code</b>\n```"]))
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, f"Repeat this: {HOSTILE}")
    page.wait_for_selector(SETTLED, timeout=15_000)

    run = page.locator(LAST_RUN)
    expect(run.locator(".bubble-user")).to_have_text(f"Repeat this: {HOSTILE}")  # the question, as typed
    answer = run.locator(".bubble-assistant")
    expect(answer).to_contain_text("<script>alert(1)</script>")  # shown as text…
    expect(answer).to_contain_text("<img src=x onerror=alert(1)>")
    assert page.locator("#transcript script").count() == 0  # …never as elements
    assert page.locator("#transcript img").count() == 0
    assert page.locator("#transcript [onerror]").count() == 0
    link = answer.get_by_text("x", exact=True)
    assert link.evaluate("node => node.tagName") == "A" and link.get_attribute("href") is None
    expect(answer.locator("pre code.language-html")).to_have_text("<b>kept as code</b>")
    link.click()
    page.reload()
    page.wait_for_selector(SETTLED)
    assert page.locator("#transcript script, #transcript img").count() == 0
    assert page.dialogs == []  # nothing ever ran
    assert page.script_errors == []


def test_the_chat_fits_a_phone_screen(page_factory, server, make_session, alice):
    session = make_session(alice)  # the conftest's agent runs on the offline demo model
    phone = page_factory(width=375, height=740, mobile=True)
    log_in(phone, server, next_path=f"/sessions/{session.pk}/")
    expect(phone.locator(".topbar .badge-demo")).to_be_visible()
    ask(phone, "What is 17*23?")
    phone.wait_for_selector(SETTLED, timeout=15_000)
    assert "391" in answer_text(phone)

    assert phone.evaluate("document.documentElement.scrollWidth") <= 375  # nothing wider than the screen
    composer = phone.locator("#composer").bounding_box()
    assert composer["x"] >= 0 and composer["x"] + composer["width"] <= 375
    assert composer["y"] + composer["height"] <= 740  # the question box stays on screen
    for button in (phone.get_by_role("button", name="Send"), phone.locator("#menu-toggle")):
        assert button.bounding_box()["height"] >= 40  # a finger can hit it
    screenshot(phone, "chat-phone")

    phone.get_by_role("button", name="Sessions").click()
    expect(phone.locator("#sidebar")).to_be_visible()
    expect(phone.get_by_role("button", name="Sessions")).to_have_attribute("aria-expanded", "true")
    screenshot(phone, "chat-phone-sessions")
    phone.keyboard.press("Escape")
    expect(phone.locator("#sidebar")).to_be_hidden()
    assert phone.script_errors == []


def test_the_keyboard_alone_logs_in_sends_a_question_and_stops_the_answer(page, server, fake_session, fake_provider):
    session = fake_session()
    fake_provider.handler = sequence(chat_stream(words(80), delay=0.06))
    page.goto(f"{server.url}/login/?next=/")
    expect(page.get_by_label("Username")).to_be_focused()
    page.keyboard.type("alice")
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{server.url}/")

    page.keyboard.press("Tab")  # the first stop on a page is the skip link, visibly focused
    skip = page.get_by_role("link", name="Skip to the content")
    expect(skip).to_be_focused()
    assert skip.evaluate("node => getComputedStyle(node).outlineStyle") != "none"
    assert skip.bounding_box()["y"] >= 0  # shown on screen while focused

    page.goto(f"{server.url}/sessions/{session.pk}/")
    question = page.locator("#question")  # its label changes while an answer runs
    expect(question).to_be_focused()  # ready to type on arrival
    page.keyboard.type("Tell me a long story")
    page.keyboard.press("Enter")
    expect(page.locator(STREAMING)).to_contain_text("word2 ")
    expect(page.get_by_label("Add to the running answer (supplement)")).to_be_focused()  # usable for a supplement

    page.keyboard.press("Escape")
    page.wait_for_selector(SETTLED, timeout=10_000)
    expect(page.locator(f"{LAST_RUN} .notice-stopped")).to_have_text("You stopped this answer.")
    expect(page.get_by_label("Your question")).to_be_focused()  # ready for the next question
    page.keyboard.press("Tab")
    expect(page.get_by_label("Attach")).to_be_focused()  # files for the question (RUN-13), then Send
    page.keyboard.press("Tab")
    send = page.get_by_role("button", name="Send")
    expect(send).to_be_focused()
    assert send.evaluate("node => getComputedStyle(node).outlineStyle") != "none"


def test_a_compaction_during_the_answer_shows_a_quiet_notice(page, server, fake_session, fake_provider):
    from sessions.models import Run
    from sessions.services.events import event_emit

    session = fake_session()
    fake_provider.handler = sequence(chat_stream(words(30), delay=0.06))
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "Go on")
    expect(page.locator(STREAMING)).to_contain_text("word1 ")
    run = Run.objects.get(session=session)
    event_emit(run_id=run.pk, type="compacted", data={"instance": "main"})  # as the loop will emit it

    notice = page.locator(f"{LAST_RUN} .notice", has_text="summarized")
    expect(notice).to_have_count(1)
    page.wait_for_selector(SETTLED, timeout=15_000)
    expect(notice).to_have_count(1)  # still there once the run is rendered from its records
    assert answer_text(page).replace(" ", "") == "".join(words(30)).replace(" ", "")


@pytest.mark.parametrize("width", [1200, 375])
def test_the_demo_badge_stays_inside_its_card_on_the_home_page(page_factory, server, monkeypatch, width):
    from django.core.management import call_command

    monkeypatch.delenv("DJANGO_SUPERUSER_USERNAME", raising=False)
    monkeypatch.delenv("DJANGO_SUPERUSER_PASSWORD", raising=False)
    printed = io.StringIO()
    call_command("bootstrap_demo", stdout=printed)
    username, password = re.search(r"username '([^']+)', password '([^']+)'", printed.getvalue()).groups()
    page = page_factory(width=width, height=800, mobile=width < 500)
    log_in(page, server, username, password)
    card = page.locator(".agent-card").filter(has=page.locator(".badge-demo"))
    expect(card).to_have_count(1)
    outer, badge = card.bounding_box(), card.locator(".badge-demo").bounding_box()
    assert outer["x"] <= badge["x"] and badge["x"] + badge["width"] <= outer["x"] + outer["width"] + 0.5
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
