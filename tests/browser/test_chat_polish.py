"""The chat's finish: tool steps named by server and tool, copy buttons, an error resumed
past, the plan under its question, and a compact dock on a phone — at 1280 and 390 px."""
from __future__ import annotations

import json
import threading

import pytest

from tests.browser.conftest import LAST_RUN, SETTLED, STREAMING, ask, log_in, screenshot, words
from tests.fakes.fake_provider import chat_stream, error, sequence
from tests.fakes.mcp_servers import ToolServerApp

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]

WIDTHS = {"desktop": {"width": 1280, "height": 850}, "phone": {"width": 390, "height": 844, "mobile": True}}
both_widths = pytest.mark.parametrize("screen", list(WIDTHS))
CLIPBOARD = ["clipboard-read", "clipboard-write"]
ANSWER = "Run this:\n\n```python\nprint('hi')\n```\n\nThen **look**."


@both_widths
def test_a_server_tools_step_reads_server_and_tool_live_and_after_a_reload(page_factory, server, space,
                                                                           fake_provider, fake_session, screen):
    from toolservers.services import toolserver_register

    with ToolServerApp() as mcp:
        toolserver_register(space=space, data={"name": "tests", "url": mcp.url, "headers": mcp.headers})
        session = fake_session(tools=("calculator", "tests.gated"), name="Tool user")
        fake_provider.handler = sequence(
            chat_stream(tool_calls=[{"id": "g1", "name": "tests__gated", "arguments": "{}"}]),
            chat_stream(tool_calls=[{"id": "c1", "name": "calculator",
                                     "arguments": json.dumps({"expression": "2+2"})}]),
            chat_stream(["Done."]))
        page = page_factory(**WIDTHS[screen])
        log_in(page, server, next_path=f"/sessions/{session.pk}/")
        ask(page, "Wait, then add")
        gated = page.locator(f"{LAST_RUN} details.step[data-call-id=g1]")
        expect(gated.locator(".step-status")).to_have_text("running")
        expect(gated.locator(".step-name")).to_have_text("tests · gated")  # built live from the events
        expect(page.locator("#chat-status")).to_have_text("Running tests · gated…")
        expect(gated.locator("progress")).to_have_attribute("aria-label", "Progress of tests · gated")
        mcp.release.set()
        page.wait_for_selector(SETTLED, timeout=20_000)
        names = page.locator(f"{LAST_RUN} .step-name")
        expect(names).to_have_text(["tests · gated", "calculator"])  # the server's rendering
        screenshot(page, f"chat-step-names-{screen}")
        page.reload()
        expect(page.locator(f"{LAST_RUN} .step-name")).to_have_text(["tests · gated", "calculator"])
        assert "tests__gated" not in page.inner_text("#transcript")
        assert page.script_errors == []


def _copy_session(page_factory, server, fake_session, fake_provider, screen, *, init_script: str = ""):
    session = fake_session()
    fake_provider.handler = sequence(chat_stream([ANSWER]))
    page = page_factory(**WIDTHS[screen])
    page.context.grant_permissions(CLIPBOARD, origin=server.url)
    if init_script:
        page.add_init_script(init_script)
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "How do I print?")
    page.wait_for_selector(SETTLED, timeout=15_000)
    return page


def clipboard(page) -> str:
    return page.evaluate("navigator.clipboard.readText()")


