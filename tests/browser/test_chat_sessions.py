"""A person's sessions in a real browser, at a desk's width and a phone's: rename from the
chat's heading and from the sidebar, delete after a confirmation (refused while an answer
runs, then moving on to the next chat), search by title and question text (live, and as a
plain form without script), no empty "New chat" left in the list, and files attached but
not sent showing again after a reload, each removable."""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from sessions.models import Run, Session, SessionFile
from sessions.services.dispatch import dispatcher_get, dispatcher_set
from sessions.services.questions import question_ask
from sessions.services.runs import run_finish
from tests.browser.conftest import LAST_RUN, SETTLED, STREAMING, ask, log_in, screenshot, words
from tests.fakes.fake_provider import chat_stream, sequence
from tests.sessions.helpers import answer, claim

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # WhiteNoise serves the static files with a synchronous iterator under ASGI (SPEC §1).
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]

WIDTHS = [pytest.param(1280, id="desk"), pytest.param(390, id="phone")]


@contextmanager
def not_dispatched() -> Iterator[None]:
    """Questions asked here are answered by the test itself, not by a worker thread."""
    kept = dispatcher_get()
    dispatcher_set(None)
    try:
        yield
    finally:
        dispatcher_set(kept)


def asked(session: Session, *questions: str) -> Session:
    with not_dispatched():
        for index, question in enumerate(questions):
            run = claim(question_ask(session=session, content=question))
            answer(run, f"Answer {index}", f"a{index}")
            assert run_finish(run=run, status=Run.Status.COMPLETED)
    session.refresh_from_db()
    return session


def open_page(page_factory, server, width: int, path: str):
    page = page_factory(width=width, height=850, mobile=width < 500)
    log_in(page, server, next_path=path)
    return page


def sidebar(page, width: int):
    """The sessions sidebar, opened first on a phone."""
    if width < 900 and page.get_by_role("button", name="Sessions").get_attribute("aria-expanded") != "true":
        page.get_by_role("button", name="Sessions").click()
    expect(page.locator("#sidebar")).to_be_visible()
    return page.locator("#sidebar")


def entry(page, session: Session):
    return page.locator(f"#sidebar .session-item[data-session-id='{session.pk}']")


def no_sideways_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_chat_is_renamed_from_its_heading_and_from_the_sidebar(width, page_factory, server, make_session, alice):
    trip = asked(make_session(alice), "Plan a trip to Lisbon")
    other = asked(make_session(alice), "Something else")
    page = open_page(page_factory, server, width, f"/sessions/{trip.pk}/")
    heading = page.locator(".session-title")
    expect(heading).to_have_text("Plan a trip to Lisbon")

    page.get_by_role("button", name="Rename this chat").click()
    name = page.locator(".session-head").get_by_label("New name for this chat")
    expect(name).to_be_focused()
    name.fill("   ")
    name.press("Enter")  # refused by the server, in its words; nothing changes
    expect(page.locator(".session-head .rename-error")).to_have_text(
        "Give the chat a name: the name cannot be empty.")
    name.fill("Lisbon in May")
    screenshot(page, f"sessions-rename-{width}")
    name.press("Enter")
    expect(heading).to_have_text("Lisbon in May")
    expect(page.get_by_role("button", name="Rename this chat")).to_be_focused()
    expect(page).to_have_title("Lisbon in May · AgentLoom")
    expect(entry(page, trip).locator(".session-name")).to_have_text("Lisbon in May")
    trip.refresh_from_db()
    assert trip.title == "Lisbon in May"

    sidebar(page, width)
    entry(page, other).get_by_role("button", name="Rename Something else").click()
    field = entry(page, other).get_by_label("New name for this chat")
    field.fill("Esc keeps the name")
    field.press("Escape")  # cancels the rename (and closes nothing else)
    expect(entry(page, other).locator(".session-name")).to_have_text("Something else")
    entry(page, other).get_by_role("button", name="Rename Something else").click()
    entry(page, other).get_by_label("New name for this chat").fill("Groceries")
    entry(page, other).get_by_role("button", name="Save").click()
    expect(entry(page, other).locator(".session-name")).to_have_text("Groceries")
    expect(heading).to_have_text("Lisbon in May")  # the open chat is another one
    other.refresh_from_db()
    assert other.title == "Groceries"
    assert no_sideways_scroll(page)

    page.reload()
    expect(heading).to_have_text("Lisbon in May")
    assert page.script_errors == []


@pytest.mark.parametrize("width", WIDTHS)
def test_a_chat_is_deleted_after_a_confirmation_not_while_it_answers_and_the_page_moves_on(
        width, page_factory, server, make_session, alice, fake_session, fake_provider):
    older = asked(make_session(alice), "An older chat")
    working = fake_session()
    held = threading.Event()
    fake_provider.handler = sequence(chat_stream(words(12), delay=0.05, hold=held, hold_after=4))
    page = open_page(page_factory, server, width, f"/sessions/{working.pk}/")
    ask(page, "Count slowly")
    expect(page.locator(STREAMING)).to_contain_text("word0 ")

    page.get_by_role("button", name="Delete this chat").click()
    dialog = page.get_by_role("dialog", name="Delete this chat?")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("“Count slowly”: its questions, answers and attached files are erased for good.")
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    screenshot(page, f"sessions-delete-confirm-{width}")
    dialog.get_by_role("button", name="Delete").click()
    expect(dialog.get_by_role("alert")).to_have_text(
        "An answer is still running in this chat. Stop it, then delete the chat.")
    page.keyboard.press("Escape")  # closes the dialog; the answer goes on
    expect(dialog).to_be_hidden()
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    assert Session.objects.filter(pk=working.pk).exists()

    held.set()
    page.wait_for_selector(SETTLED, timeout=15_000)
    page.get_by_role("button", name="Delete this chat").click()
    dialog.get_by_role("button", name="Delete").click()
    page.wait_for_url(f"{server.url}/sessions/{older.pk}/")  # the next chat of the list
    assert not Session.objects.filter(pk=working.pk).exists()
    expect(entry(page, older)).to_have_count(1)
    expect(page.locator(f"#sidebar .session-item[data-session-id='{working.pk}']")).to_have_count(0)

    sidebar(page, width)
    entry(page, older).get_by_role("button", name="Delete An older chat").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    page.wait_for_url(f"{server.url}/")  # nothing left: home
    expect(page.locator("#sidebar")).to_contain_text("No sessions yet.")
    assert Session.objects.filter(user=alice).count() == 0
    assert page.script_errors == []


