"""The console under its Content-Security-Policy, in Chromium (SPEC §11).

Every console page an operator reaches loads Django's admin scripts and ours
(``static/agentloom/admin/*.js``) from static files and runs them with no violation:
the page reports each ``securitypolicyviolation`` event, and the console messages and
script errors are read too. The policy must be the real one: a page that fell back to
no header would pass any listener, so the header is checked on each response.
"""
from __future__ import annotations

import pytest

from tests.browser.test_admin_browser import ADA_PASSWORD, admin_log_in
from web.security import CONTENT_SECURITY_POLICY

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]

# Each violation the page sees, kept on the window (the event fires in the page, not in Playwright).
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push(event.violatedDirective + " " + (event.blockedURI || "inline"));
});
"""


@pytest.fixture
def ada(django_user_model):
    from core.spaces.services import space_bootstrap_for_user

    user = django_user_model.objects.create_superuser(username="ada", password=ADA_PASSWORD,
                                                      email="ada@example.com")
    space_bootstrap_for_user(user=user, name="Ada's lab")
    return user


@pytest.fixture
def story(ada, alice, make_session, version):
    from sessions.services.questions import question_ask

    session = make_session(alice)
    run = question_ask(session=session, content="Hello")
    return {"session": session, "run": run, "version": version, "agent": version.agent}


def test_console_pages_load_and_run_their_scripts_with_no_csp_violation(page, server, story):
    console_messages: list[str] = []
    headers: dict[str, str | None] = {}
    page.add_init_script(RECORD_VIOLATIONS)
    page.on("console", lambda message: console_messages.append(message.text)
            if "Content Security Policy" in message.text or "Refused to" in message.text else None)
    page.on("response", lambda response: headers.__setitem__(response.url, response.headers.get(
        "content-security-policy")) if response.request.resource_type == "document" else None)
    admin_log_in(page, server)
    session, run, version, agent = story["session"], story["run"], story["version"], story["agent"]
    paths = [
        "/admin/",
        "/admin/models_catalog/modelconnection/",
        "/admin/models_catalog/modelconnection/add/",  # discover.js
        f"/admin/agents/agent/{agent.pk}/change/",  # agent_budget.js
        "/admin/agents/agent/",
        f"/admin/agents/agentversion/{version.pk}/change/",
        f"/admin/agents/agentversion/{version.pk}/usage/",
        "/admin/agent_sessions/session/",
        f"/admin/agent_sessions/session/{session.pk}/change/",
        f"/admin/agent_sessions/session/{session.pk}/records/",
        f"/admin/agent_sessions/session/{session.pk}/compactions/",
        f"/admin/agent_sessions/run/{run.pk}/events/",
        f"/admin/agent_sessions/run/{run.pk}/context/",
        "/admin/agent_sessions/accessaudit/",  # the date hierarchy
        "/admin/agent_sessions/modelcall/",
    ]
    for path in paths:
        page.goto(f"{server.url}{path}")
        page.wait_for_load_state("load")
        assert page.evaluate("window.__cspViolations") == [], path
        assert headers.get(page.url) == CONTENT_SECURITY_POLICY, path
    # The list page's own script: select every row, which the actions bar counts.
    page.goto(f"{server.url}/admin/agent_sessions/session/")
    page.locator("#action-toggle").check()
    assert page.locator(".action-counter").inner_text().startswith("1 of 1")
    assert page.evaluate("window.__cspViolations") == []
    assert console_messages == [] and page.script_errors == [] and page.dialogs == []
