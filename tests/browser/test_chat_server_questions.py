"""A tool server's question in the chat (TOOL-10): the form built from its schema, a field's
error from the server, the answer reaching the tool; and a URL to open — at 1280 and 390 px."""
from __future__ import annotations

import json

import pytest

from tests.browser.conftest import LAST_RUN, SETTLED, answer_text, ask, log_in, screenshot
from tests.fakes.fake_provider import chat_stream, sequence
from tests.fakes.mcp_servers import ToolServerApp

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]
WIDTHS = [pytest.param(1280, id="desk"), pytest.param(390, id="phone")]


def _session(space, fake_session, fake_provider, mcp, tool, call_id):
    from toolservers.services import toolserver_register

    toolserver_register(space=space, data={"name": "hotel", "url": mcp.url, "headers": mcp.headers})
    from agents.models import AgentVersion
    from agents.server_tools import frozen_server_tools

    session = fake_session(tools=(f"hotel.{tool}",), name="Concierge")
    # The call is made without an approval first (TOOL-7's policy, as publishing freezes it):
    # the question here is the server's, during the call.
    frozen = [{**entry, "approval": "never"} for entry in frozen_server_tools(session.version)]
    AgentVersion.objects.filter(pk=session.version_id).update(server_tools=json.dumps(frozen))
    fake_provider.handler = sequence(
        chat_stream(tool_calls=[{"id": call_id, "name": f"hotel__{tool}", "arguments": '{"room": "101"}'
                                 if tool == "book_room" else "{}"}]),
        chat_stream(["All done."]))
    return session


@pytest.mark.parametrize("width", WIDTHS)
def test_a_servers_form_is_filled_in_checked_and_its_answer_reaches_the_tool(
        page_factory, server, space, fake_provider, fake_session, width):
    page = page_factory(width=width, height=850 if width > 500 else 844, mobile=width < 500)
    with ToolServerApp(asking=True) as mcp:
        session = _session(space, fake_session, fake_provider, mcp, "book_room", "b1")
        log_in(page, server, next_path=f"/sessions/{session.pk}/")
        ask(page, "Book room 101")
        card = page.locator(f"{LAST_RUN} .input-card")
        expect(card.locator(".input-who")).to_have_text("hotel asks you")
        expect(card.locator(".input-message")).to_have_text("Booking 101: who is it for, and for how many nights?")
        guest = card.get_by_label("Guest name")
        expect(guest).to_have_attribute("aria-required", "true")
        expect(card.locator(".input-label", has_text="Guest name")).to_contain_text("(required)")
        expect(card.locator(".hint", has_text="Who the room is for")).to_have_count(1)
        nights = card.get_by_label("Nights")
        expect(nights).to_have_attribute("type", "number")
        breakfast = card.get_by_label("Breakfast included")
        expect(breakfast).to_have_attribute("type", "checkbox")
        expect(card.locator(".input-label", has_text="Breakfast included")).not_to_contain_text("required")
        expect(card.get_by_label("Door code")).to_have_attribute("type", "password")  # typed unseen
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        screenshot(page, f"chat-server-question-form-{width}")
        # A value outside the form's rules: the server names the field, the card shows it there.
        guest.fill("Ada Lovelace")
        nights.fill("0")
        card.get_by_role("button", name="Accept").click()
        error = card.locator(".input-field:has(input[type=number]) .input-error")
        expect(error).to_contain_text("less than the minimum of 1")
        expect(nights).to_have_attribute("aria-invalid", "true")
        nights.fill("3")
        breakfast.check()
        card.get_by_role("button", name="Accept").click()
        expect(card.locator(".input-outcome")).to_have_text("You accepted.")
        page.wait_for_selector(SETTLED, timeout=20_000)
        assert "All done." in answer_text(page)
        assert mcp.answers == [{"action": "accept", "guest": "Ada Lovelace", "nights": 3, "breakfast": True,
                                "door_code": ""}]
        assert page.script_errors == []


@pytest.mark.parametrize("width", WIDTHS)
def test_a_servers_link_opens_its_host_and_declining_tells_the_server(
        page_factory, server, space, fake_provider, fake_session, width):
    page = page_factory(width=width, height=850 if width > 500 else 844, mobile=width < 500)
    with ToolServerApp(asking=True, legacy=True) as mcp:
        session = _session(space, fake_session, fake_provider, mcp, "connect_account", "u1")
        log_in(page, server, next_path=f"/sessions/{session.pk}/")
        ask(page, "Connect my calendar")
        card = page.locator(f"{LAST_RUN} .input-card")
        link = card.get_by_role("link", name="Open calendar.example.com")
        expect(link).to_have_attribute("href", "https://calendar.example.com/connect?state=abc")
        expect(link).to_have_attribute("rel", "noopener noreferrer")
        for name in ("Accept", "Decline", "Cancel"):
            expect(card.get_by_role("button", name=name)).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        screenshot(page, f"chat-server-question-url-{width}")
        card.get_by_role("button", name="Decline").click()
        expect(card.locator(".input-outcome")).to_have_text("You declined.")
        page.wait_for_selector(SETTLED, timeout=20_000)
        assert mcp.answers == [{"action": "decline"}]
        assert page.script_errors == []
