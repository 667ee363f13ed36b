"""Tool servers and agents in the console, in a real browser at 1280 and 390 px: adding a
server says it was added (once); the agent form's tool picker is a wide list with what each
tool does; the version page shows its server tools as a table; that table, the compactions
table and the charts stay within their own box, never widening the page.

Debian's Chromium driven by Playwright against uvicorn in this process (tests/browser/
conftest.py); skipped with the reason when either is missing. Screenshots land in
var/screenshots/console-tools-*.png (git-ignored).
"""
from __future__ import annotations

import pytest

from tests.browser.conftest import FAKE_KEY, screenshot
from tests.browser.test_admin_browser import ADA_PASSWORD, admin_log_in, compact, metrics, run_to_the_end
from tests.fakes.fake_provider import chat_stream, sequence
from tests.fakes.mcp_servers import TOKEN, ToolServerApp

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]
WIDTHS = [(1280, False), (390, True)]


@pytest.fixture
def ada(django_user_model):
    """The platform's admin: a staff superuser, and admin of her own space."""
    from core.spaces.services import space_bootstrap_for_user

    user = django_user_model.objects.create_superuser(username="ada", password=ADA_PASSWORD, email="ada@example.com")
    space_bootstrap_for_user(user=user, name="Ada's lab")
    return user


@pytest.fixture
def mcp_server():
    with ToolServerApp() as server:
        yield server


def page_fits(page) -> bool:
    """Nothing widens the page: whatever is wide scrolls within its own box."""
    return page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")


def box_fits(page, selector: str) -> bool:
    """The element is no wider than the box it is in, or that box scrolls it sideways."""
    return page.locator(selector).first.evaluate(
        """el => { for (let box = el.parentElement; box; box = box.parentElement) {
                     const style = getComputedStyle(box);
                     if (['auto', 'scroll'].includes(style.overflowX)) return true;
                     if (box.clientWidth) return el.getBoundingClientRect().width <= box.clientWidth + 1; }
                   return true; }""")


def whole(page, selector: str) -> bool:
    """The element fits its box without scrolling (every column in sight)."""
    return page.locator(selector).first.evaluate(
        "el => el.getBoundingClientRect().width <= el.parentElement.clientWidth + 1")


def chart_readable(page, selector: str) -> bool:
    """The chart is drawn at no less than 60% of its own size, so its labels stay legible."""
    return page.locator(selector).first.evaluate(
        "svg => svg.getBoundingClientRect().width >= 0.6 * svg.viewBox.baseVal.width")


def test_adding_a_tool_server_says_it_was_added_and_saves_it_once(page, server, ada, mcp_server):
    from toolservers.models import ToolServer

    admin_log_in(page, server)
    page.goto(f"{server.url}/admin/toolservers/toolserver/add/")
    page.get_by_label("Space").select_option(label="Ada's lab")
    page.get_by_label("Name").fill("tests")
    page.get_by_label("Url").fill(mcp_server.url)
    page.get_by_role("textbox", name="Headers:").fill(f"Authorization: Bearer {TOKEN}")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("ul.messagelist .success")).to_contain_text("was added successfully")
    expect(page.locator(".errornote")).to_have_count(0)
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    assert list(ToolServer.objects.values_list("name", flat=True)) == ["tests"]


@pytest.mark.parametrize(("width", "mobile"), WIDTHS)
def test_the_tool_picker_the_version_page_and_the_compactions_fit_and_read(
        page_factory, server, ada, mcp_server, fake_provider, worker_threads, width, mobile):
    from agents.services import agent_create, agent_publish
    from core.spaces.models import Space
    from models_catalog.models import ModelConnection
    from sessions.models import Session
    from toolservers.services import toolserver_register

    space = Space.objects.get(name="Ada's lab")
    toolserver_register(space=space, data={"name": "tests", "url": mcp_server.url, "headers": mcp_server.headers})
    connection = ModelConnection.objects.create(
        space=space, name="Local vLLM", provider="openai_compatible", base_url=fake_provider.base_url,
        api_key=FAKE_KEY, model="qwen3-8b", context_window=32_768, max_output_tokens=1_024)
    agent = agent_create(space=space, name="Research assistant", model_connection=connection,
                         instructions="Be brief.", tools=["calculator", "tests.echo", "tests.add", "tests.increment"])
    version = agent_publish(agent=agent)
    session = Session.objects.create(space=space, user=ada, agent=agent, version=version)
    fake_provider.handler = sequence(chat_stream(["Four."], usage={"prompt_tokens": 212, "completion_tokens": 4}))
    run = run_to_the_end(session, "What is 2+2?", worker_threads)
    session.refresh_from_db()
    compact(run, covered_seq=session.last_seq, figures=metrics(
        trigger="budget", before=25_210, after=6_480, threshold=24_576, target=18_432,
        consumed=[1, session.last_seq], messages=session.last_seq, covered=session.last_seq, calls=2))

    page = page_factory(width=width, height=900, mobile=mobile)
    admin_log_in(page, server)

    page.goto(f"{server.url}/admin/agents/agent/add/")
    picker = page.locator(".tool-picker")
    expect(picker.locator("li", has_text="Evaluate an arithmetic expression")).to_have_count(1)
    expect(picker.locator("li", has_text="Repeat the text back.")).to_have_count(1)
    picker_width = picker.bounding_box()["width"]
    content_width = page.locator("#content").bounding_box()["width"]
    assert picker_width >= 0.6 * content_width, (picker_width, content_width)  # a wide list, not a narrow column
    assert page_fits(page)
    screenshot(page, f"console-tools-agent-add-{width}", full_page=True)

    page.goto(f"{server.url}/admin/agents/agentversion/{version.pk}/change/")
    table = page.locator("table.frozen-tools")
    expect(table.locator("tbody tr")).to_have_count(3)
    expect(page.locator("#content")).not_to_contain_text('"input_schema"')
    # No stored JSON anywhere on the page: the tools and the policy read as lists.
    expect(page.locator("#content")).not_to_contain_text('["calculator"')
    expect(page.locator("#content")).not_to_contain_text('{"context_ratio"')
    expect(page.locator(".field-tools_list")).to_contain_text("calculator, tests.echo, tests.add, tests.increment")
    assert page_fits(page) and box_fits(page, "table.frozen-tools")
    assert width < 1280 or whole(page, "table.frozen-tools")
    screenshot(page, f"console-tools-version-{width}", full_page=True)

    page.goto(f"{server.url}/admin/agent_sessions/session/{session.pk}/compactions/")
    expect(page.locator("table.compactions tbody tr")).to_have_count(1)
    assert page_fits(page) and box_fits(page, "table.compactions") and box_fits(page, "svg.compaction-chart")
    assert chart_readable(page, "svg.compaction-chart")
    assert width < 1280 or whole(page, "table.compactions")
    screenshot(page, f"console-tools-compactions-{width}", full_page=True)

    page.goto(f"{server.url}/admin/agents/agentversion/{version.pk}/usage/")
    expect(page.locator("figure.chart-box").first).to_be_visible()
    assert page_fits(page) and box_fits(page, "svg.usage-chart") and chart_readable(page, "svg.usage-chart")
    for table in page.locator("table.usage").all():
        assert table.evaluate("t => t.closest('.console-scroll, .table-scroll, figure') !== null "
                              "|| t.scrollWidth <= t.parentElement.clientWidth + 1")
    screenshot(page, f"console-tools-usage-{width}", full_page=True)
