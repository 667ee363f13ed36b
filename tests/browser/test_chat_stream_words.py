"""LOOP-5 in the browser: what a person reads under the chat while the stream has trouble: a provider
retry says "asking again in N s" (its event is never taken for a lost connection), a dropped
stream says it reconnects and then that it did, and an unreachable server says so after a
few tries, for as long as it is, and that nothing is lost."""
from __future__ import annotations

import threading

import pytest

from tests.browser.conftest import LAST_RUN, SETTLED, STREAMING, answer_text, ask, log_in, words
from tests.browser.netdrop import DroppingProxy
from tests.fakes.fake_provider import chat_stream, error, sequence

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]
STATUS = "#chat-status"
# Every text the status line showed, in order (a MutationObserver: a text replaced at once
# by another is still seen).
RECORD_STATUS = """() => {
  const status = document.querySelector('#chat-status');
  window.statusSeen = [];
  new MutationObserver(() => window.statusSeen.push(status.textContent))
    .observe(status, {childList: true, characterData: true, subtree: true});
}"""


@pytest.mark.parametrize(("status", "title"), [(429, "The model provider asked us to slow down"),
                                               (503, "The model server did not answer")])
def test_a_provider_retry_says_retrying_in_n_seconds_and_never_connection_lost(page, server, fake_session,
                                                                                fake_provider, status, title):
    session = fake_session()
    fake_provider.handler = sequence(error(status, "busy", retry_after="2"), chat_stream(["Here it is."]))
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    page.evaluate(RECORD_STATUS)
    ask(page, "Hello?")

    expect(page.locator(STATUS)).to_have_text(f"{title} — asking again in 2 s… Nothing is lost.")
    page.wait_for_selector(SETTLED, timeout=15_000)
    assert answer_text(page) == "Here it is."
    expect(page.locator(STATUS)).to_have_text("Answer complete.")
    seen = page.evaluate("window.statusSeen")
    assert not any("Connection lost" in text for text in seen), seen
    assert page.script_errors == []


def test_a_dropped_stream_says_it_reconnects_then_that_it_did(page, server, fake_session, fake_provider):
    session = fake_session()
    held = threading.Event()  # the rest of the answer comes once the stream was cut
    fake_provider.handler = sequence(chat_stream(words(12), delay=0.06, hold=held, hold_after=8))
    with DroppingProxy(server.port) as proxy:
        log_in(page, proxy, next_path=f"/sessions/{session.pk}/")
        page.evaluate(RECORD_STATUS)
        ask(page, "Count slowly")
        expect(page.locator(STREAMING)).to_contain_text("word3 ")
        assert proxy.drop() >= 1
        page.wait_for_function("window.statusSeen.includes('Connection lost — reconnecting…')")
        held.set()
        page.wait_for_selector(SETTLED, timeout=15_000)
    seen = page.evaluate("window.statusSeen")
    assert "Connection lost — reconnecting…" in seen, seen
    assert "Reconnected. Working…" in seen[seen.index("Connection lost — reconnecting…"):], seen
    expect(page.locator(STATUS)).to_have_text("Answer complete.")
    assert answer_text(page) == "".join(words(12)).strip()


def test_an_unreachable_server_says_the_connection_is_lost_until_it_comes_back(page, server, fake_session,
                                                                               fake_provider):
    session = fake_session()
    held = threading.Event()  # the rest of the answer comes once the server is reachable again
    fake_provider.handler = sequence(chat_stream(words(12), delay=0.06, hold=held, hold_after=8))
    with DroppingProxy(server.port) as proxy:
        log_in(page, proxy, next_path=f"/sessions/{session.pk}/")
        ask(page, "Count slowly")
        expect(page.locator(STREAMING)).to_contain_text("word3 ")
        page.evaluate(RECORD_STATUS)
        proxy.unplug()
        expect(page.locator(STATUS)).to_have_text("Connection lost — reconnecting…")
        # The browser tries again (the stream's retry is 2 s) and is turned away each time:
        # after a few tries the words say the server cannot be reached, and what to do.
        expect(page.locator(STATUS)).to_have_text(
            "The server cannot be reached — still trying. Nothing is lost; check your connection.", timeout=15_000)
        assert page.locator(f"{LAST_RUN} .error-box").count() == 0
        proxy.plug()
        held.set()
        page.wait_for_selector(SETTLED, timeout=20_000)
    seen = page.evaluate("window.statusSeen")
    assert "Reconnected. Working…" in seen, seen
    expect(page.locator(STATUS)).to_have_text("Answer complete.")
    assert answer_text(page) == "".join(words(12)).strip()


def test_cat11_a_question_waiting_for_a_one_slot_model_server_says_so_then_is_answered(page, server, fake_session,
                                                                                       fake_provider):
    from models_catalog.models import ModelConnection
    from models_catalog.slots import slot_acquire

    session = fake_session()
    ModelConnection.objects.filter(pk=session.agent.model_connection_id).update(concurrency=1,
                                                                               concurrency_source="server_kind")
    fake_provider.handler = sequence(chat_stream(["Your turn came."]))
    busy = slot_acquire(base_url=fake_provider.base_url, concurrency=1)  # someone else's answer is streaming
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    page.evaluate(RECORD_STATUS)
    ask(page, "Hello?")
    expect(page.locator(STATUS)).to_have_text("Waiting for the model server (it answers one request at a time)…")
    assert fake_provider.requests == []
    assert busy is not None
    busy.release()
    page.wait_for_selector(SETTLED, timeout=20_000)
    assert answer_text(page) == "Your turn came."
    expect(page.locator(STATUS)).to_have_text("Answer complete.")
    assert page.script_errors == []
