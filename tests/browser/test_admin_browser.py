"""The admin console in a real browser (SPEC §10, issue 8).

- An admin discovers models from the fake provider, saves a connection with a picked
  model, is refused an invalid context policy on the named field, fixes it, saves and
  publishes the agent, and finds the published version read-only.
- Hostile text in records, an agent's name and instructions, tool arguments and run
  events renders inert on every console page (the page listens for dialogs).
- An operator opens a session's pages: list, records, event timeline, context inspector,
  compactions with their chart.

Every admin page is saved as ``var/screenshots/admin-*.png`` (git-ignored) to be looked
at. Debian's Chromium driven by Playwright against uvicorn in this process, runs executed
by worker threads (tests/browser/conftest.py); skipped with the reason when either is
missing (never ``playwright install``).
"""
from __future__ import annotations

import json
import re

import pytest

from tests.browser.conftest import FAKE_KEY, screenshot
from tests.fakes.fake_provider import chat_stream, models_list, route, sequence

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # WhiteNoise serves the static files with a synchronous iterator under ASGI (SPEC §1).
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]

HOSTILE = "<script>alert(1)</script> <img src=x onerror=alert(1)> [x](javascript:alert(1))"
ADA_PASSWORD = "ada-password-1"
CONNECTIONS = "/admin/models_catalog/modelconnection/"
AGENTS = "/admin/agents/agent/"
VERSIONS = "/admin/agents/agentversion/"


@pytest.fixture
def ada(django_user_model):
    """The platform's admin: a staff superuser, and admin of her own space."""
    from core.spaces.services import space_bootstrap_for_user

    user = django_user_model.objects.create_superuser(username="ada", password=ADA_PASSWORD,
                                                      email="ada@example.com")
    space_bootstrap_for_user(user=user, name="Ada's lab")
    return user


def admin_log_in(page, server, username: str = "ada", password: str = ADA_PASSWORD) -> None:
    page.goto(f"{server.url}/admin/login/?next=/admin/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{server.url}/admin/")


def run_to_the_end(session, content: str, threads) -> object:
    """Ask a question and let the worker thread run it to the end, as the chat would."""
    from sessions.models import Run
    from sessions.services.questions import question_ask

    session.refresh_from_db()
    run = question_ask(session=session, content=content)
    for thread in threads:
        thread.join(timeout=20)
    run = Run.objects.get(pk=run.pk)
    assert run.status == Run.Status.COMPLETED, (run.status, run.error)
    return run


def metrics(*, trigger: str, before: int, after: int, threshold: int, target: int, consumed: list[int],
            messages: int, covered: int, calls: int = 1, duration_ms: int = 1_800) -> dict:
    """The CTX-41 figures, as the compaction worker stores them (docs/operators.md)."""
    return {
        "trigger": trigger, "tokens_before": before, "tokens_after": after, "threshold": threshold,
        "target": target, "target_reached": after <= target, "summary_calls": calls, "retries": 0,
        "summary_chars": 1_250 + after // 10, "duration_ms": duration_ms, "estimator_id": "tiktoken-o200k_base-v1",
        "segments": [{"index": 0, "consumed": consumed, "messages": messages}], "covered": covered,
    }


def compact(run, *, covered_seq: int, figures: dict, summary: str = "Earlier: the user asked for arithmetic."):
    """A committed compaction (RUN-10) with its summary record, as the worker saves it."""
    from sessions.selectors.instances import main_instance
    from sessions.services.checkpoints import checkpoint_commit
    from sessions.services.records import NewRecord

    return checkpoint_commit(
        run=run, instance=main_instance(run=run), covered_seq=covered_seq, estimator_id="tiktoken-o200k_base-v1",
        messages=[{"role": "user", "content": summary}], metrics=figures,
        records=[NewRecord("compaction_summary", {"summary": summary, "metrics": figures},
                           f"compaction-{covered_seq}-{figures['trigger']}")])


def assert_fits(page, table: str) -> None:
    """No column of ``table`` is hidden behind a sideways scroll at this window size."""
    assert page.locator(table).evaluate("t => t.scrollWidth <= t.parentElement.clientWidth + 1"), table


def assert_inert(page) -> None:
    """The hostile text is on the page as text; none of it became an element or ran."""
    assert page.locator("img[src='x'], [onerror], a[href^='javascript:' i]").count() == 0
    assert not page.evaluate("[...document.scripts].some(s => s.textContent.includes('alert(1)'))")
    assert page.dialogs == [] and page.script_errors == []


