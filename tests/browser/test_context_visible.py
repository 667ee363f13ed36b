"""The context made visible in the chat, in a real browser: the meter (named, valued
against the effective input with trigger and target marked, updated as the run works),
"Compact now" and the marker that opens the summary, and the agent's plan beside the run.
"""
from __future__ import annotations

import json

import pytest

from tests.browser.conftest import FAKE_KEY, LAST_RUN, SETTLED, ask, log_in, screenshot
from tests.fakes.fake_provider import chat_stream
from tests.runloop.test_compaction import LONG, Provider

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]

PLAN = [{"step": "Find the quarterly figures", "status": "done"},
        {"step": "Compare the regions", "status": "in_progress"},
        {"step": "Write the answer", "status": "pending"}]


@pytest.fixture
def small_session(space, alice, fake_provider):
    """A session on a 4,000-token window counted with tiktoken (an OpenAI model id behind
    the fake endpoint), so a few long questions fill a visible share of it."""
    from agents.services import agent_create, agent_publish
    from models_catalog.models import ModelConnection
    from sessions.models import Session

    def make(*, tools=()):
        connection = ModelConnection.objects.create(
            space=space, name="Small", provider="openai", base_url=fake_provider.base_url, api_key=FAKE_KEY,
            model="gpt-4o-mini", context_window=4_000, max_output_tokens=1_024)
        agent = agent_create(space=space, name="Analyst", model_connection=connection, instructions="Be brief.",
                             tools=list(tools), created_by=alice, context_policy={"target_ratio": 0.2})
        version = agent_publish(agent=agent, published_by=alice)
        return Session.objects.create(space=space, user=alice, agent=agent, version=version)

    return make


def _meter(page):
    return page.get_by_role("meter", name="Context")


def _value(page) -> float:
    return _meter(page).evaluate("m => m.value")


def _latest_measured(session) -> dict:
    from sessions.models import RunEvent

    return RunEvent.objects.filter(run__session=session, type="context_measured").order_by("-run_id", "-seq")[0].payload


def test_the_meter_is_named_valued_marked_and_follows_each_step(page, server, small_session, fake_provider):
    from agents.selectors import version_budget

    session = small_session()
    budget = version_budget(version=session.version)
    fake_provider.handler = Provider()
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    meter = _meter(page)
    expect(meter).to_have_count(1)
    assert _value(page) == 0
    assert meter.evaluate("m => [m.max, m.low, m.high]") == [
        budget["effective_input_tokens"], budget["target_tokens"], budget["trigger_tokens"]]
    expect(page.locator("[data-mark=trigger]")).to_be_visible()
    expect(page.locator("[data-mark=target]")).to_be_visible()

    ask(page, f"Question 1. {LONG}")
    page.wait_for_selector(SETTLED, timeout=15_000)
    first = _latest_measured(session)["tokens"]
    expect(meter).to_have_js_property("value", first)
    ask(page, f"Question 2. {LONG}")
    page.wait_for_selector("#transcript section.run:nth-of-type(2):not([data-live])", timeout=15_000)
    second = _latest_measured(session)["tokens"]
    assert second > first
    expect(meter).to_have_js_property("value", second)
    expect(page.locator("#context-figures")).to_contain_text(f"{second:,} of {budget['effective_input_tokens']:,}")

    page.reload()  # the page starts from the latest measurement
    expect(_meter(page)).to_have_js_property("value", second)
    assert page.script_errors == []


