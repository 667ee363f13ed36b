"""The context inspector per model call (SPEC §10): what changed since the previous call
(first changed position: where a prompt cache stops matching), the projector's repairs,
the provider's usage with its cache figures — in the console and in the API alike.

Runs are driven by the real loop against the strict fake provider, on both wires.
"""
from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.html import escape
from rest_framework.test import APIClient

from context.usage import usage_figures
from runloop.loop import run_execute
from sessions.models import AccessAudit, CompactionSnapshot, ModelCall, Run
from sessions.run_errors import RunError
from sessions.selectors.instances import main_instance
from sessions.selectors.model_calls import model_call_repairs
from sessions.services.model_steps import step_save_assistant
from sessions.services.questions import question_ask
from sessions.services.retention import call_logs_prune
from sessions.services.runs import run_claim, run_finish
from tests.admin_console.conftest import model_call
from tests.fakes.fake_provider import chat_stream, sequence
from tests.runloop.test_compaction import SMALL, VERY_LONG, Provider

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")


def context(run_id: int) -> str:
    return f"/admin/agent_sessions/run/{run_id}/context/"


def ask(session, content: str) -> Run:
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def section(html: str, call_id: int) -> str:
    """One call's detail section of the inspector page."""
    start = html.index(f'<section class="module call-detail" id="call-{call_id}"')
    return html[start:html.index("</section>", start)]


def first_change_rows(html: str) -> list[str]:
    return re.findall(r'<tr class="[^"]*\bfirst-change\b[^"]*"(?: id="([^"]+)")?', html)


def tool_step(dialect: str):
    """A question answered after one calculator call; on OpenAI's wire the provider
    reports cached input, on Anthropic's the fake's prompt cache counts it."""
    usage = {"openai": [{"prompt_tokens": 120, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 0}},
                        {"prompt_tokens": 180, "completion_tokens": 5,
                         "prompt_tokens_details": {"cached_tokens": 128}}],
             "anthropic": [None, None]}[dialect]
    return sequence(
        chat_stream(tool_calls=[{"id": "call_a", "name": "calculator", "arguments": json.dumps({"expression": "6*7"})}],
                    usage=usage[0]),
        chat_stream(["It is 42."], usage=usage[1]))


def test_a_tool_step_shows_two_new_messages_after_an_unchanged_prefix_and_the_cache_it_read(
        fake_session, strict, console, dialect):
    strict.handler = tool_step(dialect)
    run = ask(fake_session(), "What is 6*7?")
    assert run.status == Run.Status.COMPLETED, run.error
    first, second = ModelCall.objects.filter(run=run).order_by("id")
    html = console.get(context(run.pk)).content.decode()
    assert "The first action call of this session: nothing to compare with." in section(html, first.pk)
    detail = section(html, second.pk)
    assert f'Since <a href="#call-{first.pk}">call #{first.pk}</a>, the previous action call of this instance' in detail
    assert "2 kept, 0 rewritten, 2 new, 0 removed." in detail
    assert "<strong>First changed position: 2</strong>" in detail
    assert first_change_rows(detail) == [f"call-{second.pk}-m2"]  # the assistant's tool call, highlighted
    # The provider's own figures, split: uncached input, cache read, cache written, output.
    shown = dict(re.findall(r'<dd data-usage="(\w+)">([\d,]+)', detail))
    expected = {"openai": {"input_uncached": "52", "cache_read": "128", "cache_written": "0", "output": "5"},
                "anthropic": None}[dialect]
    if dialect == "anthropic":
        # The fake cache read the whole first request back: it ended at the first breakpoint.
        assert second.usage["cache_read_input_tokens"] == first.usage["prompt_tokens"] > 0
        expected = {"input_uncached": f"{second.usage['input_tokens']:,}",
                    "cache_read": f"{second.usage['cache_read_input_tokens']:,}",
                    "cache_written": f"{second.usage['cache_creation_input_tokens']:,}",
                    "output": f"{second.usage['output_tokens']:,}"}
    assert shown == expected
    assert strict.rejections == []