# --- 1. Discover models, a connection, an agent with a custom policy, Publish ------------------


def test_an_admin_discovers_models_saves_a_connection_and_publishes_an_agent_with_a_custom_policy(
        page, server, fake_provider, ada, monkeypatch):
    from agents.models import Agent, AgentVersion
    from agents.selectors import agent_budget
    from models_catalog import services as catalog_services
    from models_catalog.manifest import load_manifest
    from models_catalog.models import ModelConnection
    from tests.catalog.support import public_resolver

    fake_provider.handler = route({"GET /v1/models": models_list(
        ["gpt-4o", "gpt-4o-2024-99-99", "text-embedding-3-small"], owned_by="openai")})
    # The official OpenAI endpoint gets the manifest's figures (CAT-2). The server's
    # discovery reaches the fake on its loopback socket through the seam the service
    # keeps for this (transport + resolver); the URL guard still runs.
    discover = catalog_services.discover_models

    def discover_through_the_fake(**kwargs):
        kwargs["transport"] = kwargs.get("transport") or fake_provider.forwarding_transport()
        kwargs["resolver"] = kwargs.get("resolver") or public_resolver
        return discover(**kwargs)

    monkeypatch.setattr(catalog_services, "discover_models", discover_through_the_fake)
    version = load_manifest().version

    admin_log_in(page, server)
    expect(page.locator(".agentloom-start")).to_contain_text("Add a real model provider")
    screenshot(page, "admin-index", full_page=True)

    # The connection: provider and key typed, then Discover models fills the rest.
    page.get_by_role("link", name="Add a model connection").click()
    page.locator("#id_space").select_option(label="Ada's lab")
    page.locator("#id_name").fill("OpenAI production")
    page.locator("#id_provider").select_option("openai")
    page.locator("#id_api_key").fill(FAKE_KEY)
    page.get_by_role("button", name="Discover models").click()
    panel = page.locator("#discover-results")
    expect(panel.locator(".discover-summary")).to_contain_text(f"official manifest version {version}")
    expect(panel.locator(".discover-summary")).to_contain_text("3 models at https://api.openai.com/v1")
    rows = panel.locator("table.discover-table tbody tr")
    expect(rows).to_have_count(3)
    gpt4o = rows.filter(has=page.locator("code", has_text=re.compile(r"^gpt-4o$")))
    expect(gpt4o.locator(".source-badge")).to_have_text(["Official manifest", "Official manifest"])
    expect(gpt4o).to_contain_text(f"manifest {version}")
    expect(gpt4o).to_contain_text("provider maximum 16384")
    unknown = rows.filter(has_text="gpt-4o-2024-99-99")
    expect(unknown.locator(".source-badge")).to_have_text(["Platform default (check it)"] * 2)
    expect(unknown.locator(".discover-note").first).to_contain_text("platform default")
    expect(rows.filter(has_text="text-embedding-3-small")).to_contain_text("not for chat")
    request = fake_provider.requests[-1]
    assert (request.path, request.headers["host"]) == ("/v1/models", "api.openai.com")
    assert request.headers["authorization"] == f"Bearer {FAKE_KEY}"

    gpt4o.get_by_role("button", name="Use").click()
    expect(page.locator("#id_model")).to_have_value("gpt-4o")
    expect(page.locator("#id_context_window")).to_have_value("128000")
    expect(page.locator("#id_max_output_tokens")).to_have_value("4096")
    expect(page.locator("#id_supports_images")).to_be_checked()
    expect(gpt4o).to_have_class(re.compile(r"\bchosen\b"))
    page.evaluate("window.scrollTo(0, 0)")  # the admin's sticky sidebar stays at the top of the shot
    screenshot(page, "admin-discover", full_page=True)
    assert FAKE_KEY not in page.content()

    page.get_by_role("button", name="Save", exact=True).click()
    page.wait_for_url(f"{server.url}{CONNECTIONS}")
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    row = page.locator("#result_list tbody tr", has_text="OpenAI production")
    expect(row).to_contain_text("gpt-4o")
    # Each figure with its own source (CAT-2).
    expect(row.locator("td.field-window_column")).to_contain_text(re.compile(r"128,000\s*Official manifest"))
    expect(row.locator("td.field-output_column")).to_contain_text(re.compile(r"4,096\s*Official manifest"))
    assert_fits(page, "#result_list")
    screenshot(page, "admin-connections", full_page=True)
    connection = ModelConnection.objects.get(name="OpenAI production")
    assert (connection.provider, connection.model, connection.context_window, connection.max_output_tokens) == (
        "openai", "gpt-4o", 128_000, 4_096)
    assert (connection.context_window_source, connection.max_output_tokens_source,
            connection.manifest_version) == ("official_manifest", "official_manifest", version)
    assert (connection.max_output_tokens_maximum, connection.max_output_tokens_maximum_source) == (
        16_384, "official_manifest")
    assert connection.api_key == FAKE_KEY and connection.supports_images is True

    # The agent: a custom policy, first with a target above the trigger.
    page.goto(f"{server.url}{AGENTS}add/")
    page.locator("#id_space").select_option(label="Ada's lab")
    page.locator("#id_name").fill("Research assistant")
    page.locator("#id_instructions").fill("Answer with sources. Use the calculator for arithmetic.")
    page.locator("#id_model_connection").select_option(label=str(connection))
    page.get_by_label("calculator").check()
    page.locator("#id_context_ratio").fill("0.7")
    page.locator("#id_target_ratio").fill("0.75")
    page.locator("#id_user_turns").fill("12")
    page.locator("#id_model_steps").fill("40")
    page.locator("#id_max_compaction_calls").fill("3")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".errornote")).to_be_visible()
    target_row = page.locator(".form-row.field-target_ratio")
    expect(target_row.locator(".errorlist")).to_contain_text("context_ratio")
    expect(page.locator("#id_target_ratio")).to_have_attribute("aria-invalid", "true")
    assert page.locator(".errorlist").count() == 1  # only the field at fault is named
    expect(page.locator("#id_target_ratio")).to_have_value("0.75")  # what was typed stays
    expect(page.locator("#id_user_turns")).to_have_value("12")
    screenshot(page, "admin-agent-error", full_page=True)
    assert not Agent.objects.exists()

    page.locator("#id_target_ratio").fill("0.5")
    # The budget line follows the form live, before anything is saved (CTX-21).
    effective = connection.context_window - connection.max_output_tokens - connection.safety_margin_tokens
    expect(page.locator("#live-budget")).to_have_text(
        f"effective input {effective:,} tokens · compaction at {int(effective * 0.7 + 1e-9):,}, "
        f"target {int(effective * 0.5 + 1e-9):,}")
    page.get_by_role("button", name="Save and continue editing").click()
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    agent = Agent.objects.get()
    policy = {"context_ratio": 0.7, "target_ratio": 0.5, "user_turns": 12, "model_steps": 40,
              "max_compaction_calls": 3, "prepare_ratio": None, "mask_tool_results": True}
    assert agent.context_policy == policy and agent.tools == ["calculator"] and agent.created_by == ada
    budget = agent_budget(agent=agent)
    expect(page.locator(".field-budget_figures .readonly")).to_have_text(
        f"effective input {budget['effective_input_tokens']:,} tokens · compaction at "
        f"{budget['trigger_tokens']:,}, target {budget['target_tokens']:,}")
    screenshot(page, "admin-agent", full_page=True)

    # Publish from the list with the admin action.
    page.goto(f"{server.url}{AGENTS}")
    page.locator(f"input[name=_selected_action][value='{agent.pk}']").check()
    page.locator("select[name=action]").select_option("publish")
    page.get_by_role("button", name="Go").click()
    expect(page.locator(".messagelist")).to_contain_text("Published Research assistant v1.")
    expect(page.locator("#result_list tbody tr", has_text="Research assistant")).to_contain_text("v1")
    published = AgentVersion.objects.get(agent=agent)
    assert published.version == 1 and published.context_policy == policy
    assert (published.model, published.context_window) == ("gpt-4o", 128_000)

    # The version is frozen: listed, viewable, never editable.
    page.get_by_role("link", name="Agent versions").first.click()
    page.wait_for_url(f"{server.url}{VERSIONS}")
    version_row = page.locator("#result_list tbody tr", has_text="Research assistant")
    expect(version_row).to_contain_text("gpt-4o")
    expect(version_row).to_contain_text(f"compaction at {budget['trigger_tokens']:,}")
    expect(page.get_by_role("link", name=re.compile("^Add agent version"))).to_have_count(0)
    assert_fits(page, "#result_list")
    screenshot(page, "admin-agent-versions", full_page=True)
    version_row.locator("th a, td a").first.click()
    page.wait_for_url(f"{server.url}{VERSIONS}{published.pk}/change/")
    expect(page.locator("#content h1")).to_contain_text("View agent version")
    assert page.locator("#content-main form input:not([type=hidden]), #content-main form textarea, "
                        "#content-main form select").count() == 0
    expect(page.get_by_role("button", name=re.compile("^Save"))).to_have_count(0)
    expect(page.locator(".field-policy_list .readonly")).to_contain_text("Target ratio: 0.5")  # a list, not JSON
    screenshot(page, "admin-agent-version", full_page=True)
    assert page.dialogs == [] and page.script_errors == []


