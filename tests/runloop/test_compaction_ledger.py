"""CTX-49 end to end: the artifact ledger rides every compaction, on both wires.

A session on the strict fake provider with a real tool server on loopback: the first
question fetches a URL (refused: a private address, so the fetch failed) and calls a
server tool with side effects (``increment``, no read-only hint: done); the second a tool
whose result names resources. Every question compacts first, the summarizer says nothing
of any of it, and after the third chained compaction the request still lists the URL, the
side-effect call with its outcome and the resources, each with the call that reads it back.
"""
from __future__ import annotations

import json
import re

import pytest

from context.compaction import RUNTIME_STATE_HEADER, SECTION_TITLES
from context.compaction.ledger import LEDGER_TITLE
from sessions.models import Run, RunEvent, SessionMessage
from sessions.services.pins import pin_set
from tests.fakes.fake_provider import chat_stream
from tests.fakes.mcp_servers import ToolServerApp
from tests.fakes.summaries import is_summary
from tests.runloop.driving import ask_and_run

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")

URL = "http://10.0.0.5/reports/quarterly"
LONG = "Here are the figures for every region in detail. " * 20


def _call(call_id: str, name: str, arguments: dict) -> dict:
    return {"id": call_id, "name": name, "arguments": json.dumps(arguments)}


def _text(content) -> str:
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


class Model:
    """A model that uses its tools on the first two questions and answers at length; a
    summarizer that writes nine sections saying nothing of files, URLs or calls."""

    def __init__(self) -> None:
        self.actions: list[list[dict]] = []
        self.summaries = 0

    def __call__(self, request):
        messages = request.json["messages"]
        if is_summary(messages):
            self.summaries += 1
            sections = "\n".join(f"{n}. {SECTION_TITLES[n - 1]}: the user asked about regional figures; work went on."
                                 for n in range(1, 10))
            return chat_stream([f"<summary>\n{sections}\n</summary>"])
        self.actions.append(messages)
        # The question being asked: the last one named in the last user turn (on Anthropic's
        # wire the anchor shares its turn with the summary and the runtime-state block).
        asked = re.findall(r"Question (\d):", _text(messages[-1].get("content"))) if messages[-1]["role"] == "user" \
            else []
        if asked[-1:] == ["1"]:
            return chat_stream(tool_calls=[_call("fetch-1", "http_fetch", {"url": URL}),
                                           _call("inc-1", "tests__increment", {"by": 2})])
        if asked[-1:] == ["2"]:
            return chat_stream(tool_calls=[_call("links-1", "tests__links", {})])
        return chat_stream([LONG])


def _session(space, alice, fake, dialect, server):
    from agents.services import agent_create, agent_publish
    from models_catalog.models import ModelConnection
    from sessions.models import Session
    from tests.runloop.conftest import DIALECT_PROVIDERS, FAKE_KEY
    from toolservers.services import toolserver_register

    toolserver_register(space=space, data={"name": "tests", "url": server.url, "headers": server.headers})
    provider, model = DIALECT_PROVIDERS[dialect]
    connection = ModelConnection.objects.create(space=space, name="Fake", provider=provider, base_url=fake.base_url,
                                                api_key=FAKE_KEY, model=model, context_window=16_000,
                                                max_output_tokens=1_024)
    agent = agent_create(space=space, name="Agent", model_connection=connection, instructions="Be brief.",
                         tools=["http_fetch", "read_record", "tests.increment", "tests.links"],
                         tool_overrides={"tests.increment": {"approval": "never"}},  # approved beforehand (TOOL-7)
                         context_policy={"user_turns": 1, "target_ratio": 0.05}, created_by=alice)
    return Session.objects.create(space=space, user=alice, agent=agent, version=agent_publish(agent=agent))


def _block(messages: list[dict]) -> str:
    """The runtime-state block of a request: its own message on OpenAI's wire, the tail of
    the user turn it was merged into on Anthropic's (consecutive user messages are one turn)."""
    texts = [_text(m.get("content")) for m in messages if RUNTIME_STATE_HEADER in _text(m.get("content"))]
    assert len(texts) == 1 and texts[0].count(RUNTIME_STATE_HEADER) == 1, messages
    return texts[0][texts[0].index(RUNTIME_STATE_HEADER):]


def test_ctx49_after_three_chained_compactions_the_request_lists_the_url_and_the_side_effect_call(
        space, alice, fake, strict, dialect):
    model = Model()
    strict.handler = model
    with ToolServerApp() as server:
        session = _session(space, alice, fake, dialect, server)
        for n in range(1, 5):
            run = ask_and_run(session, f"Question {n}: how do the regions compare? " + "Detail. " * 60)
            assert run.status == Run.Status.COMPLETED, (n, run.error)
            if n == 1:  # the first question, pinned by default (CTX-50), would stay verbatim and leave
                # this short, every-turn history nothing to gain from some compactions: unpinned
                pin_set(session=session, seq=1, pinned=False, by=session.user_id)
        assert server.effects == 2  # the side effect happened once
    assert RunEvent.objects.filter(run__session=session, type="compacted").count() >= 3
    assert model.summaries >= 3
    results = {m.message["tool_call_id"]: m for m in SessionMessage.objects.filter(session=session,
                                                                                     kind="tool_result")}
    assert results["fetch-1"].message["status"] == "error" and results["inc-1"].message["status"] == "ok"
    request = model.actions[-1]  # the last question's request, after the third compaction
    assert any("Question 4" in _text(m.get("content")) for m in request)
    block = _block(request)
    assert LEDGER_TITLE in block
    # The URL of the first question: fetched, failed, and where its result is kept.
    assert f"- URL {URL}, fetched: failed — read_record {{\"seq\": {results['fetch-1'].seq}}}" in block
    # The side-effect call, with its outcome, once.
    assert block.count("tests__increment") == 1
    assert (f"- tests__increment (call inc-1) with arguments {{\"by\": 2}}: done — "
            f"read_record {{\"seq\": {results['inc-1'].seq}}}") in block
    # The server's resources, named by the tool that returned them.
    assert "file:///srv/report.csv" in block and "file:///srv/notes.txt" in block
    # Newest first: the resources of the second question before the calls of the first.
    assert block.index("file:///srv/report.csv") < block.index("tests__increment") < block.index(URL)
    # Read-only server tools are not side-effect calls: listed as what they named, never as a call.
    assert "tests__links (call" not in block
    # The summarizer never wrote any of it: only the block carries it.
    assert sum(_text(m.get("content")).count(URL) for m in request) == 1
