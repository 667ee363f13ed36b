"""Each tool's approval policy in the console, in a real browser at 1280 and 390 px (TOOL-7):
ada sets "Ask before calling" under a tool in the agent form, saves, publishes, and reads the
policy on the version page; neither page widens past the screen.

ada is the platform's admin; the tool server ``tests`` is the SDK-built one of
tests/fakes/mcp_servers.py (``echo`` read-only, ``increment`` with a side effect). Debian's
Chromium driven by Playwright (tests/browser/conftest.py); screenshots land in
var/screenshots/console-approvals-*.png (git-ignored).
"""
from __future__ import annotations

import pytest

from tests.browser.conftest import screenshot
from tests.browser.test_admin_browser import ADA_PASSWORD, admin_log_in
from tests.fakes.mcp_servers import ToolServerApp

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]


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
    return page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")


def tool_row(page, name: str):
    return page.locator(f".tool-picker li:has(code.tool-name:text-is('{name}'))")


@pytest.mark.parametrize(("width", "mobile"), [(1280, False), (390, True)])
def test_tool7_an_admin_sets_a_tools_policy_and_reads_it_on_the_version_page(
        page_factory, server, ada, mcp_server, width, mobile):
    from agents.models import Agent
    from agents.services import agent_create
    from core.spaces.models import Space
    from models_catalog.models import ModelConnection
    from toolservers.services import toolserver_register

    space = Space.objects.get(name="Ada's lab")
    toolserver_register(space=space, data={"name": "tests", "url": mcp_server.url, "headers": mcp_server.headers})
    demo = ModelConnection.objects.create(space=space, name="Demo", provider="demo", model="agentloom-demo")
    agent = agent_create(space=space, name="Counter", model_connection=demo, instructions="Count.",
                         tools=["http_fetch", "tests.echo", "tests.increment"], created_by=ada)

    page = page_factory(width=width, height=900, mobile=mobile)
    admin_log_in(page, server)
    page.goto(f"{server.url}/admin/agents/agent/{agent.pk}/change/")
    increment = tool_row(page, "increment").get_by_label("Ask before calling")
    expect(increment).to_have_value("side_effects")
    expect(increment.locator("option:checked")).to_have_text("When it may change something (default)")
    echo = tool_row(page, "echo").get_by_label("Ask before calling")
    expect(echo.locator("option:checked")).to_have_text(
        "When it may change something (default): it only reads, so never")
    assert page_fits(page)

    increment.select_option("never")
    tool_row(page, "http_fetch").get_by_label("Ask before calling").select_option("always")
    expect(page.get_by_role("button", name="Publish v1")).to_be_disabled()  # an unsaved edit
    screenshot(page, f"console-approvals-form-{width}", full_page=True)
    page.get_by_role("button", name="Save and continue editing").click()
    expect(page.locator("ul.messagelist .success")).to_contain_text("was changed successfully")
    expect(page.locator(".errornote")).to_have_count(0)
    expect(tool_row(page, "increment").get_by_label("Ask before calling")).to_have_value("never")
    expect(tool_row(page, "http_fetch").get_by_label("Ask before calling")).to_have_value("always")
    assert Agent.objects.get(pk=agent.pk).tool_overrides == {"http_fetch": {"approval": "always"},
                                                             "tests.increment": {"approval": "never"}}

    page.get_by_role("button", name="Publish v1").click()
    expect(page.locator("ul.messagelist .success")).to_contain_text("Published Counter v1")
    page.locator(".version-pages a", has_text="v1").click()
    approvals = page.locator(".field-approvals_list")
    expect(approvals.locator("li")).to_have_count(3)
    expect(approvals.locator("li", has_text="http_fetch")).to_have_text("http_fetch: Always: asks before every call")
    expect(approvals.locator("li", has_text="tests.echo")).to_have_text(
        "tests.echo: When it may change something (default): never asks: it only reads")
    expect(approvals.locator("li", has_text="tests.increment")).to_have_text("tests.increment: Never: never asks")
    expect(page.locator("table.frozen-tools tr", has_text="tests.increment")).to_contain_text("Never")
    assert page_fits(page)
    screenshot(page, f"console-approvals-version-{width}", full_page=True)
