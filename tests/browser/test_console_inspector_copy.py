"""The context inspector's Copy as JSON and Copy as cURL in Chromium, under the console's
CSP (a static script), at 1280 and 390 px: what lands on the clipboard is the body as sent
and a command that reads the key from $API_KEY — never the stored key."""
from __future__ import annotations

import json

import pytest

from tests.admin_console.test_inspector_copy import OPENAI_BODY, STORED_KEY, _run_with_call
from tests.browser.conftest import screenshot
from tests.browser.test_admin_browser import ADA_PASSWORD, admin_log_in

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]


@pytest.fixture
def ada(django_user_model):
    return django_user_model.objects.create_superuser(username="ada", password=ADA_PASSWORD, email="ada@example.com")


def _run_nobody_executes(space, alice, fake_provider):
    """The recorded call, on a run the test claims itself: the live server's worker threads
    would otherwise race it for the queued run."""
    from sessions.services.dispatch import dispatcher_get, dispatcher_set

    dispatcher = dispatcher_get()
    dispatcher_set(None)
    try:
        return _run_with_call(space, alice, provider="openai_compatible", base_url=fake_provider.base_url,
                              body=OPENAI_BODY)
    finally:
        dispatcher_set(dispatcher)


@pytest.mark.parametrize("width", [1280, 390])
def test_copy_as_json_and_as_curl_put_the_request_on_the_clipboard(page_factory, server, ada, space, alice,
                                                                   fake_provider, width):
    run, call = _run_nobody_executes(space, alice, fake_provider)
    page = page_factory(width=width, height=900, mobile=width < 500)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    violations: list[str] = []
    page.on("console", lambda message: violations.append(message.text)
            if "Content Security Policy" in message.text else None)
    admin_log_in(page, server)
    page.goto(f"{server.url}/admin/agent_sessions/run/{run.pk}/context/")
    detail = page.locator(f"#call-{call.pk}")
    as_json, as_curl = (detail.get_by_role("button", name=name) for name in ("Copy as JSON", "Copy as cURL"))
    for button in (as_json, as_curl):
        box = button.bounding_box()
        assert 0 <= box["x"] and box["x"] + box["width"] <= width
    expect(detail.locator(".request-copy-note")).to_contain_text("$API_KEY")

    as_json.click()
    expect(detail.locator(".request-copy-status")).to_have_text("Copied as JSON.")
    assert json.loads(page.evaluate("navigator.clipboard.readText()")) == OPENAI_BODY
    as_curl.click()
    expect(detail.locator(".request-copy-status")).to_have_text("Copied as cURL.")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.splitlines()[1].startswith(f"curl -sS -N -X POST {fake_provider.base_url}/chat/completions")
    assert '-H "Authorization: Bearer $API_KEY"' in copied and STORED_KEY not in copied
    screenshot(page, f"console-inspector-copy-{width}")
    assert violations == [] and page.script_errors == []
