"""CTX-49 in the console: the context inspector shows the runtime-state block of a compacted
request with its artifact ledger, one entry a line, marked as written by the platform.

olivia, the operator, reads alice's run, driven by the real loop on the strict fake.
"""
from __future__ import annotations

import html
import json

import pytest

from context.compaction import SECTION_TITLES
from context.compaction.ledger import LEDGER_TITLE
from runloop.loop import run_execute
from sessions.models import ModelCall, Run, SessionMessage
from sessions.services.pins import pin_set
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream
from tests.fakes.summaries import is_summary

pytestmark = pytest.mark.django_db(transaction=True)

URL = "http://10.0.0.5/quarterly.csv"


def _handler(request):
    messages = request.json["messages"]
    if is_summary(messages):
        sections = "\n".join(f"{n}. {SECTION_TITLES[n - 1]}: regional figures were discussed." for n in range(1, 10))
        return chat_stream([f"<summary>\n{sections}\n</summary>"])
    if messages[-1]["role"] == "user" and str(messages[-1]["content"]).startswith("Question 1"):
        return chat_stream(tool_calls=[{"id": "f1", "name": "http_fetch", "arguments": json.dumps({"url": URL})}])
    return chat_stream(["Here are the figures for every region in detail. " * 20])


def test_ctx49_the_inspector_shows_the_ledger_of_a_compacted_request_line_by_line(fake_session, strict, console):
    strict.handler = _handler
    session = fake_session(tools=("http_fetch",), window=16_000,
                           context_policy={"user_turns": 1, "target_ratio": 0.05})
    runs = []
    for n in (1, 2):
        run = question_ask(session=session, content=f"Question {n}: compare the regions. " + "Detail. " * 60)
        run_execute(run_id=run.pk)
        run.refresh_from_db()
        assert run.status == Run.Status.COMPLETED, run.error
        runs.append(run)
        if n == 1:  # the first question, pinned by default (CTX-50), would stay verbatim and leave
            # this two-question history nothing to gain from compacting: unpinned
            pin_set(session=session, seq=1, pinned=False, by=session.user_id)
    fetched = SessionMessage.objects.get(session=session, kind="tool_result")
    action = ModelCall.objects.filter(run=runs[1], purpose="action").order_by("id").first()
    page = html.unescape(console.get(f"/admin/agent_sessions/run/{runs[1].pk}/context/").content.decode())
    detail = page[page.index(f'id="call-{action.pk}"'):]
    assert LEDGER_TITLE in detail
    assert f"\n- URL {URL}, fetched: failed — read_record {{\"seq\": {fetched.seq}}}" in detail
    assert "runtime state: by the platform" in detail
