"""Compaction in the worker (CTX-30 … CTX-44), end to end against the strict fake provider."""
from __future__ import annotations

import json
import re

import pytest

from context.compaction import SECTION_TITLES
from context.compaction.code_summary import CODE_SUMMARY_MARK
from runloop.loop import run_execute
from sessions.models import CompactionSnapshot, Instance, Run, RunEvent, SessionMessage, SessionView
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream
from tests.fakes.responses import error
from tests.fakes.summaries import is_summary, summary_input

pytestmark = pytest.mark.django_db(transaction=True)
# Every scenario runs on both wires: OpenAI-style chat completions and Anthropic\'s Messages API (CAT-7).
DIALECTS = ("openai", "anthropic")

LONG = "Please keep this detail in mind: " + "the quarterly figures show steady growth across regions. " * 7
# A 4,000-token window counted with tiktoken (an OpenAI model id behind the fake endpoint).
SMALL = {"tools": (), "window": 4_000, "provider": "openai", "model": "gpt-4o-mini"}
VERY_LONG = LONG * 4


def is_summary_request(request) -> bool:
    return is_summary(request.json["messages"])


def scripted_summary(request) -> str:
    """A summarizer that fills section 6 with every user message it was shown."""
    prompt = summary_input(request.json["messages"])
    asked = re.findall(r"Question (\d+)", prompt)
    sections = [f"{n}. {SECTION_TITLES[n - 1]}: noted." for n in range(1, 10)]
    sections[5] = "6. All user messages: " + ", ".join(f"Question {q}" for q in dict.fromkeys(asked))
    return "<summary>\n" + "\n".join(sections) + "\n</summary>"


class Provider:
    """Answers questions; summarizes with ``summarize`` (a function of the request)."""

    def __init__(self, summarize=scripted_summary) -> None:
        self.summarize = summarize
        self.summary_calls = 0
        self.action_calls = 0

    def __call__(self, request):
        if is_summary_request(request):
            self.summary_calls += 1
            text = self.summarize(request)
            return chat_stream([text] if text else [])
        self.action_calls += 1
        return chat_stream([f"Noted, answer {self.action_calls}. " + "Growth is steady. " * 6])


def ask(session, content):
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_ctx30_a_small_window_agent_answers_six_long_questions_compacting_without_an_invalid_request(
        fake_session, fake, strict):
    provider = Provider()
    strict.handler = provider
    session = fake_session(**SMALL)
    for number in range(1, 7):
        run = ask(session, f"Question {number}. {VERY_LONG}")
        assert run.status == Run.Status.COMPLETED, (number, run.error)
    assert strict.rejections == []
    assert provider.summary_calls >= 1
    snapshots = CompactionSnapshot.objects.filter(instance__run__session=session)
    assert snapshots.exists()
    metrics = snapshots.order_by("-id").first().metrics
    after = metrics["tokens_after_calibrated"]
    assert after < metrics["tokens_before_calibrated"] and after < metrics["threshold"]
    # A tokenizer counted: tiktoken for the OpenAI id, its dense proxy for the Anthropic one (CTX-24).
    assert metrics["estimator_id"] in ("tiktoken-o200k_base-v1", "dense-o200k-v1") and metrics["summary_calls"] >= 1
    assert any(segment["consumed"] for segment in metrics["segments"])  # CTX-41: traceable to records
    assert RunEvent.objects.filter(run__session=session, type="compacted").exists()
    assert SessionMessage.objects.filter(session=session, kind="compaction_summary").exists()
    last_action = [r.json for r in fake.requests if not is_summary_request(r)][-1]
    assert last_action["messages"][-1]["content"].startswith("Question 6.")
    assert any("This session is being continued" in (m.get("content") or "") for m in last_action["messages"])


def test_ctx35_ctx48_a_summarizer_that_returns_nothing_gets_the_summary_written_by_code(fake_session, strict):
    provider = Provider(summarize=lambda request: "")
    strict.handler = provider
    session = fake_session(**SMALL)
    compacted = RunEvent.objects.filter(run__session=session, type="compacted")
    for n in range(1, 7):  # ask until the trigger fires
        run = ask(session, f"Question {n}. {VERY_LONG}")
        if compacted.exists():
            break
    else:
        pytest.fail("the history never reached the compaction trigger")
    assert run.status == Run.Status.COMPLETED, run.error
    assert provider.summary_calls == 3  # three attempts, then code writes it (CTX-35, CTX-48)
    snapshot = CompactionSnapshot.objects.get(instance__run__session=session)
    assert (snapshot.metrics["summary_source"], snapshot.metrics["summary_fallback"]) == ("code", "summary_failed")
    assert [v["problems"] for v in snapshot.metrics["summary_check"]] == [["empty"]] * 3
    summary = SessionMessage.objects.get(session=session, kind="compaction_summary").message["summary"]
    assert CODE_SUMMARY_MARK in summary and "Question 1." in summary
    assert not RunEvent.objects.filter(run__session=session, type="compaction_failed").exists()
    assert strict.rejections == []


