"""The offline demo model in a real browser, at its default pace: its answer streams slowly
enough that a person who sees it begin can press Stop, and Resume goes on from there — on
a desktop (1280 px) and a phone (390 px). Waits on what the page shows, never on time."""
from __future__ import annotations

import pytest

from tests.browser.conftest import LAST_RUN, SETTLED, STREAMING, answer_text, ask, log_in, screenshot

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]


@pytest.mark.parametrize("width", [1280, 390])
def test_a_person_stops_the_demos_answer_as_it_streams_and_resume_goes_on(page_factory, server, make_session,
                                                                          alice, settings, width):
    settings.AGENTLOOM_DEMO_WORD_SECONDS = settings.AGENTLOOM_DEMO_WORD_SECONDS_DEFAULT
    page = page_factory(width=width, height=850 if width > 500 else 844, mobile=width < 500)
    session = make_session(alice)
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    expect(page.locator(".demo-note")).to_contain_text("It writes slowly on purpose: press Stop while it writes.")

    ask(page, "Tell me about owls")
    expect(page.locator(STREAMING)).to_contain_text("(Offline demo model)")  # the answer has begun
    page.get_by_role("button", name="Stop").click()

    page.wait_for_selector(SETTLED)
    run = page.locator(LAST_RUN)
    expect(run.locator(".notice-stopped")).to_have_text("You stopped this answer.")
    partial = answer_text(page)
    assert partial.startswith("(Offline demo model)") and "for real answers." not in partial, partial
    screenshot(page, f"chat-demo-stopped-{width}")

    settings.AGENTLOOM_DEMO_WORD_SECONDS = 0  # the rest at once: the test waits for nothing more
    run.get_by_role("button", name="Resume").click()
    expect(page.locator(SETTLED)).to_contain_text("for real answers.")
    whole = " ".join(answer_text(page).split())
    assert whole.startswith(" ".join(partial.split())) and whole.count("(Offline demo model)") == 1, whole
    assert "You asked: “Tell me about owls”." in whole
