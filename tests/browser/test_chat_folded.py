"""CTX-47 in the chat, in a real browser: a compaction that folded older tool results (no
summary) is announced as such while the run works, and once the run is shown again each
folded step carries its badge and opens to the result, whole as recorded."""
from __future__ import annotations

import json
import re
import threading

import pytest

from agents.tool_registry import Tool, register, registry
from tests.browser.conftest import FAKE_KEY, LAST_RUN, SETTLED, ask, log_in
from tests.fakes.fake_provider import chat_stream
from tests.runloop.worker import wait_for
from web.folded import FOLDED_NOTICE

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
expect = sync_api.expect

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]

NOTE_RE = re.compile(r'read_record \{"seq": (\d+)\}')


def report(n: int) -> str:
    return f"Report {n}\n" + "".join(f"row {n}-{i:03d}: region north, sales steady, margin fine\n" for i in range(70))


@pytest.fixture
def folding_session(space, alice, fake_provider):
    """A 6,000-token window counted with tiktoken, an agent with a long report tool and
    read_record, under the default policy (masking on)."""
    from agents.services import agent_create, agent_publish
    from models_catalog.models import ModelConnection
    from sessions.models import Session

    register(Tool(name="big_report", description="A long report.",
                  parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
                  run=lambda arguments, context: report(int(arguments.get("n", 0))), idempotent=True))
    connection = ModelConnection.objects.create(
        space=space, name="Small", provider="openai", base_url=fake_provider.base_url, api_key=FAKE_KEY,
        model="gpt-4o-mini", context_window=6_000, max_output_tokens=1_024)
    agent = agent_create(space=space, name="Analyst", model_connection=connection, instructions="Be brief.",
                         tools=["big_report", "read_record"], created_by=alice)
    version = agent_publish(agent=agent, published_by=alice)
    yield Session.objects.create(space=space, user=alice, agent=agent, version=version)
    registry.pop("big_report")


def test_ctx47_the_chat_says_older_results_were_folded_and_marks_each(page, server, fake_provider,
                                                                       folding_session):
    folded, release = threading.Event(), threading.Event()
    state = {"reports": 0}

    def handler(request):
        messages = request.json["messages"]
        if state["reports"] < 5:
            state["reports"] += 1
            return chat_stream(tool_calls=[{"id": f"r{state['reports']}", "name": "big_report",
                                            "arguments": json.dumps({"n": state["reports"] - 1})}])
        if any(m["role"] == "tool" and NOTE_RE.search(m.get("content") or "") for m in messages):
            folded.set()  # the request after the compaction: held until the page was looked at
            release.wait(timeout=60)
        return chat_stream(["All reports read."])

    fake_provider.handler = handler
    log_in(page, server, next_path=f"/sessions/{folding_session.pk}/")
    ask(page, "Read the reports and tell me about them.")
    wait_for(folded.is_set)
    expect(page.locator(f"{LAST_RUN} .notice").first).to_have_text(FOLDED_NOTICE)  # live, from the compacted event
    release.set()
    page.wait_for_selector(SETTLED, timeout=15_000)
    expect(page.locator(f"{LAST_RUN} .notice").first).to_have_text(FOLDED_NOTICE)  # the run shown again
    badges = page.locator(f"{LAST_RUN} .step-folded-badge")
    assert badges.count() >= 1
    step = page.locator(f"{LAST_RUN} details.step").filter(has=page.locator(".step-folded-badge")).first
    step.locator("summary").click()
    expect(step.locator(".step-folded")).to_contain_text("reads it back whole")
    expect(step.locator(".step-pre").last).to_contain_text("row 0-069: region north, sales steady, margin fine")
