"""The context inspector is exact and O(new): every call of a long run is rebuilt from its
references byte for byte as the provider received it, and the log grows with what is new.

The run is driven by a real transcript of the shared corpus when it is there (tau-bench's
airline conversations: their user turns, tool calls and tool outputs), by generated text
otherwise; it is long and tool-heavy, and a small window makes it compact on the way, so
the stored deltas cover appended steps, a shrunk prefix after a compaction, summary calls
and a new run of the same session.
"""
from __future__ import annotations

import itertools
import json

import pytest

from agents.tool_registry import Tool, register, registry
from context.compaction import SECTION_TITLES
from models_catalog.providers.chat_http import body_bytes
from runloop.loop import run_execute
from sessions.models import CompactionSnapshot, ModelCall, Run, SentBlob
from sessions.selectors.model_calls import model_call_body
from sessions.services.questions import question_ask
from tests.conftest import SHARED
from tests.fakes.fake_provider import chat_stream
from tests.fakes.summaries import is_summary

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")

TAU = SHARED / "corpus" / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json"


def _script() -> tuple[list[str], list[str]]:
    """Questions and tool outputs: from a real conversation when the corpus is here."""
    if TAU.is_file():
        conversation = json.loads(TAU.read_text(encoding="utf-8"))[3]["traj"]
        questions = [m["content"] for m in conversation if m["role"] == "user" and m.get("content")]
        outputs = [m["content"] for m in conversation if m["role"] == "tool" and m.get("content")]
        if questions and outputs:
            return questions[:4], outputs
    return ([f"Question {n}: please look up booking {n} and tell me about it." for n in range(4)],
            [f"Booking {n}: " + "flight LX318, seat 12A, fare class Y. " * 20 for n in range(12)])


@pytest.fixture
def lookup_tool():
    outputs = itertools.cycle(_script()[1])
    register(Tool(name="lookup", description="Look something up.", parameters={"type": "object"},
                  run=lambda arguments, context: next(outputs), idempotent=True))
    yield
    registry.pop("lookup", None)


def test_every_call_of_a_long_run_rebuilds_byte_for_byte_and_the_log_stores_only_what_is_new(
        fake_session, strict, fake, lookup_tool):
    questions, _ = _script()
    steps = itertools.count()

    def handler(request):
        messages = request.json["messages"]
        if is_summary(messages):
            sections = "\n".join(f"{n}. {SECTION_TITLES[n - 1]}: noted." for n in range(1, 10))
            return chat_stream([f"<summary>\n{sections}\n</summary>"])
        tools_since_question = 0
        for message in reversed(messages):
            if message["role"] == "user":
                break
            tools_since_question += message["role"] == "tool"
        if tools_since_question < 4:
            step = next(steps)
            return chat_stream([f"Step {step}: checking."],
                               tool_calls=[{"id": f"call_{step}", "name": "lookup",
                                            "arguments": json.dumps({"n": step})}])
        return chat_stream(["Here is what I found, in detail. " * 10])

    strict.handler = handler
    # A window that compacts once on either script under the estimate for unknown models
    # (CTX-24's dense-o200k-v1 counts the bookings' digits one by one).
    # The summary tier, so the log holds summary calls too (folding would need none).
    session = fake_session(tools=("lookup",), window=7_000, context_policy={"mask_tool_results": False})
    for question in questions:
        run = question_ask(session=session, content=question)
        run_execute(run_id=run.pk)
        run.refresh_from_db()
        assert run.status == Run.Status.COMPLETED, run.error
    assert strict.rejections == []
    assert CompactionSnapshot.objects.filter(instance__run__session=session).exists()  # the prefix shrank once

    calls = list(ModelCall.objects.filter(run__session=session).order_by("id"))
    sent = [request for request in fake.requests if request.method == "POST"]
    assert len(calls) == len(sent) > 20
    for call, request in zip(calls, sent):
        assert body_bytes(model_call_body(call=call)) == request.body, call.pk

    # O(new): each distinct piece is stored once, and no call holds a copy of the history.
    pieces = sum(len(body["messages"]) for body in (json.loads(r.body) for r in sent))
    blobs = SentBlob.objects.filter(session=session).count()
    # A step adds an answer and a result (and, on Anthropic's wire, re-marks the cache
    # breakpoint on the message before them): a few pieces a call, not its whole history.
    assert blobs <= 4 * len(calls) < pieces
    longest_delta = max(len(call.request["add"]) for call in calls)
    assert longest_delta < max(len(json.loads(r.body)["messages"]) for r in sent)
