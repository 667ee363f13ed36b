"""The chat in a real browser (SPEC §10, issue 8): the demo path, streaming, tool steps,
reload and dropped connections mid-answer, Stop, Resume, supplements, errors."""
from __future__ import annotations

import io
import re
import threading
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.browser.conftest import LAST_RUN, SETTLED, STREAMING, answer_text, ask, log_in, screenshot, words
from tests.browser.netdrop import DroppingProxy
from tests.fakes.fake_provider import chat_stream, error, sequence

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # WhiteNoise serves the static files with a synchronous iterator under ASGI (SPEC §1).
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]


def _transcript_words(page) -> str:
    """The transcript's text without the pin controls, which chat.js fills in when the
    session's pins arrive (after the page, and again after a run ends)."""
    return page.evaluate(
        """() => { const copy = document.querySelector("#transcript").cloneNode(true);
                   copy.querySelectorAll(".pin-button, .pin-mark").forEach((n) => n.remove());
                   document.body.appendChild(copy); const text = copy.innerText; copy.remove(); return text; }""")


def test_a_newcomer_logs_in_with_the_printed_credentials_and_the_demo_agent_computes_with_a_tool_step(
        page, server, monkeypatch):
    from django.core.management import call_command

    monkeypatch.delenv("DJANGO_SUPERUSER_USERNAME", raising=False)
    monkeypatch.delenv("DJANGO_SUPERUSER_PASSWORD", raising=False)
    printed = io.StringIO()
    call_command("bootstrap_demo", stdout=printed)
    username, password = re.search(r"username '([^']+)', password '([^']+)'", printed.getvalue()).groups()

    log_in(page, server, username, password)
    page.get_by_role("button", name="New chat with Demo assistant").click()
    expect(page.locator(".topbar .badge-demo")).to_have_text("Demo model")
    expect(page.locator(".demo-note")).to_contain_text("Offline demo model")

    ask(page, "What is 17*23?")
    page.wait_for_selector(SETTLED, timeout=15_000)
    assert "391" in answer_text(page)
    step = page.locator(f"{LAST_RUN} details.step").filter(has=page.locator(".step-name", has_text="calculator"))
    expect(step).to_have_count(1)
    expect(step.locator(".step-status")).to_have_text("done")
    expect(step.locator(".step-duration")).to_have_text(re.compile(r"^\d+(\.\d)? m?s$"))
    expect(step.locator(".step-body")).to_be_hidden()  # collapsed until opened
    before = _transcript_words(page)
    step.locator("summary").click()
    expect(step.locator(".step-body")).to_contain_text("391")
    screenshot(page, "chat-desktop-demo")

    page.reload()
    page.wait_for_selector(SETTLED)
    assert _transcript_words(page) == before  # the same transcript after a reload
    assert page.locator(".session-list a[aria-current=page]").inner_text().startswith("What is 17*23?")

    page.goto(f"{server.url}/admin/")
    expect(page.locator(".agentloom-start")).to_contain_text("Add a real model provider")
    screenshot(page, "admin-home")
    assert page.script_errors == []


def test_the_answer_streams_in_as_text_and_a_reload_mid_answer_loses_nothing(page, server, fake_session,
                                                                            fake_provider):
    session = fake_session()
    held = threading.Event()  # the answer stops after a few words until the reload was read
    fake_provider.handler = sequence(
        chat_stream(["Let me **check** ", "first."], reasoning=["Thinking it over."],
                    tool_calls=[{"id": "c1", "name": "calculator", "arguments": '{"expression": "6*7"}'}]),
        chat_stream(words(12), delay=0.06, hold=held, hold_after=8))
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "Count slowly")

    expect(page.locator(STREAMING)).to_contain_text("word3 ")
    expect(page.locator(STREAMING)).to_have_class(re.compile(r"\bplain\b"))  # deltas shown as text while streaming
    first = page.locator(f"{LAST_RUN} .bubble-assistant").first
    expect(first.locator("strong")).to_have_text("check")  # a finished step is swapped for the server's Markdown
    step = page.locator(f"{LAST_RUN} details.step")
    expect(step.locator(".step-status")).to_have_text("done")
    expect(page.locator(f"{LAST_RUN} details.thinking")).to_contain_text("Thinking it over.")

    page.reload()
    expect(page.locator(STREAMING)).to_contain_text("word3 ")  # replayed from the first event…
    assert page.locator(f"{LAST_RUN}[data-live]").count() == 1  # …and still streaming
    expect(page.locator(f"{LAST_RUN} .bubble-assistant").first.locator("strong")).to_have_text("check")
    expect(page.locator(f"{LAST_RUN} details.step .step-status")).to_have_text("done")

    held.set()
    page.wait_for_selector(SETTLED, timeout=15_000)
    assert answer_text(page) == "Let me check first. " + "".join(words(12)).strip()  # every word exactly once
    expect(page.locator(f"{LAST_RUN} .bubble-assistant").last).to_have_class(re.compile(r"\bmarkdown\b"))
    expect(page.locator(f"{LAST_RUN} details.step .step-duration")).to_have_text(re.compile(r"\d+ ms"))
    assert page.script_errors == []


