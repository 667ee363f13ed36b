"""The chat's Memory panel in a real browser (SPEC §7c, MEM-4), at 1280 px and on a phone
(390 px): the agent saves a fact with its memory tool (its step says so in words), and
alice opens the panel, sees it, edits it, deletes another file, turns "don't use memory
for me" on and forgets everything — each asserted on the page and in what is stored.
Waits on what the page shows, never on time."""
from __future__ import annotations

import json
import threading

import pytest

from tests.browser.conftest import FAKE_KEY, LAST_RUN, SETTLED, ask, log_in, screenshot
from tests.fakes.fake_provider import chat_stream

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]

WIDTHS = [1280, 390]
PANEL = "#memory-panel"


def _page(page_factory, width: int):
    return page_factory(width=width, height=850 if width > 500 else 844, mobile=width < 500)


def _agent(space, alice, fake_provider, *, memory: bool):
    from agents.services import agent_create, agent_publish
    from models_catalog.models import ModelConnection
    from sessions.models import Session

    connection = ModelConnection.objects.create(
        space=space, name="Fake", provider="openai_compatible", base_url=fake_provider.base_url, api_key=FAKE_KEY,
        model="fake-model", context_window=32_768, max_output_tokens=1_024)
    agent = agent_create(space=space, name="Keeper", model_connection=connection, instructions="Be brief.",
                         tools=[], created_by=alice)
    agent.memory = memory
    agent.save(update_fields=["memory"])
    version = agent_publish(agent=agent, published_by=alice)
    return Session.objects.create(space=space, user=alice, agent=agent, version=version)


def _owner(session):
    from memory.selectors import MemoryOwner

    return MemoryOwner(space_id=session.space_id, agent_id=session.agent_id, user_id=session.user_id)


def _stored(session) -> dict[str, str]:
    from memory.selectors import memory_files

    return memory_files(owner=_owner(session))


def _fits(page, width: int) -> None:
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page scrolls sideways by {overflow} px at {width} px"
    box = page.locator(PANEL).bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, box


