"""CTX-47 in the worker, end to end on the strict fakes of both wires: a tool-heavy session
whose trigger is resolved by folding older tool results, with no summary call; the next
request holds the notes, and ``read_record`` on a noted seq returns the whole body. With
``mask_tool_results: false`` the same session goes straight to the summary tier."""
from __future__ import annotations

import json
import re

import pytest

from agents.tool_registry import Tool, register, registry
from context.compaction import SECTION_TITLES
from runloop.loop import run_execute
from sessions.models import CompactionSnapshot, Run, RunEvent, SessionMessage
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream
from tests.fakes.summaries import is_summary
from web.folded import FOLDED_NOTICE

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")

REPORTS = 5
SUMMARY = "<summary>\n" + "\n".join(f"{n}. {SECTION_TITLES[n - 1]}: the reports were read, north region steady."
                                      for n in range(1, 10)) + "\n</summary>"
NOTE_RE = re.compile(r'read_record \{"seq": (\d+)\}')


def report(n: int) -> str:
    """A long report, different per call (so each record is its own body)."""
    return f"Report {n}\n" + "".join(f"row {n}-{i:03d}: region north, sales steady, margin fine\n"
                                     for i in range(70))


@pytest.fixture
def report_tool():
    register(Tool(name="big_report", description="A long report.",
                  parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
                  run=lambda arguments, context: report(int(arguments.get("n", 0))), idempotent=True))
    yield
    registry.pop("big_report")


class Agent:
    """Calls ``big_report`` REPORTS times, then reads back the first folded result it sees
    (when there is one), then answers. Summary requests are answered and counted."""

    def __init__(self) -> None:
        self.summary_calls = 0
        self.reports = 0
        self.read_back = False
        self.requests: list[list[dict]] = []

    def __call__(self, request):
        messages = request.json["messages"]
        if is_summary(messages):
            self.summary_calls += 1
            return chat_stream([SUMMARY])
        self.requests.append(messages)
        if self.reports < REPORTS:
            self.reports += 1
            return chat_stream(tool_calls=[{"id": f"r{self.reports}", "name": "big_report",
                                            "arguments": json.dumps({"n": self.reports - 1})}])
        noted = [int(s) for m in messages if m["role"] == "tool" for s in NOTE_RE.findall(_text(m["content"]))]
        if noted and not self.read_back:
            self.read_back = True
            return chat_stream(tool_calls=[{"id": "back", "name": "read_record",
                                            "arguments": json.dumps({"seq": noted[0]})}])
        return chat_stream(["All reports read."])


def _text(content) -> str:
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def run_reports(fake_session, strict, **policy):
    agent = Agent()
    strict.handler = agent
    session = fake_session(tools=("big_report", "read_record"), window=6_000, provider="openai",
                           model="gpt-4o-mini", context_policy=policy or None)
    run = question_ask(session=session, content="Read the reports and tell me about them.")
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    assert strict.rejections == []
    return session, run, agent


def test_ctx47_a_tool_heavy_trigger_is_resolved_by_masking_alone(fake_session, strict, report_tool, dialect):
    session, run, agent = run_reports(fake_session, strict)
    assert agent.summary_calls == 0
    compacted = [e.payload for e in RunEvent.objects.filter(run=run, type="compacted").order_by("id")]
    assert compacted and all(p["tiers"] == ["mask"] and p["masked_results"] >= 1 for p in compacted)
    payload = compacted[0]
    for snapshot in CompactionSnapshot.objects.filter(instance__run=run):
        assert snapshot.metrics["tiers"] == ["mask"] and snapshot.metrics["summary_calls"] == 0
        assert snapshot.metrics["mask_tokens_removed"] > 0
    # CTX-45: masking alone would do, so no summary was prepared in the background.
    assert not RunEvent.objects.filter(run=run, type="compaction_preparing").exists()
    # The next model request holds the notes in place of the older bodies, pairs intact.
    after = next(m for m in agent.requests
                 if any(NOTE_RE.search(_text(x["content"])) for x in m if x["role"] == "tool"))
    tool_messages = [m for m in after if m["role"] == "tool"]
    notes = [m for m in tool_messages if NOTE_RE.search(_text(m["content"]))]
    assert len(notes) == payload["masked_results"]
    called = [c["id"] for m in after if m["role"] == "assistant" for c in m.get("tool_calls") or ()]
    assert [m["tool_call_id"] for m in tool_messages] == called and "Report 0" not in _text(notes[0]["content"])
    assert "big_report" in _text(notes[0]["content"]) and "status ok" in _text(notes[0]["content"])
    # read_record on the noted seq returned the whole body.
    seq = int(NOTE_RE.search(_text(notes[0]["content"])).group(1))
    record = SessionMessage.objects.get(session=session, seq=seq)
    assert record.kind == "tool_result" and _text(record.message["content"]) == report(0)
    last = agent.requests[-1]
    read_back = _text(last[-1]["content"])
    assert last[-1]["role"] == "tool" and report(0) in read_back and "this is the end" in read_back
    # The chat's marker says which tier ran; the record behind it has no summary.
    summary = SessionMessage.objects.filter(session=session, kind="compaction_summary").order_by("seq").first()
    assert summary.message["summary"] is None and summary.message["metrics"]["masked_seqs"][0] == seq


def test_ctx47_the_chat_says_the_results_were_folded_and_which(fake_session, strict, report_tool, alice, client):
    session, run, _ = run_reports(fake_session, strict)
    folded = {seq for metrics in CompactionSnapshot.objects.filter(instance__run=run).values_list("metrics", flat=True)
              for seq in metrics["masked_seqs"]}
    assert folded
    client.force_login(alice)
    html = client.get(f"/sessions/{session.pk}/").content.decode()
    assert FOLDED_NOTICE in html and 'class="summary-marker"' not in html  # folded, not summarized
    badges = re.findall(r'step-folded-badge', html)
    marked = {int(n) for n in re.findall(r"reads it back whole when it needs it \(record (\d+)\)", html)}
    assert len(badges) == len(marked) and folded <= marked
    # Opening a folded step shows the result as recorded, whole.
    assert "row 0-069: region north, sales steady, margin fine" in html


def test_ctx47_off_in_the_policy_the_same_session_goes_straight_to_a_summary(fake_session, strict, report_tool,
                                                                             dialect):
    session, run, agent = run_reports(fake_session, strict, mask_tool_results=False)
    assert agent.summary_calls >= 1
    payload = RunEvent.objects.filter(run=run, type="compacted").first().payload
    assert payload["tiers"] == ["summary"] and payload["masked_results"] == 0
    assert not any(NOTE_RE.search(_text(m["content"])) for request in agent.requests for m in request)