def test_the_api_returns_the_same_diff_usage_figures_and_repairs(fake_session, strict, alice, dialect):
    strict.handler = tool_step(dialect)
    run = ask(fake_session(), "What is 6*7?")
    client = APIClient()
    client.force_authenticate(alice)
    first, second = client.get(f"/api/v1/runs/{run.pk}/context").json()["calls"]
    assert first["diff"] is None and first["repairs"] == []
    assert second["diff"] == {"previous": first["id"], "tools_changed": False, "first_changed": 2,
                              "counts": {"kept": 2, "rewritten": 0, "added": 2, "removed": 0},
                              "spans": [{"status": "kept", "before": [0, 2], "after": [0, 2]},
                                        {"status": "added", "before": [2, 2], "after": [2, 4]}]}
    assert second["usage_figures"] == usage_figures(ModelCall.objects.get(pk=second["id"]).usage).as_dict()
    assert second["usage_figures"]["reported"] and second["usage_figures"]["cache_read"] > 0


def test_a_compaction_moves_the_first_change_to_just_after_the_system_message(fake_session, strict, console):
    strict.handler = Provider()
    session = fake_session(**SMALL)
    runs = [ask(session, f"Question {n}. {VERY_LONG}") for n in range(1, 7)]
    assert all(run.status == Run.Status.COMPLETED for run in runs), [run.error for run in runs]
    snapshot = CompactionSnapshot.objects.filter(instance__run__session=session).order_by("id").first()
    assert snapshot is not None
    run = snapshot.instance.run
    call = ModelCall.objects.filter(run=run, purpose="action").order_by("id").first()
    earlier = ModelCall.objects.filter(run__session=session, run_id__lt=run.pk, purpose="action").order_by("id").last()
    html = console.get(context(run.pk)).content.decode()
    detail = section(html, call.pk)
    # A new question extends the previous run's last call, unless the history was summarized.
    assert f"call #{earlier.pk}</a>, the last action call of the session's previous run" in detail
    assert "<strong>First changed position: 1</strong>" in detail
    assert first_change_rows(detail) == [f"call-{call.pk}-m1"]
    removed = re.search(r"(\d+) removed\.", detail)
    assert removed and int(removed.group(1)) >= 1
    assert "What call #" in detail  # the removed turns are one click away
    audit = AccessAudit.objects.filter(what="context_inspector").get()
    assert audit.detail["compared_with"] == [earlier.pk]


def test_a_question_that_only_extends_the_history_changes_nothing_before_its_new_messages(
        fake_session, strict, console):
    strict.handler = lambda request: chat_stream(["Noted."])
    session = fake_session(tools=())
    ask(session, "First question")
    second = ask(session, "Second question")
    call = ModelCall.objects.get(run=second)
    detail = section(console.get(context(second.pk)).content.decode(), call.pk)
    # [system, question 1] then [system, question 1, answer 1, question 2]
    assert "2 kept, 0 rewritten, 2 new, 0 removed." in detail
    assert "<strong>First changed position: 2</strong>" in detail


