"""A person says yes (or no) before a tool acts, in a real browser (SPEC §7b, TOOL-8/9):
the offline demo model calls the calculator, whose policy this agent's version froze as
``always``; the chat shows the waiting call's card, and the decision sent from it decides
whether the tool runs — at 1280 px and on a phone (390 px). Waits on what the page
shows, never on time."""
from __future__ import annotations

import pytest

from tests.browser.conftest import LAST_RUN, SETTLED, answer_text, ask, log_in, screenshot

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]

WIDTHS = [1280, 390]
CARD = f"{LAST_RUN} .approval"
WAITING = "Waiting for your approval — nothing has run yet."


@pytest.fixture
def asking_session(alice, make_session, version):
    from agents.models import AgentVersion

    # The calculator asks before every call, as this version froze it (TOOL-7).
    AgentVersion.objects.filter(pk=version.pk).update(tool_approvals={"calculator": "always"})
    return make_session(alice)


def _page(page_factory, width: int):
    return page_factory(width=width, height=850 if width > 500 else 844, mobile=width < 500)


def _results(session) -> list[dict]:
    from sessions.models import SessionMessage

    return [record.message for record in SessionMessage.objects.filter(session=session, kind="tool_result")]


def _marked(page, session):
    return page.locator(f".session-item[data-session-id='{session.pk}'] .session-waiting")


def _card_waits(page, width: int, session) -> None:
    """The card says the call waits, and nothing has run; its buttons fit the screen; the
    sessions list marks the session."""
    card = page.locator(CARD)
    expect(card).to_have_count(1)
    expect(card).to_have_attribute("data-approval-status", "awaiting")
    expect(card.locator(".approval-tool")).to_have_text("calculator")
    expect(card.locator(".approval-description")).to_contain_text("Evaluate an arithmetic expression")
    expect(card.locator(".approval-arguments")).to_have_text('{\n  "expression": "2+3"\n}')
    expect(card.locator(".approval-why")).to_have_text("This tool asks before every call.")
    expect(card.locator(".approval-state")).to_have_text(WAITING)
    expect(page.locator("#chat-status")).to_contain_text("Waiting for you")
    expect(page.get_by_role("button", name="Stop")).to_be_enabled()  # Stop stays while it waits
    expect(page.get_by_label("Add to the running answer (supplement)")).to_be_editable()
    expect(_marked(page, session)).to_have_text("Waiting for you")
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page scrolls sideways by {overflow} px at {width} px"
    for name in ("Approve", "Approve for this session", "Deny"):
        button = card.get_by_role("button", name=name, exact=True)
        button.scroll_into_view_if_needed()
        box = button.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= width and box["height"] >= 44, (name, box)


@pytest.mark.parametrize("width", WIDTHS)
def test_approving_the_waiting_call_runs_the_tool_and_the_answer_completes(page_factory, server, asking_session,
                                                                          width):
    page = _page(page_factory, width)
    log_in(page, server, next_path=f"/sessions/{asking_session.pk}/")
    ask(page, "What is 2+3?")
    _card_waits(page, width, asking_session)
    assert _results(asking_session) == []
    screenshot(page, f"chat-approval-waiting-{width}")

    held = []  # the decision held on its way: its buttons are disabled meanwhile
    page.route("**/chat/runs/*/approvals", lambda route: held.append(route))
    approve = page.locator(CARD).get_by_role("button", name="Approve", exact=True)
    approve.click()
    expect(approve).to_be_disabled()
    expect(page.locator(CARD).get_by_role("button", name="Deny")).to_be_disabled()
    assert len(held) == 1
    held[0].continue_()

    page.wait_for_selector(SETTLED, timeout=20_000)
    assert "The calculator says the answer is 2+3 = 5." in answer_text(page)
    step = page.locator(f"{LAST_RUN} details.step")
    expect(step.locator(".step-status")).to_have_text("done")
    expect(page.locator("#chat-status")).to_have_text("Answer complete.")
    expect(_marked(page, asking_session)).to_have_count(0)
    step.locator("summary").click()
    expect(step.locator(".step-approval")).to_have_text("You approved this call.")
    assert [(result["status"], result["content"]) for result in _results(asking_session)] == [("ok", "2+3 = 5")]
    assert page.script_errors == []