@both_widths
def test_copy_buttons_copy_an_answer_and_its_code_block_and_say_copied(page_factory, server, fake_session,
                                                                       fake_provider, screen):
    page = _copy_session(page_factory, server, fake_session, fake_provider, screen)
    answer = page.locator(f"{LAST_RUN} .msg-assistant")
    bubble = answer.locator(".bubble-assistant")
    copy_answer = answer.get_by_role("button", name="Copy answer")
    copy_code = answer.get_by_role("button", name="Copy code")
    expect(copy_answer).to_be_visible()
    expect(copy_code).to_be_visible()
    assert "Copy" not in bubble.inner_text()  # the buttons' words are not the answer's
    before = (copy_answer.bounding_box(), copy_code.bounding_box(), bubble.bounding_box())

    copy_answer.click()
    expect(page.locator("#copy-status")).to_have_text("Copied")
    expect(copy_answer).to_have_attribute("data-copy-state", "done")
    assert (copy_answer.bounding_box(), copy_code.bounding_box(), bubble.bounding_box()) == before  # nothing moved
    copied = clipboard(page)
    assert copied.startswith("Run this:") and "print('hi')" in copied and copied.rstrip().endswith("Then look.")
    expect(copy_answer).to_have_attribute("data-copy-state", "")  # "Copy" again, a moment later
    screenshot(page, f"chat-copy-{screen}")

    copy_code.focus()  # by keyboard
    page.keyboard.press("Enter")
    expect(copy_code).to_have_attribute("data-copy-state", "done")
    assert clipboard(page) == "print('hi')\n"

    page.reload()  # a page opened on a finished run has them too
    expect(page.locator(f"{LAST_RUN} .msg-assistant").get_by_role("button", name="Copy code")).to_have_count(1)
    assert page.script_errors == []


@both_widths
def test_copy_falls_back_when_the_clipboard_api_refuses_and_selects_when_nothing_can_copy(
        page_factory, server, fake_session, fake_provider, screen):
    refused = "navigator.clipboard.writeText = () => Promise.reject(new Error('not allowed'));"
    page = _copy_session(page_factory, server, fake_session, fake_provider, screen, init_script=refused)
    code = page.locator(f"{LAST_RUN} .msg-assistant").get_by_role("button", name="Copy code")
    code.click()
    expect(page.locator("#copy-status")).to_have_text("Copied")  # through the older copy command
    assert clipboard(page) == "print('hi')\n"
    expect(code).to_be_focused()

    page.evaluate("document.execCommand = () => false")  # no way to copy at all
    code.click()
    expect(page.locator("#copy-status")).to_contain_text("the text is selected, press Ctrl+C")
    expect(code).to_have_attribute("data-copy-state", "selected")
    assert page.evaluate("String(window.getSelection())").strip() == "print('hi')"
    assert page.script_errors == []


@both_widths
def test_an_error_resumed_into_an_answer_says_so_instead_of_standing(page_factory, server, fake_session,
                                                                    fake_provider, screen):
    session = fake_session()
    failing = threading.Event()
    failing.set()
    fake_provider.handler = lambda request: (error(503, "down", code="whatever") if failing.is_set()
                                             else chat_stream(["Back and answering."]))
    page = page_factory(**WIDTHS[screen])
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "Hello?")
    page.wait_for_selector(SETTLED, timeout=20_000)
    standing = page.locator(f"{LAST_RUN} .error-box:not(.error-resolved)")
    expect(standing).to_have_count(1)

    failing.clear()
    page.locator(LAST_RUN).get_by_role("button", name="Resume").click()
    expect(page.locator(f"{SETTLED} .bubble-assistant")).to_have_text("Back and answering.", timeout=20_000)
    resolved = page.locator(f"{LAST_RUN} .error-box.error-resolved")
    expect(resolved).to_have_count(1)
    expect(resolved.locator("summary")).to_contain_text("Resumed — see the answer below.")
    expect(standing).to_have_count(0)
    screenshot(page, f"chat-error-resolved-{screen}")
    page.reload()
    expect(page.locator(f"{LAST_RUN} .error-box.error-resolved summary")).to_contain_text(
        "Resumed — see the answer below.")
    expect(page.locator(f"{LAST_RUN} .error-box:not(.error-resolved)")).to_have_count(0)
    assert page.script_errors == []


PLAN = [{"step": "Find the figures", "status": "done"}, {"step": "Compare them", "status": "in_progress"}]
# The direct children of the last run, in order: what each is.
ORDER = """(section) => Array.from(section.children).map((node) =>
  node.matches('.plan') ? 'plan' : node.matches('.msg-user') ? 'question' : node.matches('.live') ? 'live' : 'other')"""