def test_changed_tools_leave_a_prompt_cache_nothing_to_match(console, story):
    calculator = {"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}
    clock = {"type": "function", "function": {"name": "current_time", "parameters": {"type": "object"}}}
    model_call(story.first, tools=[calculator])
    later = model_call(story.first, tools=[calculator, clock])
    detail = section(console.get(context(story.first.pk)).content.decode(), later.pk)
    assert "<strong>The tool list changed</strong>" in detail
    assert first_change_rows(detail) == [f"call-{later.pk}-m0"]


def with_repairs(call: ModelCall, repairs: list[dict]) -> ModelCall:
    """The repairs as the loop stores them beside the call's request (format 2)."""
    request = dict(call.request)
    request["repairs"] = repairs
    ModelCall.objects.filter(pk=call.pk).update(request=request)
    return ModelCall.objects.get(pk=call.pk)


def test_each_repair_is_listed_with_its_reason_its_record_and_its_message(console, story):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Read the log"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "calculator", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "line\n[… cut: read_record(seq=3) …]"}]
    call = with_repairs(model_call(story.first, messages=messages), [
        {"kind": "truncated", "reason": "24,000 of 91,000 characters shown", "seq": 3, "position": 3,
         "call_id": "call_1"},
        {"kind": "id_rewritten", "reason": "call_1 was already used earlier in the session", "seq": 2,
         "position": 2, "call_id": "call_1"},
        {"kind": "a_new_kind", "reason": "", "seq": None, "position": None}])
    detail = section(console.get(context(story.first.pk)).content.decode(), call.pk)
    assert "3 repairs the projector made for this request" in detail
    assert "Tool output cut to fit" in detail and "24,000 of 91,000 characters shown" in detail
    assert "Call id renumbered" in detail and "a new kind" in detail
    assert f'<a href="#call-{call.pk}-m3">3</a>' in detail
    assert f"/admin/agent_sessions/session/{story.session.pk}/records/?after=2&amp;limit=1" in detail
    row = re.search(rf'<tr [^>]*id="call-{call.pk}-m3">(.*?)</tr>', detail, flags=re.S).group(1)
    assert 'title="24,000 of 91,000 characters shown">Tool output cut to fit</span>' in row
    client = APIClient()
    client.force_authenticate(story.session.user)
    [served] = client.get(f"/api/v1/runs/{story.first.pk}/context").json()["calls"]
    assert served["repairs"][0] == {"kind": "truncated", "reason": "24,000 of 91,000 characters shown", "seq": 3,
                                    "position": 3, "call_id": "call_1"}


def test_a_call_without_repairs_says_so(console, story):
    call = model_call(story.first)
    assert "The projector made no repairs for this request." in section(
        console.get(context(story.first.pk)).content.decode(), call.pk)


def test_the_repairs_the_loop_kept_are_shown_with_their_reasons_on_both_wires(fake_session, strict, console, dialect):
    strict.handler = lambda request: chat_stream(["I cannot tell whether it was paid."])
    session = fake_session(tools=("delegate",))
    crashed = run_claim(run_id=question_ask(session=session, content="Pay the invoice.").pk)
    step_save_assistant(run=crashed, instance=main_instance(run=crashed), entry_key="assistant-1", message={
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "pay:1/a", "type": "function", "function": {"name": "delegate", "arguments": "{}"}}]})
    assert run_finish(run=crashed, status=Run.Status.INTERRUPTED, reason="the worker stopped responding",
                      error=RunError("interrupted", "resume", retryable=True))
    run = ask(session, "Was it paid?")
    call = ModelCall.objects.get(run=run)
    detail = section(console.get(context(run.pk)).content.decode(), call.pk)
    assert "2 repairs the projector made for this request" in detail
    assert "Call id renumbered" in detail and "Unknown outcome: result written in" in detail
    for repair in model_call_repairs(call=call):  # each with its reason, its call id and its record
        assert escape(repair["reason"]) in detail and f'<span class="call-id">{repair["call_id"]}</span>' in detail
        assert f"records/?after={repair['seq'] - 1}&amp;limit=1" in detail
    links = re.findall(rf'<a href="#call-{call.pk}-m(\d+)">', detail)
    if dialect == "anthropic":  # turns merged in a native body: no position to point at
        assert links == []
    else:  # the call at 2, its written-in result at 3, each badged on its row
        assert links == ["2", "3"]
        row = re.search(rf'<tr [^>]*id="call-{call.pk}-m3">(.*?)</tr>', detail, flags=re.S).group(1)
        assert "Unknown outcome: result written in</span>" in row


def test_a_call_whose_previous_copy_was_dropped_after_the_retention_period_compares_nothing(
        fake_session, strict, console, alice):
    strict.handler = lambda request: chat_stream(["Noted."])
    session = fake_session(tools=())
    first = ask(session, "First question")
    second = ask(session, "Second question")
    ModelCall.objects.filter(run=first).update(created_at=timezone.now() - timedelta(days=10))
    type(session.agent).objects.filter(pk=session.agent_id).update(call_log_retention_days=7)
    call_logs_prune()
    old, call = ModelCall.objects.get(run=first), ModelCall.objects.get(run=second)
    assert old.pruned_at is not None
    detail = section(console.get(context(second.pk)).content.decode(), call.pk)
    assert f"What call #{old.pk} received was dropped after the agent's retention period" in detail
    assert first_change_rows(detail) == [] and "Since #" not in detail
    client = APIClient()
    client.force_authenticate(alice)
    assert client.get(f"/api/v1/runs/{second.pk}/context").json()["calls"][0]["diff"] is None