def test_ctx44_after_a_failure_later_steps_back_off_instead_of_paying_for_more_summaries(fake_session, strict,
                                                                                        dialect):
    if dialect == "anthropic":
        pytest.skip("sized between trigger and hard limit for an OpenAI model's exact tokenizer; "
                    "the back-off rule does not depend on the wire")
    state = {"summaries": 0}

    def handler(request):
        if is_summary_request(request):
            state["summaries"] += 1
            # The provider cannot summarize (CTX-48: no reply to check, no summary written by code).
            return error(401, "invalid key", type="authentication_error")
        messages = request.json["messages"]
        questions = [m for m in messages if m["role"] == "user" and m["content"].startswith("Question")]
        steps = sum(1 for m in messages if m["role"] == "tool")
        if questions[-1]["content"].startswith("Question 2") and steps < 4:
            return chat_stream(tool_calls=[{"id": f"c{steps}", "name": "calculator",
                                            "arguments": '{"expression": "1+1"}'}])
        return chat_stream(["Done."])

    strict.handler = handler
    session = fake_session(**{**SMALL, "tools": ("calculator",)})
    assert ask(session, f"Question 1. {LONG * 12}").status == Run.Status.COMPLETED
    assert state["summaries"] == 0
    run = ask(session, f"Question 2. {LONG * 9}")  # now over the trigger, under the hard limit
    assert run.status == Run.Status.COMPLETED, run.error
    assert state["summaries"] == 1  # one failing preparation, no retry of a deterministic error, then back-off
    skipped = RunEvent.objects.filter(run=run, type="compaction_skipped")
    assert skipped.count() >= 3 and {e.payload["reason"] for e in skipped} == {"throttled_after_failure"}
    # The failure is remembered persistently: the next run of the session starts with it.
    follow_up = question_ask(session=session, content="Question 3. Short one.")
    inherited = Instance.objects.get(run=follow_up, key="main").frame["compaction_failure"]
    assert inherited == Instance.objects.get(run=run, key="main").frame["compaction_failure"]
    assert inherited["reason"] == "summary_failed"


def test_ctx39_a_window_too_small_for_the_system_prompt_stops_at_once_with_nothing_sent(fake_session, fake, strict):
    strict.handler = Provider()
    session = fake_session(tools=(), window=2_060)  # 2,060 - 1,024 output - 1,024 margin: 12 tokens of input
    run = ask(session, "Hello there, a question that cannot fit.")
    assert run.status == Run.Status.FAILED and run.error["code"] == "context_overflow"
    assert fake.requests == []


def test_ctx43_manual_compaction_of_a_finished_session_saves_a_view(fake_session, strict, alice):
    from rest_framework.test import APIClient

    from runloop.compaction_manual import compaction_manual

    strict.handler = Provider()
    session = fake_session(**SMALL, context_policy={"target_ratio": 0.2})  # history above target, under trigger
    for n in range(1, 3):
        assert ask(session, f"Question {n}. {VERY_LONG}").status == Run.Status.COMPLETED
    assert not CompactionSnapshot.objects.exists()
    client = APIClient()
    client.force_authenticate(alice)
    response = client.post(f"/api/v1/sessions/{session.pk}/compact")
    assert response.status_code == 202 and response.json()["status"] == "queued"
    assert compaction_manual(run_id=response.json()["run"]) == "compacted"
    # The chat's meter drops to the compacted size, under the trigger (the commit rule).
    measured = [e.payload for e in RunEvent.objects.filter(run_id=response.json()["run"], type="context_measured")
                .order_by("seq")]
    assert measured[-1]["tokens"] < measured[-2]["tokens"]
    assert measured[-1]["tokens"] < measured[-1]["trigger_tokens"]
    view = SessionView.objects.get(session=session)
    assert view.watermark == session.records.order_by("-seq").first().seq - 1  # up to the summary record
    follow_up = ask(session, "Question 4. What did I say first?")
    assert follow_up.status == Run.Status.COMPLETED, (follow_up.error, strict.rejections)
    assert strict.rejections == []


