"""An empty answer and an answer cut at its output limit, as a person sees them in the chat
(issue 27): words that say what happened, and the one button that helps."""
from __future__ import annotations

import pytest

from context.adapters import CONTINUE_NOTE
from tests.browser.conftest import LAST_RUN, SETTLED, answer_text, ask, log_in, screenshot, words
from tests.fakes.fake_provider import chat_stream, sequence

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]


def test_an_empty_answer_says_so_and_ask_again_gets_an_answer(page, server, fake_session, fake_provider):
    session = fake_session()
    # LOOP-10: an empty answer is asked once more by itself; two in a row end the run.
    fake_provider.handler = sequence(chat_stream([]), chat_stream([]), chat_stream(["Paris."]))
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "What is the capital of France?")

    page.wait_for_selector(SETTLED, timeout=15_000)
    run = page.locator(LAST_RUN)
    expect(run.locator(".error-box .error-title")).to_have_text("The model returned an empty answer")
    expect(run.locator(".error-box .error-hint")).to_contain_text("Ask again to send the same question once more")
    assert run.locator(".bubble-assistant").count() == 0
    expect(page.locator("#chat-status")).to_have_text(
        "The model returned an empty answer — Ask again to send the question once more.")
    expect(run.get_by_role("button", name="Resume")).to_have_count(0)
    page.reload()  # the meter: an empty answer is an answer, not a request that failed
    expect(page.locator("#context-figures")).not_to_contain_text("failed")
    expect(page.locator(f"{LAST_RUN} .error-box .error-title")).to_have_text("The model returned an empty answer")
    screenshot(page, "chat-empty-answer")
    run = page.locator(LAST_RUN)

    run.get_by_role("button", name="Ask again").click()
    expect(page.locator(SETTLED)).to_contain_text("Paris.", timeout=15_000)
    expect(page.locator("#chat-status")).to_have_text("Answer complete.")
    expect(page.locator(LAST_RUN).get_by_role("button", name="Ask again")).to_have_count(0)
    first, again, asked = (request.json["messages"] for request in fake_provider.requests)
    assert again == first and asked == first  # the same question, once more each time
    assert page.script_errors == []


def test_a_cut_answer_says_at_how_many_tokens_and_continue_writes_the_rest_under_it(page, server, fake_session,
                                                                                   fake_provider):
    session = fake_session()
    # The provider counts the whole limit written (a short answer ended by length with no
    # count is the server's context filling, CAT-12, said differently).
    fake_provider.handler = sequence(chat_stream(words(6), finish_reason="length",
                                                 usage={"prompt_tokens": 60, "completion_tokens": 1_024}),
                                     chat_stream(["and ", "the rest."], delay=0.05))
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "Tell me everything.")

    page.wait_for_selector(SETTLED, timeout=15_000)
    cut = page.locator(LAST_RUN)
    expect(cut.locator(".note.cut-at-limit")).to_have_text(
        "The answer was cut at 1,024 tokens (this agent's output limit).")
    assert answer_text(page) == "".join(words(6)).strip()
    # Never "Answer complete." for an answer that is not.
    expect(page.locator("#chat-status")).to_have_text(
        "The answer stopped before its end (the note under it says why) — Continue to get the rest.")
    screenshot(page, "chat-cut-answer")

    cut.get_by_role("button", name="Continue").click()
    expect(page.locator("#transcript section.run")).to_have_count(2)
    expect(page.locator(SETTLED)).to_contain_text("and the rest.", timeout=15_000)
    continued = page.locator(LAST_RUN)
    expect(continued.locator(".notice").first).to_have_text("Continued from the answer above.")
    assert continued.locator(".msg-user").count() == 0  # nobody asked anything new
    expect(page.get_by_role("button", name="Continue")).to_have_count(0)
    sent = fake_provider.requests[-1].json["messages"]
    assert sent[-2] == {"role": "assistant", "content": "".join(words(6))}
    assert sent[-1] == {"role": "user", "content": CONTINUE_NOTE}

    page.reload()  # and the same after a reload
    expect(page.locator(f"{LAST_RUN} .notice").first).to_have_text("Continued from the answer above.")
    expect(page.get_by_role("button", name="Continue")).to_have_count(0)
    assert page.script_errors == []
