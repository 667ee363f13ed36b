"""The context meter and the compaction states in the chat, in a real browser at 1280 and
390 px: the meter never reads above its maximum and says what happens past the trigger;
one state at a time (no "Preparing a summary" beside the summarizing in progress); the
summarizing says how long it has taken and how it goes; Compact now is offered only when
it can start, and says why not; the meter's marks have a legend.
"""
from __future__ import annotations

import re
import threading

import pytest
from django.db import connections

from tests.browser.conftest import FAKE_KEY, LAST_RUN, SETTLED, ask, log_in, screenshot
from tests.fakes.fake_provider import chat_stream
from tests.fakes.summaries import is_summary
from tests.runloop.test_compaction import LONG, Provider
from tests.runloop.worker import wait_for

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]

WIDTHS = [1280, 390]
STATUS = "#chat-status"
NOTE = "#prepared-note"
PREPARING = "Preparing a summary of earlier messages in the background; you can go on meanwhile."


@pytest.fixture(params=WIDTHS, ids=lambda width: f"{width}px")
def page(request, page_factory):
    width = request.param
    return page_factory(width=width, height=800 if width > 500 else 780, mobile=width < 500)


def _session(space, alice, fake_provider, **policy):
    """A session on a 4,000-token window counted with tiktoken."""
    from agents.services import agent_create, agent_publish
    from models_catalog.models import ModelConnection
    from sessions.models import Session

    connection = ModelConnection.objects.create(
        space=space, name="Small", provider="openai", base_url=fake_provider.base_url, api_key=FAKE_KEY,
        model="gpt-4o-mini", context_window=4_000, max_output_tokens=1_024)
    agent = agent_create(space=space, name="Analyst", model_connection=connection, instructions="Be brief.",
                         tools=[], created_by=alice, **({"context_policy": policy} if policy else {}))
    version = agent_publish(agent=agent, published_by=alice)
    return Session.objects.create(space=space, user=alice, agent=agent, version=version)


@pytest.fixture
def session_4k(space, alice, fake_provider):
    """Under the default policy."""
    return _session(space, alice, fake_provider)


@pytest.fixture
def session_low_target(space, alice, fake_provider):
    """Aiming low, so that Compact now has something to summarize after two questions."""
    return _session(space, alice, fake_provider, target_ratio=0.2)


def _settled(number: int) -> str:
    return f"#transcript section.run:nth-of-type({number}):not([data-live])"


def _no_sideways_scroll(page) -> None:
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")


def test_the_meter_has_a_legend_for_its_marks_with_their_figures(page, server, session_4k):
    from agents.selectors import version_budget

    budget = version_budget(version=session_4k.version)
    log_in(page, server, next_path=f"/sessions/{session_4k.pk}/")
    legend = page.locator("#meter-legend")
    expect(legend.locator("summary")).to_have_text("What the marks mean")
    # The toggle leaves the figures room to be read on the one-line meter of a phone too.
    expect(page.locator("#context-figures")).to_contain_text(" of ")
    figures = page.locator("#context-figures").evaluate("f => f.getBoundingClientRect().width")
    assert figures >= 150, f"the meter's figures are {figures} px wide"
    legend.locator("summary").click()
    items = legend.locator("li")
    expect(items).to_have_count(4)
    # Left to right, as on the bar.
    expect(items.nth(0)).to_have_text(f"Down to about {budget['target_tokens']:,}: what a summary aims for")
    expect(items.nth(1)).to_have_text(
        f"From {budget['prepare_tokens']:,} tokens: a summary of earlier messages is prepared in the background")
    expect(items.nth(2)).to_have_text(
        f"At {budget['trigger_tokens']:,}: earlier messages are summarized before the next answer")
    expect(items.nth(3)).to_contain_text(f"End of the bar, {budget['effective_input_tokens']:,}: the most one request")
    # Each swatch is drawn as the mark it stands for.
    for name, row in (("target", 0), ("prepare", 1), ("trigger", 2)):
        mark = page.locator(f"[data-mark={name}]").evaluate("m => getComputedStyle(m).backgroundColor")
        assert items.nth(row).locator(".legend-swatch").evaluate("s => getComputedStyle(s).backgroundColor") == mark
    _no_sideways_scroll(page)
    screenshot(page, f"chat-meter-legend-{page.viewport_size['width']}")
    assert page.script_errors == []