def test_a_question_and_its_streamed_answer_take_one_request(page, server, fake_session, fake_provider):
    """Issue #29: the question's response carries its answer's events; the chat opens no
    event stream of its own while that response lasts."""
    session = fake_session()
    fake_provider.handler = sequence(chat_stream(words(12), delay=0.03))
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    asked, streams = [], []
    page.on("request", lambda request: asked.append(request) if request.url.endswith("/questions") else None)
    page.on("request", lambda request: streams.append(request.url) if "/events" in request.url else None)
    ask(page, "Count")
    page.wait_for_selector(SETTLED, timeout=15_000)
    assert answer_text(page) == "".join(words(12)).strip()
    assert len(asked) == 1 and asked[0].all_headers()["accept"] == "text/event-stream"
    assert streams == []
    assert page.script_errors == []


def test_a_dropped_connection_reconnects_with_last_event_id_and_misses_nothing(page, server, fake_session,
                                                                                fake_provider):
    session = fake_session()
    held = threading.Event()  # the rest of the answer comes once the stream was cut
    fake_provider.handler = sequence(chat_stream(words(12), delay=0.06, hold=held, hold_after=8))
    with DroppingProxy(server.port) as proxy:
        log_in(page, proxy, next_path=f"/sessions/{session.pk}/")
        streams = []
        page.on("request", lambda request: streams.append(request) if "/events" in request.url else None)
        ask(page, "Count slowly")
        expect(page.locator(STREAMING)).to_contain_text("word3 ")

        # The question's own response, which carried the events, is cut: the chat follows
        # the run from the last event it showed.
        assert proxy.drop() >= 1
        expect(page.locator("#chat-status")).to_contain_text("reconnecting", timeout=5_000)
        expect(page.locator("#chat-status")).to_contain_text("Reconnected", timeout=10_000)
        held.set()

        page.wait_for_selector(SETTLED, timeout=15_000)
    assert answer_text(page) == "".join(words(12)).strip()  # nothing lost, nothing twice
    assert int(parse_qs(urlsplit(streams[0].url).query)["after"][0]) > 1, streams[0].url  # past the words shown


def test_a_followed_stream_cut_off_is_resumed_by_the_browser_with_last_event_id(page, server, fake_session,
                                                                                fake_provider):
    session = fake_session()
    held = threading.Event()
    fake_provider.handler = sequence(chat_stream(words(12), delay=0.06, hold=held, hold_after=8))
    with DroppingProxy(server.port) as proxy:
        log_in(page, proxy, next_path=f"/sessions/{session.pk}/")
        ask(page, "Count slowly")
        expect(page.locator(STREAMING)).to_contain_text("word1 ")
        streams = []
        page.on("request", lambda request: streams.append(request) if "/events" in request.url else None)
        page.reload()  # a working run found on a page is followed with an EventSource, from its first event
        expect(page.locator(STREAMING)).to_contain_text("word3 ")

        assert proxy.drop() >= 1
        expect(page.locator("#chat-status")).to_contain_text("reconnecting", timeout=5_000)
        held.set()
        page.wait_for_selector(SETTLED, timeout=15_000)
    assert answer_text(page) == "".join(words(12)).strip()  # nothing lost, nothing twice
    resumed_from = [request.all_headers().get("last-event-id") for request in streams]
    assert resumed_from[0] is None and resumed_from[1].isdigit(), resumed_from  # the browser sent Last-Event-ID


