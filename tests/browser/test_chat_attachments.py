"""Attaching files to a question in a real browser (RUN-13), at a desk's width and a
phone's: by the Attach button (mouse or keyboard) and by drag-and-drop, each file
uploading at once with a progress bar and becoming a chip (name, size, a preview for an
image, a remove × that deletes the unsent upload and frees its room, or says why it could
not); a refused file says why in words; the question goes with its files
and shows them — after a reload too — with thumbnails from the download address under the
page's Content-Security-Policy (``img-src`` takes the previews' ``blob:`` URLs)."""
from __future__ import annotations

import re
import struct
import zlib

import pytest

from sessions.models import SessionFile, SessionMessage
from tests.browser.conftest import LAST_RUN, SETTLED, ask, log_in, screenshot
from tests.fakes.fake_provider import chat_stream, sequence

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # WhiteNoise serves the static files with a synchronous iterator under ASGI (SPEC §1).
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]



def png(width: int, height: int) -> bytes:
    """A real PNG (red pixels): the server sniffs the bytes, not the name, and the browser draws it."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


PNG = png(2, 2)
LOG = b"2026-12-01 12:00:00 ERROR disk full on /var\n" * 40
ZIP = b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + b"\x00" * 40
WIDTHS = [pytest.param(1280, id="desk"), pytest.param(390, id="phone")]


def open_chat(page_factory, server, session, width: int):
    page = page_factory(width=width, height=850, mobile=width < 500)
    page.csp_refusals = []
    page.on("console", lambda message: page.csp_refusals.append(message.text)
            if "Content Security Policy" in message.text else None)
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    return page


def chip(page, name: str):
    return page.locator("#attachment-chips .chip", has_text=name)


def file(name: str, mime: str, data: bytes) -> dict:
    return {"name": name, "mimeType": mime, "buffer": data}


def no_sideways_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


@pytest.mark.parametrize("width", WIDTHS)
def test_files_chosen_with_the_attach_button_upload_with_progress_and_go_with_the_question(
        width, page_factory, server, fake_session, fake_provider):
    session = fake_session()
    fake_provider.handler = sequence(chat_stream(["The disk is full."]))
    page = open_chat(page_factory, server, session, width)

    held = []  # the first upload waits here, so its progress bar can be seen
    page.route("**/api/v1/sessions/*/files", lambda route: held.append(route) if not held else route.continue_())
    page.get_by_label("Attach").set_input_files([file("app.log", "text/plain", LOG)])
    uploading = chip(page, "app.log")
    expect(uploading).to_have_attribute("data-state", "uploading")
    expect(uploading.get_by_role("progressbar", name="Uploading app.log")).to_be_visible()
    held[0].continue_()
    expect(uploading).to_have_attribute("data-state", "ready")
    expect(uploading).to_contain_text("2 KB")  # its size, in words
    expect(uploading.get_by_role("progressbar")).to_have_count(0)

    page.get_by_label("Attach").set_input_files([file("screen.png", "image/png", PNG),
                                                file("draft.txt", "text/plain", b"not this one")])
    picture = chip(page, "screen.png")
    expect(picture).to_have_attribute("data-state", "ready")
    preview = picture.locator("img.chip-preview")
    assert preview.get_attribute("src").startswith("blob:")  # the person's own file, drawn locally
    page.wait_for_function("img => img.complete && img.naturalWidth === 2", arg=preview.element_handle())
    assert uploading.locator("img").count() == 0  # no preview for text

    expect(chip(page, "draft.txt")).to_have_attribute("data-state", "ready")
    page.get_by_role("button", name="Remove draft.txt").click()
    expect(chip(page, "draft.txt")).to_have_count(0)
    assert no_sideways_scroll(page)
    screenshot(page, f"attachments-chips-{width}")

    sent = {int(chip(page, name).get_attribute("data-file-id")) for name in ("app.log", "screen.png")}
    ask(page, "What do these say?")
    page.wait_for_selector(SETTLED, timeout=15_000)
    expect(page.locator("#attachment-chips")).to_be_hidden()  # the chips went with the question

    question = SessionMessage.objects.get(session=session, kind="user")
    assert {item["id"] for item in question.message["attachments"]} == sent
    stored = sorted(f.name for f in SessionFile.objects.filter(session=session))
    assert stored == ["app.log", "screen.png"]  # draft.txt: uploaded, removed, deleted

    for attempt in ("sent", "reloaded"):
        files = page.locator(f"{LAST_RUN} .msg-user .attachment")
        expect(files).to_have_count(2)
        log_item, picture_item = files.nth(0), files.nth(1)
        expect(log_item).to_contain_text("app.log")
        expect(log_item).to_contain_text("text · 2 KB")
        expect(picture_item).to_contain_text(f"image · {len(PNG)} bytes")
        assert log_item.locator("img").count() == 0
        thumb = picture_item.locator("img.attachment-thumb")
        picture_id = int(picture_item.get_attribute("data-file-id"))
        assert thumb.get_attribute("src") == f"/api/v1/files/{picture_id}"
        page.wait_for_function("img => img.complete && img.naturalWidth === 2", arg=thumb.element_handle())
        for item, name in ((log_item, "app.log"), (picture_item, "screen.png")):
            link = item.get_by_role("link", name=f"Download {name}")
            assert link.get_attribute("download") == name
        with page.expect_download() as download:
            log_item.get_by_role("link", name="Download app.log").click()
        assert download.value.suggested_filename == "app.log"
        assert no_sideways_scroll(page), attempt
        if attempt == "sent":
            page.reload()
            page.wait_for_selector(SETTLED)
    screenshot(page, f"attachments-sent-{width}")
    assert page.csp_refusals == [] and page.script_errors == []


@pytest.mark.parametrize("width", WIDTHS)
def test_files_dropped_on_the_composer_or_the_conversation_are_attached(
        width, page_factory, server, fake_session):
    session = fake_session()
    page = open_chat(page_factory, server, session, width)
    for target, name in (("#composer", "notes.md"), ("#transcript", "data.csv")):
        dropped = page.evaluate_handle(
            "([name]) => { const t = new DataTransfer(); t.items.add(new File(['a,b\\n1,2\\n'], name,"
            " {type: 'text/plain'})); return t; }", [name])
        page.dispatch_event(target, "dragenter", {"dataTransfer": dropped})
        expect(page.locator(target)).to_have_class(re.compile(r"\bdropping\b"))
        page.dispatch_event(target, "drop", {"dataTransfer": dropped})
        expect(page.locator(target)).not_to_have_class(re.compile(r"\bdropping\b"))
        expect(chip(page, name)).to_have_attribute("data-state", "ready")
    assert SessionFile.objects.filter(session=session).count() == 2
    assert page.url.endswith(f"/sessions/{session.pk}/")  # the page was not replaced by the file
    assert page.script_errors == []


@pytest.mark.parametrize("width", WIDTHS)
def test_a_refused_file_says_why_on_its_chip_and_holds_the_question_until_removed(
        width, page_factory, server, fake_session, fake_provider, settings):
    session = fake_session()
    fake_provider.handler = sequence(chat_stream(["Fine."]))
    settings.AGENTLOOM_FILE_MAX_BYTES = 1_000
    page = open_chat(page_factory, server, session, width)
    page.get_by_label("Attach").set_input_files([file("app.zip", "application/zip", ZIP),
                                                file("big.log", "text/plain", LOG)])
    refused = chip(page, "app.zip")
    expect(refused).to_have_attribute("data-state", "failed")
    expect(refused.get_by_role("alert")).to_have_text(
        "app.zip: this kind of file cannot be attached — text, PDF and images can.")
    too_big = chip(page, "big.log")
    expect(too_big).to_have_attribute("data-state", "failed")
    expect(too_big.get_by_role("alert")).to_contain_text("big.log: this file is too large to attach.")
    assert no_sideways_scroll(page)
    screenshot(page, f"attachments-refused-{width}")

    ask(page, "Read the archive")
    expect(page.locator("#chat-alert")).to_have_text(
        "Remove the files that could not be attached (marked in red), then send.")
    assert not SessionMessage.objects.filter(session=session, kind="user").exists()
    page.get_by_role("button", name="Remove app.zip").click()
    page.get_by_role("button", name="Remove big.log").click()
    expect(page.get_by_label("Attach")).to_be_focused()  # the last remove hands focus back
    page.get_by_label("Your question").press("Enter")
    page.wait_for_selector(SETTLED, timeout=15_000)
    assert SessionFile.objects.filter(session=session).count() == 0


def test_a_file_refused_only_for_now_is_sent_again_when_the_server_says(page_factory, server, fake_session):
    """Many files at once: the server reads a few of one person's at a time and refuses the
    rest for now (429, or 503 when it is full, with Retry-After — core/slow_work.py);
    the chip stays uploading and the file goes again, once."""
    session = fake_session()
    page = open_chat(page_factory, server, session, 1280)
    refusals: list[str] = []

    def busy_once(route) -> None:
        if refusals:
            route.continue_()
            return
        refusals.append(route.request.url)
        route.fulfill(status=429, headers={"Retry-After": "1", "Content-Type": "application/json"},
                      body='{"error": {"code": "too_many_at_once", "message": "Try again in a few seconds."}}')

    page.route("**/api/v1/sessions/*/files", busy_once)
    page.get_by_label("Attach").set_input_files([file("app.log", "text/plain", LOG)])
    waiting = chip(page, "app.log")
    expect(waiting).to_have_attribute("data-state", "ready", timeout=15_000)
    assert len(refusals) == 1
    assert SessionFile.objects.filter(session=session).count() == 1
    assert page.script_errors == []


def test_the_keyboard_alone_attaches_a_file_and_removes_it(page_factory, server, fake_session):
    session = fake_session()
    page = open_chat(page_factory, server, session, 1280)
    # Playwright takes over file choosers only once a listener is registered, and turning
    # that on travels beside the key press: registered here, it is on before the round trips
    # below, so the chooser the key opens is always the one the test receives.
    page.on("filechooser", lambda _chooser: None)
    expect(page.get_by_label("Your question")).to_be_focused()  # the chat is ready: it focuses the box on load
    page.keyboard.press("Tab")
    expect(page.get_by_label("Attach")).to_be_focused()
    outline = page.evaluate("getComputedStyle(document.querySelector('.attach-button')).outlineStyle")
    assert outline == "solid"  # the visible button shows where the focus is
    with page.expect_file_chooser() as chooser:
        page.keyboard.press("Space")
    chooser.value.set_files([file("notes.txt", "text/plain", b"remember the milk")])
    expect(chip(page, "notes.txt")).to_have_attribute("data-state", "ready")
    page.get_by_role("button", name="Remove notes.txt").focus()
    page.keyboard.press("Enter")
    expect(chip(page, "notes.txt")).to_have_count(0)
    expect(page.get_by_label("Attach")).to_be_focused()


def test_a_new_chat_starts_its_session_with_the_first_file_and_sends_it_with_the_first_question(
        page_factory, server, fake_session, fake_provider):
    agent_session = fake_session()
    agent_session.delete()  # only its agent is needed: New chat would reopen an empty session of it
    fake_provider.handler = sequence(chat_stream(["A log of a full disk."]))
    page = page_factory(width=1280)
    log_in(page, server, next_path=f"/sessions/new?agent={agent_session.agent_id}")
    page.get_by_label("Attach").set_input_files([file("app.log", "text/plain", LOG)])
    expect(chip(page, "app.log")).to_have_attribute("data-state", "ready")
    started = SessionFile.objects.get().session
    assert started.pk != agent_session.pk and started.user.username == "alice"
    assert page.url.endswith(f"/sessions/{started.pk}/")  # a reload now finds this chat
    ask(page, "What is this?")
    page.wait_for_url(f"{server.url}/sessions/{started.pk}/")
    page.wait_for_selector(SETTLED, timeout=15_000)
    expect(page.locator(f"{LAST_RUN} .msg-user .attachment")).to_contain_text("app.log")
    assert SessionMessage.objects.get(session=started, kind="user").message["attachments"][0]["name"] == "app.log"


def test_the_chat_page_allows_blob_images_and_nothing_else_new(server, page_factory, fake_session):
    from web.security import CONTENT_SECURITY_POLICY

    session = fake_session()
    page = page_factory()
    log_in(page, server, next_path="/")
    response = page.goto(f"{server.url}/sessions/{session.pk}/")
    policy = response.headers["content-security-policy"]
    assert policy == CONTENT_SECURITY_POLICY
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["img-src"] == "'self' data: blob:"
    assert "blob:" not in policy.replace(directives["img-src"], "")  # scripts, frames, workers: never
    assert "'unsafe-inline'" not in policy


def test_a_thumbnail_is_drawn_only_for_a_raster_type_the_server_sniffed():
    from web.attachments import attachment_views

    views = attachment_views({"role": "user", "content": "see", "attachments": [
        {"id": 1, "name": "a.png", "content_type": "image/png", "size": 10, "kind": "image", "data": "…"},
        {"id": 2, "name": "b.svg", "content_type": "image/svg+xml", "size": 10, "kind": "image"},
        {"id": 3, "name": "c.png", "content_type": "text/plain", "size": 2048, "kind": "text"},
        {"id": "4", "name": "no id"}, "junk"]})
    assert [(v.id, v.thumbnail, v.kind_label, v.size_label) for v in views] == [
        (1, True, "image", "10 bytes"), (2, False, "image", "10 bytes"), (3, False, "text", "2 KB")]
    assert views[0].url == "/api/v1/files/1"


def test_removing_a_chip_deletes_its_upload_and_frees_its_room(page_factory, server, fake_session, fake_provider,
                                                                settings):
    session = fake_session()
    fake_provider.handler = sequence(chat_stream(["Noted."]))
    settings.AGENTLOOM_SESSION_FILES_MAX_BYTES = 3_000
    page = open_chat(page_factory, server, session, 1280)
    page.get_by_label("Attach", exact=True).set_input_files([file("first.log", "text/plain", b"a" * 2_000)])
    expect(chip(page, "first.log")).to_have_attribute("data-state", "ready")
    page.get_by_label("Attach", exact=True).set_input_files([file("second.log", "text/plain", b"b" * 1_500)])
    full = chip(page, "second.log")
    expect(full.get_by_role("alert")).to_have_text("second.log: this chat has no room for more files. "
                                                   "Remove a file attached here (its ×) to make room, "
                                                   "or start a new chat for this one.")

    page.get_by_role("button", name="Remove second.log").click()
    page.get_by_role("button", name="Remove first.log").click()
    expect(page.locator("#attachment-chips .chip")).to_have_count(0)  # each gone once the server said so
    assert not SessionFile.objects.filter(session=session).exists()
    page.get_by_label("Attach", exact=True).set_input_files([file("second.log", "text/plain", b"b" * 1_500),
                                                file("third.log", "text/plain", b"c" * 1_000)])
    expect(chip(page, "second.log")).to_have_attribute("data-state", "ready")  # the room first.log held
    expect(chip(page, "third.log")).to_have_attribute("data-state", "ready")

    # A remove that does not reach the server says so; the file stays stored but is not sent.
    page.route("**/api/v1/files/*", lambda route: route.abort() if route.request.method == "DELETE"
               else route.continue_())
    page.get_by_role("button", name="Remove third.log").click()
    unremoved = chip(page, "third.log")
    expect(unremoved).to_have_attribute("data-state", "unremoved")
    expect(unremoved.get_by_role("alert")).to_have_text(
        "third.log: could not be removed — the server was not reached. Check your connection, then press × again. "
        "It will not be sent.")
    assert no_sideways_scroll(page)
    screenshot(page, "attachments-unremoved-1280")
    ask(page, "Keep the second one")
    page.wait_for_selector(SETTLED, timeout=15_000)
    question = SessionMessage.objects.get(session=session, kind="user")
    assert [item["name"] for item in question.message["attachments"]] == ["second.log"]
    assert SessionFile.objects.filter(session=session, question_seq__isnull=True).count() == 1  # third.log

    # Files already sent stay: with no chip to remove, the full chat says to start a new one.
    page.get_by_label("Attach", exact=True).set_input_files([file("fourth.log", "text/plain", b"d" * 1_600)])
    expect(chip(page, "fourth.log").get_by_role("alert")).to_have_text(
        "fourth.log: this chat has no room for more files. Start a new chat for this one.")
    assert page.script_errors == []
