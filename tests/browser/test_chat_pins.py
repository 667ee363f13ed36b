"""CTX-50 in the browser: the first question shows as pinned (the goal), a person pins an
answer and unpins the goal from the keyboard, in words, and the pins API agrees."""
from __future__ import annotations

import pytest

from sessions.models import SessionMessage
from sessions.selectors.pins import pinned_seqs
from tests.browser.conftest import SETTLED, ask, log_in, screenshot
from tests.fakes.fake_provider import chat_stream, sequence

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]


def test_ctx50_the_goal_shows_pinned_and_a_person_pins_and_unpins_from_the_keyboard(page, server, fake_session,
                                                                                    fake_provider):
    session = fake_session()
    fake_provider.handler = sequence(chat_stream(["The code word is PAPAYA-7."]))
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "The goal: keep the margin above 12%.")
    page.wait_for_selector(SETTLED, timeout=15_000)
    expect(page.locator("#transcript .msg-user .pin-mark")).to_have_text("Pinned: the goal")
    question_pin = page.locator("#transcript .msg-user .pin-button")
    expect(question_pin).to_have_text("Unpin your message")
    answer = page.locator("#transcript .msg-assistant")
    answer_pin = answer.locator(".pin-button")
    expect(answer_pin).to_have_text("Pin this answer")

    answer_pin.focus()
    page.keyboard.press("Enter")
    expect(answer.locator(".pin-mark")).to_have_text("Pinned")
    expect(answer_pin).to_have_text("Unpin this answer")
    expect(page.locator("#chat-status")).to_contain_text("stays word for word")
    expect(answer).to_have_class("msg msg-assistant is-pinned")
    screenshot(page, "chat-pins")

    question_pin.focus()
    page.keyboard.press("Space")
    expect(question_pin).to_have_text("Pin your message")
    expect(page.locator("#transcript .msg-user .pin-mark")).to_be_hidden()
    answer_seq = SessionMessage.objects.get(session=session, kind="assistant").seq
    assert pinned_seqs(session_id=session.pk) == frozenset({answer_seq})
    page.reload()  # the state comes back from the pins, not from the page's kept HTML
    expect(page.locator("#transcript .msg-assistant .pin-mark")).to_have_text("Pinned")
    expect(page.locator("#transcript .msg-user .pin-button")).to_have_text("Pin your message")
    assert page.script_errors == []