def test_stop_keeps_the_partial_answer_and_resume_finishes_it(page, server, fake_session, fake_provider):
    session = fake_session()
    fake_provider.handler = sequence(chat_stream(words(80), delay=0.06), chat_stream(["Resumed ", "and done."]))
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "Talk for a while")
    expect(page.locator(STREAMING)).to_contain_text("word2 ")
    page.get_by_role("button", name="Stop").click()

    page.wait_for_selector(SETTLED, timeout=10_000)
    run = page.locator(LAST_RUN)
    expect(run.locator(".notice-stopped")).to_have_text("You stopped this answer.")
    # Said once: no note under the text, no status line repeating it.
    expect(run.locator(".note")).to_have_count(0)
    expect(page.locator("#chat-status")).to_have_text("")
    said = re.findall(r"[^\n]*topped[^\n]*", page.inner_text("#chat"))
    assert said == ["You stopped this answer.", "continues this answer where it stopped"], said  # + Resume's hint
    partial = answer_text(page)
    assert partial.startswith("word0 word1 word2") and "word79" not in partial
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    screenshot(page, "chat-stopped")

    run.get_by_role("button", name="Resume").click()
    expect(page.locator(SETTLED)).to_contain_text("Resumed and done.", timeout=10_000)
    expect(page.locator(LAST_RUN).get_by_role("button", name="Resume")).to_have_count(0)
    assert answer_text(page).startswith(partial)  # the stopped part stays, the resumed part follows


def test_a_supplement_sent_while_the_answer_runs_reaches_the_agent(page, server, fake_session, fake_provider):
    session = fake_session()
    held = threading.Event()  # the answer stops after a few words until the supplement was received
    fake_provider.handler = sequence(chat_stream(words(12), delay=0.06, hold=held, hold_after=8),
                                     chat_stream(["Noted: use metric units."]))
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "Plan a trip")
    expect(page.locator(STREAMING)).to_contain_text("word1 ")

    supplement = page.get_by_label("Add to the running answer (supplement)")
    supplement.fill("Please use metric units.")
    page.get_by_role("button", name="Send supplement").click()
    expect(page.locator(f"{LAST_RUN} .msg-supplement .who")).to_have_text(re.compile(r"supplement \((sent|received)\)"))
    expect(page.locator(f"{LAST_RUN} .msg-supplement .who")).to_have_text("You · supplement (received)")
    held.set()

    page.wait_for_selector(SETTLED, timeout=15_000)
    expect(page.locator(f"{LAST_RUN} .msg-supplement .bubble")).to_have_text("Please use metric units.")
    assert "Noted: use metric units." in answer_text(page)
    sent = fake_provider.requests[-1].json["messages"]
    assert any(m["role"] == "user" and "metric units" in str(m.get("content")) for m in sent)
    expect(page.get_by_label("Your question")).to_be_visible()  # back to asking


@pytest.mark.parametrize(("status", "title", "resumable"), [
    (401, "The model provider refused the API key", False),
    (429, "Rate-limited by the model provider", True),
    (503, "The model provider is down or not answering", True),
])
def test_a_failed_run_shows_a_clear_error_instead_of_silence(page, server, fake_session, fake_provider,
                                                             status, title, resumable):
    session = fake_session()
    fake_provider.handler = lambda request: error(status, "upstream says no", code="whatever")
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "Hello?")

    page.wait_for_selector(SETTLED, timeout=15_000)
    box = page.locator(f"{LAST_RUN} .error-box")
    expect(box.locator(".error-title")).to_have_text(title)
    expect(page.locator(f"{LAST_RUN}").get_by_role("button", name="Resume")).to_have_count(1 if resumable else 0)
    assert "upstream says no" not in page.inner_text("body")  # the provider's body never reaches the page
    screenshot(page, f"chat-error-{status}")
    page.reload()
    expect(page.locator(f"{LAST_RUN} .error-box .error-title")).to_have_text(title)