def test_compact_now_summarizes_and_the_marker_opens_the_summary(page, server, small_session, fake_provider):
    session = small_session()
    provider = Provider()
    fake_provider.handler = provider
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    for n in (1, 2):
        ask(page, f"Question {n}. {LONG * 4}")
        page.wait_for_selector(f"#transcript section.run:nth-of-type({n}):not([data-live])", timeout=15_000)
    before = _value(page)
    expect(page.locator(".summary-marker")).to_have_count(0)

    page.get_by_role("button", name="Compact now").click()
    expect(page.locator("#chat-status")).to_have_text("Earlier messages were summarized.", timeout=15_000)
    assert provider.summary_calls == 1
    marker = page.locator(f"{LAST_RUN} details.summary-marker")
    expect(marker).to_have_count(1)
    expect(marker.locator("summary")).to_have_text("Earlier messages were summarized")
    expect(marker.locator(".summary-text")).to_be_hidden()
    marker.locator("summary").click()
    expect(marker.locator(".summary-text")).to_contain_text("All user messages: Question 1, Question 2")
    assert _value(page) < before
    screenshot(page, "chat-summary-marker")

    page.reload()
    expect(page.locator(f"{LAST_RUN} details.summary-marker")).to_have_count(1)
    assert _value(page) < before
    assert page.script_errors == []


def test_compact_now_with_nothing_to_compact_says_so_and_changes_nothing(page, server, small_session):
    session = small_session()
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    page.get_by_role("button", name="Compact now").click()
    expect(page.locator("#chat-alert")).to_be_visible()
    expect(page.locator("#chat-alert")).not_to_have_text("")
    expect(page.locator("#transcript section.run")).to_have_count(0)
    assert page.script_errors == []


def test_the_plan_is_shown_beside_the_run_while_it_works_and_stays_after(page, server, fake_session, fake_provider):
    session = fake_session(tools=("update_plan",))
    replies = iter([
        chat_stream(tool_calls=[{"id": "plan-1", "name": "update_plan", "arguments": json.dumps({"steps": PLAN})}]),
        chat_stream([f"part{i} " for i in range(40)], delay=0.05),
    ])
    fake_provider.handler = lambda request: next(replies)
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "Compare the regions")
    plan = page.get_by_role("complementary", name="The agent's plan")
    expect(plan).to_be_visible(timeout=10_000)
    expect(page.locator(f"{LAST_RUN}[data-live='1']")).to_have_count(1)  # shown while the run works
    expect(plan.locator("li")).to_have_count(3)
    expect(plan.locator("[data-plan-count]")).to_have_text("1 of 3 done")
    expect(plan.locator("li.plan-in_progress .plan-text")).to_have_text("Compare the regions")
    expect(plan.locator("li.plan-done .plan-status")).to_have_text("done")
    screenshot(page, "chat-plan")
    page.wait_for_selector(SETTLED, timeout=15_000)
    expect(page.get_by_role("complementary", name="The agent's plan").locator("li")).to_have_count(3)
    assert page.script_errors == []


def test_ctx51_undo_summary_on_the_newest_marker_and_the_marker_then_says_so(page, server, small_session,
                                                                          fake_provider):
    from sessions.models import SessionMessage

    session = small_session()
    fake_provider.handler = Provider()
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    for n in (1, 2):
        ask(page, f"Question {n}. {LONG * 4}")
        page.wait_for_selector(f"#transcript section.run:nth-of-type({n}):not([data-live])", timeout=15_000)
    expect(page.get_by_role("button", name="Undo summary")).to_have_count(0)
    page.get_by_role("button", name="Compact now").click()
    expect(page.locator("#chat-status")).to_have_text("Earlier messages were summarized.", timeout=15_000)
    undo = page.get_by_role("button", name="Undo summary")
    expect(undo).to_have_count(1)
    undo.click()
    expect(page.locator("#chat-status")).to_contain_text("Summary undone", timeout=15_000)
    marker = page.locator(f"{LAST_RUN} details.summary-marker")
    expect(marker.locator("summary")).to_have_text("Earlier messages were summarized · summary undone")
    expect(page.get_by_role("button", name="Undo summary")).to_have_count(0)
    assert SessionMessage.objects.filter(session=session, kind="compaction_undone").count() == 1
    screenshot(page, "chat-summary-undone")

    page.reload()
    expect(page.locator(f"{LAST_RUN} details.summary-marker summary")).to_contain_text("summary undone")
    expect(page.get_by_role("button", name="Undo summary")).to_have_count(0)
    assert page.script_errors == []
