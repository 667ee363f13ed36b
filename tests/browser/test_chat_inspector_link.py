"""From a run in the chat to exactly what its model call received, for staff: one click on
the run's link opens its context inspector in the console (SPEC §10). People who are not
staff never see the link. At 1280 and 390 px."""
from __future__ import annotations

import pytest

from tests.browser.conftest import LAST_RUN, SETTLED, ask, log_in, screenshot
from tests.fakes.fake_provider import chat_stream, sequence

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]


@pytest.mark.parametrize("width", [1280, 390])
def test_staff_open_a_runs_model_request_in_one_click(page_factory, server, alice, fake_session, fake_provider,
                                                      width):
    alice.is_staff = alice.is_superuser = True  # an operator who also chats
    alice.save()
    session = fake_session()
    fake_provider.handler = sequence(chat_stream(["Forty-two."]))
    page = page_factory(width=width, height=850, mobile=width < 500)
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "What is six times seven, in words?")
    page.wait_for_selector(SETTLED, timeout=15_000)
    link = page.locator(f"{LAST_RUN} .run-foot a.run-inspector")
    expect(link).to_have_text("Inspect this run’s model requests")
    link.scroll_into_view_if_needed()
    box = link.bounding_box()
    assert 0 <= box["x"] and box["x"] + box["width"] <= width
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, f"chat-inspector-link-{width}")

    with page.context.expect_page() as opened:
        link.click()
    console = opened.value
    console.wait_for_load_state()
    expect(console.locator("h1")).to_contain_text("Context inspector")
    expect(console.locator("#content")).to_contain_text("What is six times seven, in words?")  # the request itself
    assert page.script_errors == []


def test_people_who_are_not_staff_see_no_link(page, server, fake_session, fake_provider):
    session = fake_session()
    fake_provider.handler = sequence(chat_stream(["Forty-two."]))
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "What is six times seven?")
    page.wait_for_selector(SETTLED, timeout=15_000)
    expect(page.locator(f"{LAST_RUN} .bubble-assistant")).to_contain_text("Forty-two.")
    expect(page.locator(".run-inspector")).to_have_count(0)
    page.reload()
    page.wait_for_selector(SETTLED)
    expect(page.locator(".run-inspector")).to_have_count(0)
    assert "/admin/" not in page.inner_html("#transcript")