# --- 2. Hostile text stays inert in the console ------------------------------------------------


def test_hostile_text_renders_inert_on_every_admin_page(page, server, fake_provider, ada, space, alice,
                                                        worker_threads):
    from agents.services import agent_create, agent_publish
    from models_catalog.models import ModelConnection
    from sessions.models import Session

    connection = ModelConnection.objects.create(
        space=space, name="Hostile connection", provider="openai_compatible", base_url=fake_provider.base_url,
        api_key=FAKE_KEY, model="fake-model", context_window=32_768, max_output_tokens=1_024)
    agent = agent_create(space=space, name=HOSTILE, model_connection=connection, instructions=HOSTILE,
                         tools=["calculator"], created_by=alice)
    agent_version = agent_publish(agent=agent, published_by=alice)
    session = Session.objects.create(space=space, user=alice, agent=agent, version=agent_version)
    fake_provider.handler = sequence(
        chat_stream(tool_calls=[{"id": "call_1", "name": "calculator",
                                 "arguments": json.dumps({"expression": HOSTILE})}],
                    usage={"prompt_tokens": 180, "completion_tokens": 30}),
        chat_stream(["Here: ", HOSTILE], usage={"prompt_tokens": 260, "completion_tokens": 40}))
    run = run_to_the_end(session, f"Please compute {HOSTILE}", worker_threads)
    compact(run, covered_seq=2, summary=HOSTILE, figures=metrics(
        trigger=HOSTILE, before=26_000, after=7_000, threshold=24_576, target=18_432, consumed=[1, 2], messages=2,
        covered=2))

    admin_log_in(page, server)
    base = f"{server.url}/admin/agent_sessions"
    pages = {
        "records": f"{base}/session/{session.pk}/records/",
        "events": f"{base}/run/{run.pk}/events/",
        "context": f"{base}/run/{run.pk}/context/",
        "compactions": f"{base}/session/{session.pk}/compactions/",
        "session": f"{base}/session/{session.pk}/change/",
        "sessions": f"{base}/session/",
        "agent": f"{server.url}{AGENTS}{agent.pk}/change/",
        "agents": f"{server.url}{AGENTS}",
        "versions": f"{server.url}{VERSIONS}",
    }
    for name, url in pages.items():
        page.goto(url)
        page.wait_for_load_state("load")
        assert page.locator("#content").get_by_text("<script>alert(1)</script>").count() >= 1, name  # shown as text…
        assert_inert(page)  # …never run
        if name in ("records", "events", "context"):
            content = page.locator("#content-main").inner_text()
            assert "<img src=x onerror=alert(1)>" in content and "[x](javascript:alert(1))" in content, name

    # The agent's own form shows the hostile name and instructions as values, unrendered.
    page.goto(pages["agent"])
    expect(page.locator("#id_name")).to_have_value(HOSTILE)
    expect(page.locator("#id_instructions")).to_have_value(HOSTILE)
    # Everything folded (event payloads, tool parameters) unfolds as text too.
    page.goto(pages["events"])
    for details in page.locator("details").all():
        details.locator("summary").click()
    assert_inert(page)
    page.goto(pages["context"])
    for details in page.locator("details").all():
        details.locator("summary").click()
    assert_inert(page)
    # The chart's tooltips carry the hostile trigger as text.
    page.goto(pages["compactions"])
    assert page.locator("svg.compaction-chart circle title").first.text_content().endswith(f"trigger {HOSTILE}")
    assert_inert(page)
    assert page.dialogs == []