def test_ctx25_a_provider_counting_twice_our_estimate_moves_the_trigger_and_the_commit_rule(fake_session, fake, strict):
    from context import get_estimator

    estimator = get_estimator("gpt-4o-mini")

    def handler(request):
        if is_summary_request(request):
            return chat_stream([scripted_summary(request)])
        counted = 2 * estimator.request(request.json["messages"], request.json.get("tools"))
        return chat_stream(["Noted."], usage={"prompt_tokens": counted, "completion_tokens": 2})

    strict.handler = handler
    session = fake_session(**SMALL)
    assert ask(session, f"Question 1. {LONG * 9}").status == Run.Status.COMPLETED
    assert not CompactionSnapshot.objects.exists()  # under the trigger, calibrated or not
    second = ask(session, f"Question 2. {LONG * 3}")  # under the trigger by our count, over it by theirs
    assert second.status == Run.Status.COMPLETED, second.error
    snapshot = CompactionSnapshot.objects.get(instance__run=second)
    metrics = snapshot.metrics
    assert metrics["tokens_before_calibrated"] >= metrics["threshold"] > metrics["tokens_after_calibrated"]
    before_compaction = [{"role": "system", "content": "Be brief."},
                         {"role": "user", "content": f"Question 1. {LONG * 9}"},
                         {"role": "assistant", "content": "Noted."},
                         {"role": "user", "content": f"Question 2. {LONG * 3}"}]
    assert estimator.request(before_compaction) < metrics["threshold"]  # our count alone would not compact
    assert is_summary_request(fake.requests[1])  # the summary came before the second answer
    assert strict.rejections == []


def test_ctx43_manual_compaction_judges_the_commit_rule_with_the_agents_tool_schemas(fake_session, strict):
    from context import get_estimator
    from runloop.compaction_manual import compaction_manual
    from sessions.services.manual_compaction import compaction_request

    strict.handler = Provider()
    figures = {}
    for tools in ((), ("calculator", "current_time", "read_record")):
        session = fake_session(tools=tools, window=16_000, context_policy={"target_ratio": 0.05})
        for n in range(1, 4):
            assert ask(session, f"Question {n}. {VERY_LONG}").status == Run.Status.COMPLETED
        _, run = compaction_request(session=session)
        assert compaction_manual(run_id=run.pk) == "compacted"
        figures[tools] = CompactionSnapshot.objects.get(instance__run=run).metrics["tokens_before_estimated"]
    from agents.tool_registry import tool_schemas

    schemas = tool_schemas(["calculator", "current_time", "read_record"])
    expected = get_estimator("fake-model", exact_tokenizer=False).tools(schemas)
    assert figures[("calculator", "current_time", "read_record")] - figures[()] == expected > 0


def test_ctx42_a_tool_result_that_alone_overflows_is_cut_to_fit_and_recorded_as_its_own_trigger(fake_session, strict):
    from agents.tool_registry import Tool, register, registry

    huge = "LOG START\n" + "a line of output that goes on and on\n" * 3_000 + "FINAL ERROR: disk full\n"
    register(Tool(name="dump_log", description="Dump a log.", parameters={"type": "object", "properties": {}},
                  run=lambda arguments, context: huge, idempotent=True))
    try:
        def handler(request):
            last = request.json["messages"][-1]
            if is_summary_request(request):
                return chat_stream([scripted_summary(request)])
            if last["role"] == "tool" or "Runtime state" in str(last.get("content")):
                return chat_stream(["The disk is full."])
            if str(last.get("content")).startswith("Question 2"):
                return chat_stream(tool_calls=[{"id": "d1", "name": "dump_log", "arguments": "{}"}])
            return chat_stream(["Noted."])

        strict.handler = handler
        session = fake_session(tools=("dump_log",), window=8_000)
        assert ask(session, f"Question 1. {LONG}").status == Run.Status.COMPLETED
        run = ask(session, "Question 2. Why did the build fail? Dump the log.")
        assert run.status == Run.Status.COMPLETED, run.error
        snapshot = CompactionSnapshot.objects.get(instance__run=run)
        assert snapshot.metrics["trigger"] == "tool_output_overflow"
        assert strict.rejections == []
    finally:
        registry.pop("dump_log", None)


