"""A server tool's step in the chat (TOOL-4): its progress while it runs, its image after."""
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


def test_a_server_tools_step_shows_its_progress_while_it_runs_and_its_image_after(page, server, space,
                                                                                   fake_provider, fake_session):
    from toolservers.services import toolserver_register

    with ToolServerApp() as mcp:
        toolserver_register(space=space, data={"name": "tests", "url": mcp.url, "headers": mcp.headers})
        session = fake_session(tools=("tests.gated", "tests.picture"), name="Tool user")
        session.version.model_connection.supports_images = True
        session.version.model_connection.save()
        fake_provider.handler = sequence(
            chat_stream(tool_calls=[{"id": "g1", "name": "tests__gated", "arguments": "{}"}]),
            chat_stream(tool_calls=[{"id": "p1", "name": "tests__picture", "arguments": json.dumps({})}]),
            chat_stream(["Here is a red square."]))
        log_in(page, server, next_path=f"/sessions/{session.pk}/")
        ask(page, "Wait, then show me a picture")
        gated = page.locator(f"{LAST_RUN} details.step[data-call-id=g1]")
        expect(gated.locator(".step-status")).to_have_text("running")
        expect(gated.locator(".step-progress-text")).to_contain_text("waiting for the release")
        expect(gated.locator("progress")).to_have_attribute("aria-label", "Progress of tests · gated")
        screenshot(page, "chat-server-tool-progress")
        mcp.release.set()
        page.wait_for_selector(SETTLED, timeout=20_000)
        assert "red square" in answer_text(page)
        picture = page.locator(f"{LAST_RUN} details.step").filter(
            has=page.locator(".step-name", has_text="tests · picture"))
        picture.locator("summary").click()
        image = picture.locator("img.step-image")
        expect(image).to_have_count(1)
        assert image.get_attribute("src").startswith("data:image/png;base64,")
        assert page.evaluate("(img) => img.naturalWidth", image.element_handle()) == 24
        screenshot(page, "chat-server-tool-image")
        assert page.script_errors == []