@both_widths
def test_the_plan_sits_under_the_question_it_belongs_to(page_factory, server, fake_session, fake_provider, screen):
    session = fake_session(tools=("update_plan",))
    held = threading.Event()
    fake_provider.handler = sequence(
        chat_stream(["First answer."]),
        chat_stream(tool_calls=[{"id": "plan-1", "name": "update_plan", "arguments": json.dumps({"steps": PLAN})}]),
        chat_stream(words(12), delay=0.03, hold=held, hold_after=4))
    page = page_factory(**WIDTHS[screen])
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "First question")
    page.wait_for_selector(SETTLED, timeout=15_000)
    ask(page, "Compare the figures")
    plan = page.locator(f"{LAST_RUN} .plan")
    expect(plan).to_be_visible()
    expect(page.locator(STREAMING)).to_be_visible()
    order = page.locator(LAST_RUN).evaluate(ORDER)
    assert order[:2] == ["question", "plan"], order  # live: under its question, not above it
    question = page.locator(f"{LAST_RUN} .msg-user").bounding_box()
    assert plan.bounding_box()["y"] >= question["y"] + question["height"]
    held.set()
    page.wait_for_selector(SETTLED, timeout=15_000)
    assert page.locator(LAST_RUN).evaluate(ORDER)[:2] == ["question", "plan"]
    screenshot(page, f"chat-plan-order-{screen}")
    page.reload()
    assert page.locator(LAST_RUN).evaluate(ORDER)[:2] == ["question", "plan"]
    assert page.locator("#transcript section.run").first.locator(".plan").count() == 0  # the first run has none
    assert page.script_errors == []


@both_widths
def test_while_an_answer_runs_the_dock_leaves_the_answer_the_screen(page_factory, server, fake_session,
                                                                    fake_provider, screen):
    session = fake_session()
    held = threading.Event()
    fake_provider.handler = sequence(chat_stream(words(20), delay=0.03, hold=held, hold_after=4))
    page = page_factory(**WIDTHS[screen])
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "Count slowly")
    expect(page.locator(STREAMING)).to_contain_text("word0 ")
    page.locator(STREAMING).click()  # reading the answer: the question box loses the focus
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    dock = page.locator(".composer-dock").bounding_box()
    viewport = page.viewport_size
    figures = page.locator("#context-figures")
    streaming = page.locator(STREAMING).bounding_box()
    assert streaming["y"] + streaming["height"] <= dock["y"], (streaming, dock)  # the answer is not under the dock
    screenshot(page, f"chat-dock-running-{screen}")
    if screen == "phone":
        assert dock["height"] <= 0.25 * viewport["height"], dock
        assert page.locator(".context-bar").bounding_box()["height"] <= 36  # the meter on one line
        for control in ("Stop", "Send supplement", "Compact now"):  # still there, still tappable
            box = page.get_by_role("button", name=control).bounding_box()
            assert box["height"] >= 24 and box["y"] + box["height"] <= viewport["height"], control
        expect(page.get_by_label("Add to the running answer (supplement)")).to_have_attribute(
            "placeholder", "Add a detail or a correction while it works…")
        unfocused = page.locator("#question").bounding_box()["height"]
        page.locator("#question").focus()  # writing: the box and its label grow back
        expect(page.locator("#question-label")).to_be_visible()
        assert page.locator("#question").bounding_box()["height"] > unfocused
    else:  # a wide screen keeps it whole: the label, the figures uncut, two lines to write in
        expect(page.locator(".context-label")).to_be_visible()
        assert figures.evaluate("(node) => node.scrollWidth <= node.clientWidth")
        expect(page.locator("#question-label")).to_be_visible()
        expect(page.locator("#composer-hint")).to_be_visible()
    held.set()
    page.wait_for_selector(SETTLED, timeout=15_000)
    assert page.script_errors == []