def test_ctx40_a_version_without_a_policy_runs_on_the_legacy_character_threshold(fake_session, strict,
                                                                                            fake):
    from agents.models import AgentVersion
    from context.legacy import DEFAULT_LEGACY_CHAR_LIMIT

    strict.handler = Provider()
    session = fake_session(tools=())
    AgentVersion.objects.filter(pk=session.version_id).update(context_policy=None)  # made before policies existed
    session.version.refresh_from_db()
    long = "x" * 25_000
    for n in range(1, 5):
        run = ask(session, f"Question {n}. {long}")
        assert run.status == Run.Status.COMPLETED, run.error
    sent = fake.requests[-1].json["messages"]
    assert sum(len(str(m.get("content"))) for m in sent) <= DEFAULT_LEGACY_CHAR_LIMIT + 2_000
    assert sent[0]["role"] == "system" and sent[-1]["content"].startswith("Question 4.")
    assert "Question 1." not in json.dumps(sent)  # the oldest groups gave way, whole
    assert not CompactionSnapshot.objects.exists()  # no summaries: the legacy policy only selects
    assert strict.rejections == []


def test_run10_a_resumed_attempt_starts_from_the_snapshot_its_interrupted_attempt_saved(fake_session, fake, strict):
    """The checkpoint an interrupted attempt committed is where the next attempt starts
    (RUN-10), not the records it summarized: here the snapshot covers the run's own
    question, so no session view can stand in for it (RUN-7)."""
    from sessions.selectors.records import view_best_for_run
    from sessions.services.checkpoints import checkpoint_commit
    from sessions.services.run_controls import run_resume

    strict.handler = lambda request: chat_stream(["First answer."])
    session = fake_session(tools=())
    first = ask(session, "First question: the quarterly figures.")
    assert first.status == Run.Status.COMPLETED, first.error
    run = question_ask(session=session, content="Second question: the regional figures.")
    main = Instance.objects.get(run=run, key=Instance.MAIN)
    question = SessionMessage.objects.get(run=run, kind="user")
    assert question.seq > run.inherited_watermark  # the snapshot will cover more than any view may
    summary = "<summary>\n1. Earlier: SNAPSHOT-MARK, both questions were about figures.\n</summary>"
    checkpoint_commit(run=run, instance=main, messages=[{"role": "user", "content": summary}],
                      covered_seq=question.seq, estimator_id="chars/4")
    best = view_best_for_run(run=run)  # a view this run may start from ends before its question (RUN-4)
    assert best is None or best.watermark < question.seq
    Run.objects.filter(pk=run.pk).update(status=Run.Status.INTERRUPTED)  # as the reaper leaves a dead worker's run
    run.refresh_from_db()
    run_resume(run=run)
    strict.handler = lambda request: chat_stream(["Second answer."])
    sent_before = len(fake.requests)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and run.attempt == 1, run.error
    sent = json.dumps(fake.requests[sent_before].json["messages"])
    assert "SNAPSHOT-MARK" in sent
    assert "First question" not in sent and "Second question" not in sent  # covered by the snapshot
    assert strict.rejections == []


def test_ctx43_a_manual_compaction_of_a_run_that_compacted_starts_from_its_snapshot(fake_session, strict, alice):
    """A finished run's main instance keeps the snapshot its execution saved; a manual
    compaction of that run measures and summarizes from it, not from the records it
    already replaced (RUN-10). Here the snapshot covers the run's own question, so no
    session view can stand in for it."""
    from rest_framework.test import APIClient

    from runloop.compaction_manual import compaction_manual
    from sessions.services.checkpoints import checkpoint_commit

    strict.handler = Provider()
    session = fake_session(**SMALL, context_policy={"target_ratio": 0.2})
    for n in range(1, 3):
        run = ask(session, f"Question {n}. {VERY_LONG}")
        assert run.status == Run.Status.COMPLETED
    question = SessionMessage.objects.get(run=run, kind="user")
    summary = "<summary>\n1. Earlier: two long questions about the figures, answered.\n</summary>"
    checkpoint_commit(run=run, instance=Instance.objects.get(run=run, key=Instance.MAIN),
                      messages=[{"role": "user", "content": summary}], covered_seq=question.seq, estimator_id="chars/4")
    client = APIClient()
    client.force_authenticate(alice)
    response = client.post(f"/api/v1/sessions/{session.pk}/compact")
    assert response.status_code == 202 and response.json()["run"] == run.pk, response.json()
    before = RunEvent.objects.filter(run=run).order_by("-seq").first().seq
    compaction_manual(run_id=run.pk)
    started = RunEvent.objects.get(run=run, type="compaction_started", seq__gt=before).payload
    # From the snapshot: its summary and the answer after it, far under one long question
    # (from the records, both long questions were measured again: 679 tokens).
    assert started["tokens_before_calibrated"] < len(VERY_LONG) // 8, started
    assert strict.rejections == []