def test_a_figure_above_the_maximum_reads_as_what_will_happen_and_the_bar_stops_at_its_end(
        page, server, session_4k, fake_provider):
    """A question under the trigger and a long answer: the next request holds more than
    one request may, as in the issue's "3,857 of 3,456"."""
    from agents.selectors import version_budget
    from sessions.models import RunEvent

    budget = version_budget(version=session_4k.version)
    fake_provider.handler = lambda request: chat_stream(["Growth is steady across the regions. " * 120])
    log_in(page, server, next_path=f"/sessions/{session_4k.pk}/")
    ask(page, "Question 1. " + LONG * 17)
    page.wait_for_selector(SETTLED, timeout=15_000)
    measured = RunEvent.objects.filter(run__session=session_4k, type="context_measured").order_by("-seq")[0].payload
    maximum = budget["effective_input_tokens"]
    assert measured["tokens"] > maximum  # the loop's own figure: the request sent plus its answer
    meter = page.get_by_role("meter", name="Context")
    figures = page.locator("#context-figures")
    for reloaded in (False, True):
        if reloaded:
            page.reload()
        expect(meter).to_have_js_property("value", maximum)
        expect(figures).to_contain_text(
            f"{measured['tokens']:,} tokens, more than the {maximum:,} one request may hold")
        expect(figures).to_contain_text("earlier messages will be summarized before the next answer")
        expect(figures).not_to_contain_text(f"{measured['tokens']:,} of {maximum:,}")
    _no_sideways_scroll(page)
    assert page.script_errors == []


def test_summarizing_is_one_state_with_its_progress_and_compact_now_waits_meanwhile(
        page, server, session_4k, fake_provider):
    """A summary is being prepared when the conversation outgrows it: the run waits for it.
    While it does, the chat says only that it summarizes, for how long, and Compact now
    says why it is not offered; once over, the run answers and Compact now is back."""
    from runloop.preparation import compaction_prepare
    from sessions.models import PreparedCompaction
    from sessions.services.dispatch import preparation_dispatcher_set

    summarize = threading.Event()  # the summary waits until the page has been looked at
    preparing: list[threading.Thread] = []

    def prepare(prepared_id: int) -> None:
        try:
            compaction_prepare(prepared_id=prepared_id)
        finally:
            connections.close_all()

    def dispatch(prepared_id: int) -> None:
        thread = threading.Thread(target=prepare, args=(prepared_id,), daemon=True)
        preparing.append(thread)
        thread.start()

    provider = Provider()

    def handler(request):
        if is_summary(request.json["messages"]):
            summarize.wait(timeout=60)
        return provider(request)

    fake_provider.handler = handler
    preparation_dispatcher_set(dispatch)
    compact = page.get_by_role("button", name="Compact now")
    status = page.locator(STATUS)
    try:
        log_in(page, server, next_path=f"/sessions/{session_4k.pk}/")
        number = 0
        while not PreparedCompaction.objects.filter(session=session_4k).exists():
            number += 1
            assert number <= 15, "the session never reached the prepare point"
            ask(page, f"Question {number}. {LONG * 3}")
            page.wait_for_selector(_settled(number), timeout=15_000)
        expect(page.locator(NOTE)).to_have_text(PREPARING)
        for asked in range(number + 1, number + 10):  # on, as each request still fits, until one does not
            ask(page, f"Question {asked}. {LONG * 3}")
            expect(page.locator(f"{LAST_RUN}[data-live='1']").or_(page.locator(_settled(asked)))).to_have_count(1)
            outgrown = wait_for(lambda asked=asked: page.locator(STATUS).inner_text().startswith("Summarizing")
                                or page.locator(_settled(asked)).count(), timeout=30)
            if outgrown is True:
                break
        else:
            pytest.fail("the conversation never outgrew the request's room")

        expect(status).to_have_text(re.compile(
            r"^Summarizing earlier messages \(finishing the summary prepared in the background\)… \d+ s$"))
        first = int(re.search(r"(\d+) s$", status.inner_text())[1])
        expect(status).to_have_text(re.compile(rf"… (?!{first} s)\d+ s$"))  # the time goes on: it is alive
        expect(page.locator(NOTE)).to_be_hidden()  # one state at a time
        expect(compact).to_be_disabled()
        expect(compact).to_have_accessible_description(
            re.compile("Not available: earlier messages are being summarized"))
        _no_sideways_scroll(page)
        screenshot(page, f"chat-summarizing-{page.viewport_size['width']}")

        summarize.set()
        page.wait_for_selector(_settled(asked), timeout=30_000)
        expect(status).not_to_contain_text("Summarizing")
        expect(compact).to_be_enabled()
        expect(compact).not_to_have_attribute("title", re.compile("."))
    finally:
        summarize.set()
        for thread in preparing:
            thread.join(timeout=20)
    assert page.script_errors == []


