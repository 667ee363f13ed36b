"""Memory across sessions in the console, in a real browser at 1280 and 390 px (SPEC §7c,
MEM-1, MEM-2 with TOOL-7): ada turns memory on in the agent form, where the memory tool's
"Ask before calling" appears only while the box is ticked, saves, publishes and reads it on
the version page; then she opens a person's memory through the audited read page. No page
widens past the screen.

ada is the platform's admin (tests/browser/test_console_approvals.py); bob is a member of
her space whose memory she reads. Screenshots land in var/screenshots/console-memory-*.png.
"""
from __future__ import annotations

import pytest

from tests.browser.conftest import screenshot
from tests.browser.test_admin_browser import admin_log_in
from tests.browser.test_console_approvals import ada, page_fits  # noqa: F401  (ada: the fixture)

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]

NOTE = "Bob takes his tea without sugar and reviews on Fridays"


@pytest.mark.parametrize(("width", "mobile"), [(1280, False), (390, True)])
def test_mem2_an_admin_turns_memory_on_sets_its_tools_policy_and_reads_it_on_the_version_page(
        page_factory, server, ada, width, mobile):  # noqa: F811  (ada: the fixture)
    from agents.models import Agent
    from agents.services import agent_create
    from core.spaces.models import Space
    from models_catalog.models import ModelConnection

    space = Space.objects.get(name="Ada's lab")
    demo = ModelConnection.objects.create(space=space, name="Demo", provider="demo", model="agentloom-demo")
    agent = agent_create(space=space, name="Keeper", model_connection=demo, instructions="Remember.",
                         tools=["calculator"], created_by=ada)

    page = page_factory(width=width, height=900, mobile=mobile)
    admin_log_in(page, server)
    page.goto(f"{server.url}/admin/agents/agent/{agent.pk}/change/")
    box = page.get_by_label("Memory across sessions")
    expect(box).not_to_be_checked()
    expect(page.locator(".field-memory .help")).to_contain_text("short notes the agent keeps about them")
    policy = page.locator("#id_memory_tool_policy")
    expect(policy).to_be_hidden()

    box.check()
    expect(policy).to_be_visible()
    select = policy.get_by_label("Ask before calling")
    expect(select).to_be_enabled()
    expect(select.locator("option:checked")).to_have_text("Never (default)")
    select.select_option("side_effects")
    expect(select.locator("option:checked")).to_have_text(
        "When it may change something: before writing, not before reading")
    assert page_fits(page)
    policy.scroll_into_view_if_needed()
    screenshot(page, f"console-memory-form-{width}", full_page=True)
    page.get_by_role("button", name="Save and continue editing").click()
    expect(page.locator("ul.messagelist .success")).to_contain_text("was changed successfully")
    expect(page.get_by_label("Memory across sessions")).to_be_checked()
    expect(page.locator("#id_memory_tool_policy").get_by_label("Ask before calling")).to_have_value("side_effects")
    saved = Agent.objects.get(pk=agent.pk)
    assert saved.memory and saved.tool_overrides == {"memory": {"approval": "side_effects"}}

    page.get_by_role("button", name="Publish v1").click()
    expect(page.locator("ul.messagelist .success")).to_contain_text("Published Keeper v1")
    page.locator(".version-pages a", has_text="v1").click()
    expect(page.locator(".field-memory_shown")).to_contain_text("On: each person's runs carry their memory")
    expect(page.locator(".field-approvals_list li", has_text="memory")).to_have_text(
        "memory: When it may change something: asks before every call that writes, not before reading")
    assert page_fits(page)
    screenshot(page, f"console-memory-version-{width}", full_page=True)


@pytest.mark.parametrize(("width", "mobile"), [(1280, False), (390, True)])
def test_mem1_an_operator_reads_a_persons_memory_only_through_the_audited_page(
        page_factory, server, ada, bob, width, mobile):  # noqa: F811  (ada: the fixture)
    from agents.services import agent_create
    from core.spaces.models import Membership, Space
    from core.spaces.services import membership_add
    from memory.models import MemoryState
    from memory.selectors import MemoryOwner
    from memory.services import memory_file_put
    from models_catalog.models import ModelConnection
    from sessions.models import AccessAudit

    space = Space.objects.get(name="Ada's lab")
    membership_add(space=space, user=bob, role=Membership.Role.MEMBER)
    demo = ModelConnection.objects.create(space=space, name="Demo", provider="demo", model="agentloom-demo")
    agent = agent_create(space=space, name="Keeper", model_connection=demo, instructions="Remember.",
                         tools=[], created_by=ada)
    memory_file_put(owner=MemoryOwner(space_id=space.pk, agent_id=agent.pk, user_id=bob.pk),
                    path="/memories/bob-preferences-and-the-rhythm-of-his-working-week.md", content=NOTE * 3)

    page = page_factory(width=width, height=900, mobile=mobile)
    admin_log_in(page, server)
    page.goto(f"{server.url}/admin/memory/memorystate/")
    expect(page.locator("#result_list")).to_contain_text("bob")
    expect(page.locator("body")).not_to_contain_text("tea without sugar")
    assert page_fits(page)
    screenshot(page, f"console-memory-owners-{width}", full_page=True)
    assert not AccessAudit.objects.exists()

    page.get_by_role("link", name="Read (audited)").click()
    expect(page.locator(".memory-text")).to_contain_text("tea without sugar")
    expect(page.locator(".console-notice")).to_contain_text("access audit")
    assert page_fits(page)
    screenshot(page, f"console-memory-read-{width}", full_page=True)
    state = MemoryState.objects.get(user=bob)
    audit = AccessAudit.objects.get()
    assert (audit.user_id, audit.what, audit.detail["person"], audit.detail["agent"]) == (
        ada.pk, "memory", bob.pk, state.agent_id)