@pytest.mark.parametrize("width", WIDTHS)
def test_alice_sees_edits_deletes_and_forgets_what_the_agent_saved(page_factory, server, space, alice,
                                                                    fake_provider, width):
    from memory.models import MemoryChange
    from memory.selectors import memory_in_use
    from memory.services import memory_command

    session = _agent(space, alice, fake_provider, memory=True)
    memory_command(owner=_owner(session), by=MemoryChange.By.AGENT, arguments={
        "command": "create", "path": "/memories/projects/garden.md", "file_text": "Planting roses in May."})

    release = threading.Event()

    def handler(request):
        if not any(m["role"] == "tool" for m in request.json["messages"]):
            return chat_stream(tool_calls=[{"id": "m1", "name": "memory", "arguments": json.dumps({
                "command": "create", "path": "/memories/alice.md", "file_text": "Alice drinks tea."})}])
        release.wait(timeout=30)  # the answer waits while the live step is looked at
        return chat_stream(["Noted: you drink tea."])

    fake_provider.handler = handler
    page = _page(page_factory, width)
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "Remember that I drink tea.")
    live_step = page.locator(f"{LAST_RUN}[data-live] details.step .step-name")
    expect(live_step).to_have_text("Saved to memory: /memories/alice.md")  # while it streams (chat.js)
    release.set()
    page.wait_for_selector(SETTLED, timeout=20_000)
    expect(page.locator(f"{LAST_RUN} details.step .step-name")).to_have_text("Saved to memory: /memories/alice.md")
    assert _stored(session)["/memories/alice.md"] == "Alice drinks tea."

    page.get_by_role("button", name="Memory", exact=True).click()
    panel = page.locator(PANEL)
    expect(panel).to_be_visible()
    expect(panel.locator(".memory-next")).to_contain_text("Changes reach the agent from your next question")
    files = panel.locator(".memory-file")
    expect(files).to_have_count(2)
    expect(panel.get_by_label("Text of /memories/alice.md")).to_have_value("Alice drinks tea.")
    expect(panel.get_by_label("Text of /memories/projects/garden.md")).to_have_value("Planting roses in May.")
    used = len("/memories/alice.md") + 17 + len("/memories/projects/garden.md") + 22
    expect(panel.locator("[data-memory-used]")).to_have_text(f"{used} of 8,000 characters used")
    expect(panel.locator(".memory-change").first).to_contain_text("Keeper saved /memories/alice.md")
    expect(panel.locator(".memory-change").first.locator("time")).to_have_text("just now")
    expect(panel.locator("[data-memory-agent-off]")).to_be_hidden()
    _fits(page, width)
    screenshot(page, f"chat-memory-panel-{width}")

    panel.get_by_label("Text of /memories/alice.md").fill("Alice drinks green tea.")
    panel.get_by_role("button", name="Save /memories/alice.md").click()
    expect(panel.locator("[data-memory-status]")).to_have_text("Saved.")
    expect(panel.get_by_label("Text of /memories/alice.md")).to_have_value("Alice drinks green tea.")
    assert _stored(session)["/memories/alice.md"] == "Alice drinks green tea."
    expect(panel.locator(".memory-change").first).to_contain_text("You saved /memories/alice.md")

    panel.get_by_role("button", name="Delete /memories/projects/garden.md").click()
    expect(files).to_have_count(1)
    assert "/memories/projects/garden.md" not in _stored(session)

    switch = panel.get_by_role("switch", name="Don't use memory for me")
    switch.check()
    expect(panel.locator("[data-memory-use-words]")).to_have_text(
        "The agent does not use this memory for you: your questions carry none of it.")
    expect(switch).to_be_checked()
    assert memory_in_use(owner=_owner(session)) is False

    panel.get_by_role("button", name="Forget everything").click()
    confirm = panel.locator("[data-memory-confirm]")
    expect(confirm).to_contain_text("Every file is erased for good.")
    confirm.get_by_role("button", name="Cancel").click()
    expect(confirm).to_be_hidden()
    assert _stored(session) == {"/memories/alice.md": "Alice drinks green tea."}
    panel.get_by_role("button", name="Forget everything").click()
    confirm.get_by_role("button", name="Yes, forget everything").click()
    expect(panel.locator("[data-memory-empty]")).to_have_text("Nothing is kept in this agent's memory of you.")
    expect(files).to_have_count(0)
    assert _stored(session) == {}
    expect(panel.locator("[data-memory-used]")).to_have_text("0 of 8,000 characters used")
    _fits(page, width)
    screenshot(page, f"chat-memory-forgotten-{width}")

    # The session shows what the person changed from the panel, now and after a reload.
    notes = page.locator("#transcript .memory-note")
    expected = ["Memory: You saved /memories/alice.md", "Memory: You deleted /memories/projects/garden.md",
                "Memory: You turned memory off (“don't use memory for me”)",
                "Memory: You forgot everything in memory"]
    expect(notes).to_have_text(expected)
    panel.get_by_role("button", name="Close").click()
    expect(panel).to_be_hidden()
    page.reload()
    expect(page.locator("#transcript .memory-note")).to_have_text(expected)
    expect(page.locator(f"{LAST_RUN} details.step .step-name")).to_have_text("Saved to memory: /memories/alice.md")
    assert page.script_errors == []


def test_with_the_agents_memory_off_the_panel_says_so_and_still_erases(page_factory, server, space, alice,
                                                                        fake_provider):
    from memory.models import MemoryChange
    from memory.services import memory_command

    session = _agent(space, alice, fake_provider, memory=False)
    memory_command(owner=_owner(session), by=MemoryChange.By.AGENT, arguments={
        "command": "create", "path": "/memories/old.md", "file_text": "Kept from before."})
    page = _page(page_factory, 390)
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    page.get_by_role("button", name="Memory", exact=True).click()
    panel = page.locator(PANEL)
    expect(panel.locator("[data-memory-agent-off]")).to_contain_text("does not keep a memory now")
    text = panel.get_by_label("Text of /memories/old.md")
    expect(text).to_have_value("Kept from before.")
    expect(text).not_to_be_editable()
    expect(panel.get_by_role("button", name="Save /memories/old.md")).to_be_hidden()
    panel.get_by_role("button", name="Delete /memories/old.md").click()
    expect(panel.locator("[data-memory-empty]")).to_be_visible()
    assert _stored(session) == {}
    assert page.script_errors == []