# --- 3. An operator's pages of one session ----------------------------------------------------


def test_an_operator_opens_a_sessions_records_timeline_inspector_and_compaction_chart(
        page, server, fake_provider, ada, space, alice, bob, worker_threads):
    from agents.services import agent_create, agent_publish
    from models_catalog.models import ModelConnection
    from sessions.models import AccessAudit, Session

    connection = ModelConnection.objects.create(
        space=space, name="Local vLLM", provider="openai_compatible", base_url=fake_provider.base_url,
        api_key=FAKE_KEY, model="qwen3-8b", context_window=32_768, max_output_tokens=1_024)
    agent = agent_create(space=space, name="Research assistant", model_connection=connection,
                         instructions="Be brief. Use the calculator for arithmetic.", tools=["calculator"],
                         created_by=alice)
    agent_version = agent_publish(agent=agent, published_by=alice)
    session = Session.objects.create(space=space, user=alice, agent=agent, version=agent_version)
    for user, title in ((bob, "Quarterly numbers"), (alice, "Trip planning")):
        Session.objects.create(space=space, user=user, agent=agent, version=agent_version, title=title)
    fake_provider.handler = sequence(
        chat_stream(["Let me compute that."], tool_calls=[
            {"id": "call_1", "name": "calculator", "arguments": json.dumps({"expression": "17*23"})}],
            usage={"prompt_tokens": 212, "completion_tokens": 24}),
        chat_stream(["17 × 23 = **391**. ", "Anything else?"], usage={"prompt_tokens": 251, "completion_tokens": 12}),
        chat_stream(["The square root of 391 is about ", "19.77."],
                    usage={"prompt_tokens": 290, "completion_tokens": 15}))
    first = run_to_the_end(session, "What is 17*23?", worker_threads)
    second = run_to_the_end(session, "And its square root, roughly?", worker_threads)
    session.refresh_from_db()
    compact(first, covered_seq=4, figures=metrics(
        trigger="budget", before=25_210, after=6_480, threshold=24_576, target=18_432, consumed=[1, 4], messages=4,
        covered=4, calls=2, duration_ms=2_350))
    compact(second, covered_seq=session.last_seq, summary="Earlier: 17 × 23 = 391; its square root is about 19.77.",
            figures=metrics(trigger="user_turns", before=21_900, after=5_120, threshold=24_576, target=18_432,
                            consumed=[5, session.last_seq], messages=session.last_seq - 4, covered=session.last_seq))

    admin_log_in(page, server)
    page.get_by_role("link", name="Sessions", exact=True).click()
    expect(page.locator("#result_list tbody tr")).to_have_count(3)
    assert_fits(page, "#result_list")  # the console links in the last column are in sight
    screenshot(page, "admin-sessions", full_page=True)

    # Titles are the owner's text, encrypted: the console lists sessions by id and owner.
    row = page.locator("#result_list tbody tr", has=page.get_by_role("link", name=str(session.pk), exact=True))
    expect(row).to_contain_text("alice")
    expect(page.locator("#result_list")).not_to_contain_text("What is 17*23?")
    row.get_by_role("link", name="Records").click()
    expect(page.locator("ol.records li.record").first).to_contain_text("What is 17*23?")
    expect(page.locator("ol.records")).to_contain_text("calculator")
    expect(page.locator("ol.records")).to_contain_text("391")
    screenshot(page, "admin-records", full_page=True)

    page.get_by_role("link", name="Compactions", exact=True).first.click()  # not the sidebar's "Prepared compactions"
    chart = page.locator("svg.compaction-chart")
    expect(chart).to_be_visible()
    assert chart.locator("circle.marker").count() == 4  # before and after, twice
    assert chart.bounding_box()["height"] >= 200  # readable, not squeezed
    expect(page.locator("table.compactions tbody tr")).to_have_count(2)
    assert_fits(page, "table.compactions")
    screenshot(page, "admin-compactions", full_page=True)

    page.goto(f"{server.url}/admin/agent_sessions/session/{session.pk}/change/")
    page.get_by_role("link", name="Event timeline").last.click()  # runs are listed newest first
    page.wait_for_url(re.compile(rf"/run/{first.pk}/events/$"))
    timeline = page.locator("table.timeline")
    expect(timeline).to_contain_text("tool_finished")
    expect(timeline).to_contain_text("17 × 23 = **391**.")
    assert_fits(page, "table.timeline")
    screenshot(page, "admin-events", full_page=True)

    page.get_by_role("link", name="Context inspector").click()
    expect(page.locator("table.calls tbody tr")).to_have_count(2)
    expect(page.locator("section.call-detail").last).to_contain_text("Be brief. Use the calculator")
    expect(page.locator("table.calls tbody tr").first).to_contain_text("212")
    screenshot(page, "admin-context", full_page=True)

    assert_fits(page, "table.calls")
    assert set(AccessAudit.objects.filter(user=ada).values_list("what", flat=True)) == {
        "questions", "records", "events", "context_inspector"}  # "questions": the session's page
    assert page.dialogs == [] and page.script_errors == []