def test_compact_now_shows_how_its_summary_goes_and_is_not_offered_meanwhile(page, server, session_low_target,
                                                                             fake_provider):
    """A manual compaction whose first reply is no summary: the chat says it asks again."""
    from runloop.compaction_manual import compaction_manual
    from sessions.services.dispatch import compaction_dispatcher_set

    second = threading.Event()
    provider = Provider()
    replies = {"summary": 0}

    def handler(request):
        if is_summary(request.json["messages"]):
            replies["summary"] += 1
            if replies["summary"] == 1:
                return chat_stream([])  # an empty reply: asked again
            second.wait(timeout=60)
        return provider(request)

    threads: list[threading.Thread] = []

    def worker(run_id: int) -> None:
        def work() -> None:
            try:
                compaction_manual(run_id=run_id)
            finally:
                connections.close_all()

        threads.append(threading.Thread(target=work, daemon=True))
        threads[-1].start()

    fake_provider.handler = handler
    compaction_dispatcher_set(worker)
    compact = page.get_by_role("button", name="Compact now")
    status = page.locator(STATUS)
    try:
        log_in(page, server, next_path=f"/sessions/{session_low_target.pk}/")
        for number in (1, 2):
            ask(page, f"Question {number}. {LONG * 4}")
            page.wait_for_selector(_settled(number), timeout=15_000)
        page.get_by_label("Your question").focus()  # as after an answer: one press is enough, even on a phone
        compact.click()
        expect(page.locator("#chat-alert")).to_be_hidden()
        expect(status).to_have_text(re.compile(r"^Summarizing earlier messages, asking the model again… \d+ s$"))
        expect(compact).to_be_disabled()
        expect(page.locator(NOTE)).to_be_hidden()
        second.set()
        expect(status).to_have_text("Earlier messages were summarized.", timeout=15_000)
        expect(compact).to_be_enabled()
    finally:
        second.set()
        for thread in threads:
            thread.join(timeout=20)
    assert page.script_errors == []


def test_past_the_trigger_after_an_undo_the_meter_says_summarizing_is_held_back(page, server, session_low_target,
                                                                                 fake_provider):
    """CTX-51: the person undid the summary, so the next request past the trigger goes as it
    is; the meter does not promise a summary before the next answer."""
    from sessions.models import RunEvent

    fake_provider.handler = Provider()
    log_in(page, server, next_path=f"/sessions/{session_low_target.pk}/")
    for number in (1, 2):
        ask(page, f"Question {number}. {LONG * 4}")
        page.wait_for_selector(_settled(number), timeout=15_000)
    page.get_by_role("button", name="Compact now").click()
    expect(page.locator(STATUS)).to_have_text("Earlier messages were summarized.", timeout=15_000)
    undo = page.get_by_role("button", name="Undo summary")
    expect(undo).to_have_count(1)
    # On a phone the question box shrinks as it loses the focus, moving the transcript from
    # under a press that starts there; the box is left first (a layout matter of its own).
    page.get_by_label("Your question").blur()
    undo.click()
    expect(page.locator("#chat-alert")).to_be_hidden()
    expect(page.locator(STATUS)).to_contain_text("Summary undone", timeout=15_000)

    ask(page, f"Question 3. {LONG * 14}")  # past the trigger, still under the maximum
    page.wait_for_selector(_settled(3), timeout=15_000)
    skipped = [event.payload for event in RunEvent.objects.filter(run__session=session_low_target,
                                                                  type="compaction_skipped")]
    assert [payload["reason"] for payload in skipped] == ["held_after_undo"]
    figures = page.locator("#context-figures")
    expect(figures).to_contain_text(
        "summarizing is held back for now (you undid the last summary; it resumes once the conversation grows")
    expect(figures).not_to_contain_text("will be summarized before the next answer")
    assert page.script_errors == []