@pytest.mark.parametrize("width", WIDTHS)
def test_denying_with_a_reason_goes_on_without_the_tool(page_factory, server, asking_session, width):
    page = _page(page_factory, width)
    log_in(page, server, next_path=f"/sessions/{asking_session.pk}/")
    ask(page, "What is 2+3?")
    _card_waits(page, width, asking_session)
    card = page.locator(CARD)
    card.get_by_label("Reason for denying (optional)").fill("Not with my numbers")
    card.get_by_role("button", name="Deny").click()

    page.wait_for_selector(SETTLED, timeout=20_000)
    answer = answer_text(page)  # the model read the reason and went on
    assert "calculator gave no result (denied)" in answer and "Not with my numbers" in answer, answer
    expect(page.locator(f"{LAST_RUN} details.step .step-status")).to_have_text("not run (denied)")
    [result] = _results(asking_session)
    assert result["status"] == "denied" and "= 5" not in result["content"]
    screenshot(page, f"chat-approval-denied-{width}")
    assert page.script_errors == []


@pytest.mark.parametrize("width", WIDTHS)
def test_a_reloaded_page_still_shows_the_waiting_card_once_and_it_still_decides(page_factory, server,
                                                                                asking_session, width):
    page = _page(page_factory, width)
    log_in(page, server, next_path=f"/sessions/{asking_session.pk}/")
    ask(page, "What is 2+3?")
    expect(page.locator(CARD)).to_have_count(1)

    page.reload()
    _card_waits(page, width, asking_session)  # rendered by the server, placed by the replayed events: one card
    expect(page.locator(f"{LAST_RUN} details.step .step-status")).to_have_text("waiting for you")
    # A supplement sent meanwhile is queued for after the decision (RUN-5).
    page.get_by_label("Add to the running answer (supplement)").fill("Round it, please.")
    page.get_by_role("button", name="Send supplement").click()
    expect(page.locator(f"{LAST_RUN} .msg-supplement")).to_contain_text("Round it, please.")
    expect(page.locator(CARD).locator(".approval-state")).to_have_text(WAITING)
    page.locator(CARD).get_by_role("button", name="Approve for this session").click()
    page.wait_for_selector(SETTLED, timeout=20_000)
    # The calculator ran once; then the model read the supplement (the demo answers that).
    assert [(result["status"], result["content"]) for result in _results(asking_session)] == [("ok", "2+3 = 5")]
    expect(page.locator(f"{LAST_RUN} details.step .step-status")).to_have_text("done")
    expect(page.locator(f"{LAST_RUN} .msg-supplement")).to_contain_text("Round it, please.")
    assert "Round it, please." in answer_text(page)
    assert page.script_errors == []


def test_a_decision_in_another_tab_shows_in_this_one(page_factory, server, asking_session):
    first, second = _page(page_factory, 1280), _page(page_factory, 1280)
    log_in(first, server, next_path=f"/sessions/{asking_session.pk}/")
    ask(first, "What is 2+3?")
    expect(first.locator(CARD)).to_have_count(1)
    log_in(second, server, next_path=f"/sessions/{asking_session.pk}/")
    second.locator(CARD).get_by_role("button", name="Deny").click()

    first.wait_for_selector(SETTLED, timeout=20_000)
    expect(first.locator(f"{LAST_RUN} details.step .step-status")).to_have_text("not run (denied)")
    assert [result["status"] for result in _results(asking_session)] == ["denied"]
    assert first.script_errors == [] and second.script_errors == []


