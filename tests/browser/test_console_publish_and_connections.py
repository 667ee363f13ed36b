"""The agent page's Publish button and the connection form's live parts in a real browser
(SPEC §10): what the next version changes, the button giving way to unsaved edits, a
figure's source turning Manual as it is typed, and Test connection answering in words.
ada is the platform's admin; the fake provider listens on a loopback socket."""
from __future__ import annotations

import pytest

from tests.browser.conftest import FAKE_KEY, screenshot
from tests.browser.test_admin_browser import ADA_PASSWORD, admin_log_in
from tests.fakes.fake_provider import models_list, route

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]


@pytest.fixture
def ada(django_user_model):
    """The platform's admin (as in test_admin_browser): a staff superuser with her own space."""
    return django_user_model.objects.create_superuser(username="ada", password=ADA_PASSWORD,
                                                      email="ada@example.com")


@pytest.fixture
def ada_space(ada):
    from core.spaces.services import space_bootstrap_for_user

    return space_bootstrap_for_user(user=ada, name="Ada's lab")


def test_the_agent_page_shows_what_changes_and_publishes_only_what_is_saved(page, server, ada, ada_space):
    from agents.services import agent_create, agent_publish, agent_update
    from models_catalog.models import ModelConnection

    demo = ModelConnection.objects.create(space=ada_space, name="Demo", provider="demo", model="agentloom-demo")
    agent = agent_create(space=ada_space, name="Helper", model_connection=demo, instructions="Be brief.",
                         tools=["calculator"], created_by=ada)
    agent_publish(agent=agent, published_by=ada)
    agent_update(agent=agent, data={"instructions": "Be thorough.", "tools": []})

    admin_log_in(page, server)
    page.goto(f"{server.url}/admin/agents/agent/{agent.pk}/change/")
    panel = page.locator(".publish-panel")
    expect(panel).to_contain_text("Changes since v1")
    expect(panel.locator("table.publish-changes tbody tr")).to_have_count(2)
    expect(panel.locator("tr", has_text="Tools removed")).to_contain_text("calculator")
    button = page.get_by_role("button", name="Publish v2")
    expect(button).to_be_enabled()
    assert panel.evaluate("p => p.scrollWidth <= p.parentElement.clientWidth + 1")
    screenshot(page, "admin-agent-publish", full_page=True)

    page.locator("#id_name").fill("Helper, renamed")
    expect(button).to_be_disabled()
    expect(page.locator("#publish-note")).to_have_text(
        "You have unsaved changes: save them first, then publish what you saved.")
    page.locator("#id_name").press("Enter")  # implicit submission saves; it never publishes
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    assert agent.versions.count() == 1

    page.goto(f"{server.url}/admin/agents/agent/{agent.pk}/change/")
    expect(page.locator(".publish-panel tr", has_text="Name")).to_contain_text("Helper, renamed")
    page.get_by_role("button", name="Publish v2").click()
    expect(page.locator(".messagelist")).to_contain_text("Published Helper, renamed v2.")
    expect(page.locator(".publish-panel")).to_contain_text("Nothing to publish")
    expect(page.get_by_role("button", name="Publish v3")).to_be_disabled()
    assert list(agent.versions.values_list("version", flat=True)) == [2, 1]
    assert page.dialogs == [] and page.script_errors == []


def test_a_typed_figure_reads_manual_and_test_connection_answers_in_words(page, server, ada, ada_space,
                                                                         fake_provider):
    from models_catalog.models import ModelConnection
    from models_catalog.services import connection_create

    fake_provider.handler = route({"GET /v1/models": models_list(["qwen3", "qwen3-coder"])})
    connection = connection_create(space=ada_space, data={
        "name": "Local", "provider": "openai_compatible", "base_url": fake_provider.base_url, "model": "qwen3",
        "api_key": FAKE_KEY})
    admin_log_in(page, server)
    page.goto(f"{server.url}/admin/models_catalog/modelconnection/{connection.pk}/change/")
    source = page.locator(".field-window_source .figure-source")
    expect(source).to_contain_text("Platform default (check it).")
    page.locator("#id_context_window").fill("16384")
    expect(source).to_have_text("Manual: typed here, so it will be saved as manual.")
    page.locator("#id_context_window").fill("32768")
    expect(source).to_contain_text("Platform default (check it).")

    page.get_by_role("button", name="Test connection").click()
    result = page.locator("#test-connection-result .connection-test")
    expect(result).to_contain_text("with the stored key and lists 2 models, qwen3 among them")
    page.locator("#id_model").fill("qwen-3")
    page.get_by_role("button", name="Test connection").click()
    expect(result).to_contain_text("but not qwen-3. Did you mean qwen3")
    screenshot(page, "admin-connection-test", full_page=True)
    assert FAKE_KEY not in page.content()
    assert ModelConnection.objects.get(pk=connection.pk).model == "qwen3"  # nothing saved

    page.get_by_role("button", name="Discover models").click()
    page.locator("#discover-results tr", has_text="qwen3-coder").get_by_role("button", name="Use").click()
    expect(source).to_have_text("From the discovery result you used: Platform default (check it) "
                                "(saved with this source).")
    assert page.dialogs == [] and page.script_errors == []


@pytest.mark.parametrize("width", [1280, 390])
def test_a_new_connection_form_reads_top_to_bottom_with_discover_under_the_model(page_factory, server, ada, ada_space,
                                                                                  fake_provider, width):
    fake_provider.handler = route({"GET /v1/models": models_list(["qwen3", "qwen3-coder"])})
    page = page_factory(width=width, height=900, mobile=width < 500)
    admin_log_in(page, server)
    page.goto(f"{server.url}/admin/models_catalog/modelconnection/add/")
    expect(page.locator("#id_space")).to_have_value(str(ada_space.pk))  # the one space, chosen
    expect(page.locator(".field-stored_key")).to_have_count(0)
    expect(page.get_by_text("stored key")).to_have_count(0)
    expect(page.get_by_label("Remove the stored key")).to_have_count(0)

    model, discover = page.locator("#id_model"), page.get_by_role("button", name="Discover models")
    test, window = page.get_by_role("button", name="Test connection"), page.locator("#id_context_window")
    below_model = model.bounding_box()["y"] + model.bounding_box()["height"]
    for button in (discover, test):
        box = button.bounding_box()
        assert below_model <= box["y"] < window.bounding_box()["y"], (width, box)
        assert box["x"] + box["width"] <= width  # fully on screen
    assert discover.bounding_box()["y"] - below_model < 120  # right under the field, not a screen away
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    page.locator("#id_provider").select_option("openai_compatible")
    page.locator("#id_base_url").fill(fake_provider.url)  # without /v1
    discover.click()
    expect(page.locator("#discover-results")).to_contain_text(
        f"OpenAI-compatible servers usually serve under /v1 — try {fake_provider.url}/v1")
    page.locator("#id_base_url").fill(fake_provider.base_url)
    discover.click()
    page.locator("#discover-results tr", has_text="qwen3-coder").get_by_role("button", name="Use").click()
    expect(model).to_have_value("qwen3-coder")
    results = page.locator("#discover-results").bounding_box()
    assert results["x"] >= 0 and results["x"] + results["width"] <= width  # scrolls inside, never off screen
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, f"admin-connection-add-{width}", full_page=True)
    assert page.dialogs == [] and page.script_errors == []
