"""The console in a real browser (issue 8): an operator pages through 500 records, opens a
long one, and finds hostile text inert on every console page. Screenshots of each page
land in var/screenshots/ (git-ignored) to be looked at.

Debian's Chromium driven by Playwright against uvicorn in this process; skipped with the
reason when either is missing (never `playwright install`).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.admin_console.conftest import SECRET, compaction, model_call
from tests.browser.conftest import browser  # noqa: F401  (the shared browser fixture)

SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
HOSTILE = "<script>alert(1)</script> <img src=x onerror=alert(1)> [x](javascript:alert(1))"


@pytest.fixture
def chromium_page(browser):
    """A page of the shared browser harness (tests/browser: Chromium, skips, async guard)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(10_000)
    page.dialogs = []
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    yield page
    page.close()


@pytest.fixture
def live_server_url(transactional_db):
    from tests.runloop.livesrv import LiveServer

    with LiveServer() as live:
        yield live.url


def shoot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"console-{name}.png"), full_page=True)


def test_an_operator_pages_through_500_records_and_every_console_page_is_inert(
        chromium_page, live_server_url, make_session, alice, olivia):
    from sessions.models import AccessAudit
    from sessions.selectors.instances import main_instance
    from sessions.services.events import event_emit
    from sessions.services.questions import question_ask
    from sessions.services.records import NewRecord, records_append
    from tests.sessions.helpers import claim

    session = make_session(alice)
    run = claim(question_ask(session=session, content=HOSTILE))
    records_append(session=session, run=run, instance=main_instance(run=run), records=[
        NewRecord("assistant", {"role": "assistant", "content": f"Answer {n}: {SECRET}" if n != 450 else
                                "\n".join(f"log line {i}" for i in range(300))}, f"a-{n}")
        for n in range(2, 500)])  # with the question and the summary below: 500 records
    event_emit(run_id=run.pk, type="message_delta", data={"instance": "main", "text": HOSTILE})
    model_call(run, messages=[{"role": "user", "content": HOSTILE}], estimates=[20])
    compaction(run, covered_seq=400)
    page, base = chromium_page, live_server_url

    page.goto(f"{base}/admin/login/?next=/admin/")
    page.get_by_label("Username").fill("olivia")
    page.get_by_label("Password").fill("olivia-password-1")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/admin/")

    page.goto(f"{base}/admin/agent_sessions/session/{session.pk}/change/")
    page.get_by_role("link", name="Records").first.click()
    page.get_by_label("Per page").select_option("100")
    # The records page streams: each click waits for the next page's whole document, never
    # reading the page it leaves or the first records of one still arriving (a busy machine).
    with page.expect_navigation(wait_until="load"):
        page.get_by_role("button", name="Show").click()
    seen: list[int] = []
    pages = 0
    while True:
        seen += [int(re.sub(r"\D", "", i)) for i in page.locator("ol.records li.record").evaluate_all(
            "items => items.map(item => item.id)")]
        pages += 1
        if pages == 1:
            shoot(page, "records")
        if page.locator('a[rel="next"]').count() == 0:
            break
        with page.expect_navigation(wait_until="load"):
            page.locator('a[rel="next"]').first.click()
    assert seen == list(range(1, 501)) and pages == 5

    record = page.locator("#seq-450")  # on the last page
    assert "log line 299" not in record.inner_text()
    record.get_by_text("Show all").click()
    assert "log line 299" in record.inner_text()
    assert not record.locator("pre.head").is_visible()
    page.locator('a[rel="prev"]').first.click()
    assert page.locator("ol.records li.record").first.get_attribute("id") == "seq-301"

    for name, path in (("compactions", f"session/{session.pk}/compactions/"),
                       ("events", f"run/{run.pk}/events/"), ("context", f"run/{run.pk}/context/")):
        page.goto(f"{base}/admin/agent_sessions/{path}")
        page.wait_for_load_state("load")
        shoot(page, name)
    assert page.locator("svg.compaction-chart").count() == 0  # the last page opened is the inspector
    page.goto(f"{base}/admin/agent_sessions/session/{session.pk}/compactions/")
    assert page.locator("svg.compaction-chart polyline").count() == 4

    assert page.dialogs == []
    assert page.locator("img[src=x]").count() == 0
    # The Records link, Show, four times Next, once Previous ("Show all" asks nothing).
    assert AccessAudit.objects.filter(user=olivia, what="records").count() == 7
    assert AccessAudit.objects.filter(what="events").count() == 1
    assert AccessAudit.objects.filter(what="context_inspector").count() == 1


def test_the_inspector_highlights_where_a_call_first_differs_from_the_previous_one(
        chromium_page, live_server_url, fake_session, strict, olivia):
    import json

    from runloop.loop import run_execute
    from sessions.models import ModelCall
    from sessions.services.questions import question_ask
    from tests.fakes.fake_provider import chat_stream, sequence

    strict.handler = sequence(
        chat_stream(tool_calls=[{"id": "call_a", "name": "calculator", "arguments": json.dumps({"expression": "6*7"})}],
                    usage={"prompt_tokens": 120, "completion_tokens": 9}),
        chat_stream(["It is 42."], usage={"prompt_tokens": 180, "completion_tokens": 5,
                                          "prompt_tokens_details": {"cached_tokens": 128}}))
    session = fake_session()
    run = question_ask(session=session, content="What is 6*7?")
    run_execute(run_id=run.pk)
    first, second = ModelCall.objects.filter(run=run).order_by("id")
    page, base = chromium_page, live_server_url

    page.goto(f"{base}/admin/login/?next=/admin/agent_sessions/run/{run.pk}/change/")
    page.get_by_label("Username").fill("olivia")
    page.get_by_label("Password").fill("olivia-password-1")
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("link", name="Context inspector").first.click()
    detail = page.locator(f"#call-{second.pk}")
    detail.get_by_text("First changed position: 2").wait_for()
    highlighted = detail.locator("tr.first-change")
    assert highlighted.count() == 1 and highlighted.get_attribute("id") == f"call-{second.pk}-m2"
    assert "first change" in highlighted.inner_text() and "new" in highlighted.inner_text()
    # Highlighted for the eye, not only in the markup: its cells differ from an unchanged row's.
    background = "row => getComputedStyle(row.querySelector('td')).backgroundColor"
    kept = detail.locator(f"#call-{second.pk}-m1")
    assert highlighted.evaluate(background) != kept.evaluate(background)
    assert detail.locator("dd[data-usage=cache_read]").inner_text().startswith("128")
    highlighted.scroll_into_view_if_needed()
    shoot(page, "inspector-diff")
    # The earlier call is one click away.
    detail.get_by_role("link", name=f"call #{first.pk}").click()
    page.wait_for_url(re.compile(rf"#call-{first.pk}$"))

    page.goto(f"{base}/admin/agents/agentversion/{session.version_id}/change/")
    page.get_by_role("link", name="Usage and cost").first.click()
    page.locator("svg.usage-chart").wait_for()
    assert page.locator("#totals tr[data-row=all] td[data-figure=cache_read]").inner_text() == "128"
    shoot(page, "usage")