def test_stop_while_a_call_waits_ends_the_run_and_the_call_never_runs(page_factory, server, asking_session):
    page = _page(page_factory, 390)
    log_in(page, server, next_path=f"/sessions/{asking_session.pk}/")
    ask(page, "What is 2+3?")
    _card_waits(page, 390, asking_session)
    page.get_by_role("button", name="Stop").click()

    page.wait_for_selector(SETTLED, timeout=20_000)
    run = page.locator(LAST_RUN)
    expect(run.locator(".notice-stopped")).to_have_text("You stopped this answer.")
    expect(run.locator(".approval")).to_have_count(0)
    run.locator("details.step summary").click()
    expect(run.locator(".step-approval")).to_have_text("Stopped with the run.")
    expect(run.get_by_role("button", name="Resume")).to_be_visible()
    expect(_marked(page, asking_session)).to_have_count(0)
    assert _results(asking_session) == []
    assert page.script_errors == []


def test_two_calls_wait_at_once_and_the_run_goes_on_only_once_both_are_decided(page, server, fake_provider,
                                                                              fake_session):
    from agents.models import AgentVersion
    from tests.fakes.fake_provider import chat_stream, sequence

    session = fake_session(tools=("calculator",), name="Careful")
    AgentVersion.objects.filter(pk=session.version_id).update(tool_approvals={"calculator": "always"})
    calls = [{"id": "c1", "name": "calculator", "arguments": '{"expression": "1+1"}'},
             {"id": "c2", "name": "calculator", "arguments": '{"expression": "2*21"}'}]
    fake_provider.handler = sequence(chat_stream(["Two sums."], tool_calls=calls), chat_stream(["Done with the sums."]))
    log_in(page, server, next_path=f"/sessions/{session.pk}/")
    ask(page, "Two sums, please")
    first, second = page.locator(f"{CARD}[data-approval-call=c1]"), page.locator(f"{CARD}[data-approval-call=c2]")
    expect(first.locator(".approval-state")).to_have_text(WAITING)
    expect(second.locator(".approval-arguments")).to_have_text('{\n  "expression": "2*21"\n}')

    first.get_by_role("button", name="Approve", exact=True).click()
    expect(first.locator(".approval-state")).to_have_text("Approved — running now")
    expect(first.get_by_role("button")).to_have_count(0)
    expect(second.locator(".approval-state")).to_have_text(WAITING)  # still asks: the run still waits
    expect(page.locator("#chat-status")).to_contain_text("Waiting for you")

    second.get_by_label("Reason for denying (optional)").fill("One is enough")
    second.get_by_role("button", name="Deny").click()
    page.wait_for_selector(SETTLED, timeout=20_000)
    assert "Done with the sums." in answer_text(page)
    statuses = page.locator(f"{LAST_RUN} details.step .step-status")
    expect(statuses).to_have_text(["done", "not run (denied)"])
    assert [(result["status"], result["content"]) for result in _results(session)][0] == ("ok", "1+1 = 2")
    assert "One is enough" in _results(session)[1]["content"]
    assert page.script_errors == []


def test_a_page_whose_stream_is_down_learns_the_decision_from_the_sessions_state(page, server, asking_session,
                                                                                  alice):
    from sessions.models import Run
    from sessions.selectors.approvals import approvals_waiting
    from sessions.services.approvals import approval_decide
    from sessions.services.dispatch import dispatcher_get, dispatcher_set

    log_in(page, server, next_path=f"/sessions/{asking_session.pk}/")
    ask(page, "What is 2+3?")
    expect(page.locator(CARD)).to_have_count(1)
    page.route("**/events*", lambda route: route.abort())  # no event reaches this page any more
    page.reload()
    expect(page.locator(CARD).locator(".approval-state")).to_have_text(WAITING)  # the server's card

    run = Run.objects.get(session=asking_session)
    held: list[int] = []  # the run stays queued: only the session's state can tell the page
    working = dispatcher_get()
    dispatcher_set(held.append)
    try:
        approval_decide(run=run, user=alice, call_id=approvals_waiting(run=run)[0].call_id, decision="approve")
    finally:
        dispatcher_set(working)
    assert held == [run.pk]
    card = page.locator(CARD)
    expect(card).to_have_attribute("data-approval-status", "approved")  # asked every 4 s while a call waits
    expect(card.locator(".approval-state")).to_have_text("Approved — running now")
    expect(card.get_by_role("button")).to_have_count(0)
    assert page.script_errors == []