@pytest.mark.parametrize("width", WIDTHS)
def test_the_sidebar_search_filters_by_title_and_question_text_as_one_types(width, page_factory, server,
                                                                             make_session, alice, bob):
    trip = asked(make_session(alice), "Plan a trip to Lisbon")
    bread = asked(make_session(alice), "Hello there", "How long does a sourdough starter need?")
    asked(make_session(bob), "Bob's sourdough secrets")
    page = open_page(page_factory, server, width, f"/sessions/{trip.pk}/")
    side = sidebar(page, width)
    items = side.locator(".session-item")
    expect(items).to_have_count(2)

    side.get_by_label("Search your sessions").fill("SOURDOUGH")  # a later question of "Hello there"
    expect(items).to_have_count(1)
    expect(items.first.locator(".session-name")).to_have_text("Hello there")
    expect(page.locator("#session-search-status")).to_have_text("1 session matches.")
    screenshot(page, f"sessions-search-{width}")
    side.get_by_label("Search your sessions").fill("zebra")
    expect(side).to_contain_text("No session matches “zebra”")
    side.get_by_label("Search your sessions").fill("")
    expect(items).to_have_count(2)
    expect(entry(page, trip).locator("a")).to_have_attribute("aria-current", "page")
    assert no_sideways_scroll(page)
    items.filter(has_text="Hello there").locator("a").click()
    page.wait_for_url(f"{server.url}/sessions/{bread.pk}/")
    assert page.script_errors == []


def test_the_search_works_without_script_as_a_plain_form(browser, server, make_session, alice):
    trip = asked(make_session(alice), "Plan a trip to Lisbon")
    asked(make_session(alice), "Hello there")
    context = browser.new_context(viewport={"width": 1280, "height": 850}, java_script_enabled=False)
    try:
        page = context.new_page()
        log_in(page, server)
        page.get_by_label("Search your sessions").fill("lisbon")
        page.get_by_role("button", name="Search").click()
        page.wait_for_url(f"{server.url}/?q=lisbon")
        items = page.locator("#sidebar .session-item")
        expect(items).to_have_count(1)
        expect(items.locator("a")).to_have_attribute("href", f"/sessions/{trip.pk}/")
        expect(items.get_by_role("button", name="Delete Plan a trip to Lisbon")).to_be_hidden()  # needs the script
    finally:
        context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_new_chat_leaves_no_empty_entry_and_a_file_attached_before_a_reload_shows_again_removable(
        width, page_factory, server, agent, version, alice):
    page = open_page(page_factory, server, width, f"/sessions/new?agent={agent.pk}")
    page.get_by_label("Attach").set_input_files([
        {"name": "notes.txt", "mimeType": "text/plain", "buffer": b"first notes\n"},
        {"name": "more.txt", "mimeType": "text/plain", "buffer": b"more notes\n"}])
    chips = page.locator("#attachment-chips .chip")
    expect(chips.filter(has_text="notes.txt").first).to_have_attribute("data-state", "ready")
    expect(chips.filter(has_text="more.txt")).to_have_attribute("data-state", "ready")
    session = Session.objects.get(user=alice)
    page.wait_for_url(f"{server.url}/sessions/{session.pk}/")

    page.reload()  # the files attached are still there, as chips with their ×
    expect(chips).to_have_count(2)
    expect(chips.filter(has_text="more.txt")).to_have_attribute("data-state", "ready")
    expect(chips.filter(has_text="more.txt")).to_contain_text("11 bytes")
    screenshot(page, f"sessions-pending-files-{width}")
    page.get_by_role("button", name="Remove more.txt").click()
    expect(chips).to_have_count(1)
    assert list(SessionFile.objects.filter(session=session).values_list("name", flat=True)) == ["notes.txt"]

    page.goto(f"{server.url}/")  # not listed while nothing was asked in it
    side = sidebar(page, width)
    expect(side.locator(".session-item")).to_have_count(0)
    side.get_by_role("link", name="New chat with Helper").click()  # reopens it: no second empty chat
    page.wait_for_url(f"{server.url}/sessions/{session.pk}/")
    expect(chips).to_have_count(1)
    expect(chips.first).to_contain_text("notes.txt")
    assert Session.objects.filter(user=alice).count() == 1

    ask(page, "What do my notes say?")  # the first question names it, and lists it
    page.wait_for_selector(SETTLED, timeout=15_000)
    expect(page.locator(f"{LAST_RUN} .msg-user .attachment")).to_contain_text("notes.txt")
    expect(chips).to_have_count(0)
    expect(page.locator(".session-title")).to_have_text("What do my notes say?")
    page.reload()
    expect(entry(page, session)).to_have_count(1)
    expect(chips).to_have_count(0)  # sent: the question's now
    assert no_sideways_scroll(page)
    assert page.script_errors == []
