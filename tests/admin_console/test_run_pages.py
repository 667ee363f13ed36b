"""A run's event timeline and context inspector in the console (SPEC §10, LOOP-5, CTX-25)."""
from __future__ import annotations

import re

import pytest

from sessions.models import AccessAudit
from sessions.services.events import event_emit
from tests.admin_console.conftest import SECRET, model_call

pytestmark = pytest.mark.django_db


def events(run_id: int) -> str:
    return f"/admin/agent_sessions/run/{run_id}/events/"


def context(run_id: int) -> str:
    return f"/admin/agent_sessions/run/{run_id}/context/"


def emit_answer(run_id: int) -> None:
    event_emit(run_id=run_id, type="run_started", data={"attempt": 0})  # 1
    for piece in ("The vault ", "code is ", "safe."):  # 2, 3, 4
        event_emit(run_id=run_id, type="message_delta", data={"instance": "main", "text": piece})
    event_emit(run_id=run_id, type="tool_call_detected",  # 5
               data={"call_id": "call_1", "name": "calculator", "arguments": '{"expression": "6*7"}'})
    event_emit(run_id=run_id, type="tool_finished",  # 6
               data={"call_id": "call_1", "name": "calculator", "status": "ok", "duration_ms": 12})
    event_emit(run_id=run_id, type="thinking_delta", data={"instance": "main", "text": "hmm"})  # 7
    event_emit(run_id=run_id, type="message_delta", data={"instance": "main", "text": "Done."})  # 8
    event_emit(run_id=run_id, type="run_finished", data={"status": "completed", "error": None})  # 9


def rows_of(html: str) -> list[tuple[str, str]]:
    """(seq cell, event type) per timeline row."""
    return re.findall(r'<td class="seq">([^<]*(?:&ndash;[^<]*)?)</td>.*?<span class="event-type">([^<]+)</span>',
                      html, flags=re.S)


def test_the_timeline_lists_events_in_seq_order_with_deltas_folded_into_their_text(console, olivia, story):
    emit_answer(story.first.pk)
    page = console.get(events(story.first.pk))
    assert page.status_code == 200
    html = page.content.decode()
    assert rows_of(html) == [("1", "run_started"), ("2&ndash;4", "message_delta"), ("5", "tool_call_detected"),
                             ("6", "tool_finished"), ("7", "thinking_delta"), ("8", "message_delta"),
                             ("9", "run_finished")]
    assert "The vault code is safe." in html and "&times;3" in html
    assert "<dt>duration_ms</dt><dd>12</dd>" in html and "<dt>status</dt><dd>ok</dd>" in html
    assert re.search(r"\+\d+\.\d\d s", html)  # time since the run started
    audit = AccessAudit.objects.get()
    assert (audit.user, audit.what, audit.run, audit.session) == (olivia, "events", story.first, story.session)
    assert audit.detail == {"after": 0, "limit": 500}


def test_the_timeline_pages_by_seq(console, story):
    emit_answer(story.first.pk)
    first = console.get(events(story.first.pk), {"limit": 4}).content.decode()
    assert [seq for seq, _ in rows_of(first)] == ["1", "2&ndash;4"]
    assert f"{events(story.first.pk)}?after=4&amp;limit=4" in first
    rest = console.get(events(story.first.pk), {"after": 4, "limit": 4}).content.decode()
    assert [seq for seq, _ in rows_of(rest)] == ["5", "6", "7", "8"]
    assert AccessAudit.objects.filter(what="events").count() == 2
    assert console.get(events(story.first.pk), {"after": -2}).status_code == 400
    assert AccessAudit.objects.filter(what="events").count() == 2


def test_a_long_payload_value_is_shortened_with_the_whole_payload_one_click_away(console, story):
    event_emit(run_id=story.first.pk, type="run_error", data={"code": "provider_unavailable", "message": "x" * 400})
    html = console.get(events(story.first.pk)).content.decode()
    assert "x" * 159 + "…" in html and "<summary>Payload</summary>" in html and "x" * 400 in html
    assert 'class="tone-bad"' in html


def test_the_inspector_shows_each_call_with_estimates_usage_and_their_ratio(console, olivia, story):
    tools = [{"type": "function", "function": {"name": "calculator", "description": "Safe arithmetic.",
                                               "parameters": {"type": "object", "properties": {}}}}]
    call = model_call(story.first, estimate=1000, prompt_tokens=1100, estimates=[7, 993], tools=tools)
    summary = model_call(story.first, purpose="compaction", estimate=500, prompt_tokens=None, estimates=[],
                         messages=[{"role": "user", "content": "Summarize the conversation so far."}])
    page = console.get(context(story.first.pk))
    assert page.status_code == 200
    html = page.content.decode()
    assert SECRET in html and "Summarize the conversation so far." in html
    assert "1.10&times;" in html and "ratio-close" in html  # 1100 / 1000
    assert "tiktoken-o200k_base-v1" in html and "qwen3-8b" in html
    assert '<td class="num">993</td>' in html  # the per-message estimate
    assert "<dt>Sum of message estimates</dt><dd>1,000</dd>" in html
    assert "<code>calculator</code> &mdash; Safe arithmetic." in html
    assert "not reported" in html  # the summary call's usage never came back
    assert f'id="call-{call.pk}"' in html and f'id="call-{summary.pk}"' in html
    audit = AccessAudit.objects.get()
    assert (audit.user, audit.what, audit.run) == (olivia, "context_inspector", story.first)
    assert audit.detail == {"after": 0, "calls": [call.pk, summary.pk], "compared_with": []}


def test_an_estimate_well_below_the_providers_count_is_flagged(console, story):
    model_call(story.first, estimate=1000, prompt_tokens=1400)
    html = console.get(context(story.first.pk)).content.decode()
    assert '<td class="num ratio ratio-under">1.40&times;</td>' in html


def test_the_inspector_pages_through_calls_and_lists_them_all(console, story):
    calls = [model_call(story.first, estimate=100 + i) for i in range(7)]
    first = console.get(context(story.first.pk)).content.decode()
    assert all(f'href="{context(story.first.pk)}' in first for _ in calls)
    assert [int(n) for n in re.findall(r'<section class="module call-detail" id="call-(\d+)"', first)] == \
        [c.pk for c in calls[:5]]
    assert f"?after={calls[4].pk}" in first
    second = console.get(context(story.first.pk), {"after": calls[4].pk}).content.decode()
    assert [int(n) for n in re.findall(r'<section class="module call-detail" id="call-(\d+)"', second)] == \
        [c.pk for c in calls[5:]]
    assert 'rel="prev"' in second
    assert [a.detail["calls"] for a in AccessAudit.objects.order_by("id")] == \
        [[c.pk for c in calls[:5]], [c.pk for c in calls[5:]]]
    # The second page compares its first call with the last of the first page: read, so audited.
    assert [a.detail["compared_with"] for a in AccessAudit.objects.order_by("id")] == [[], [calls[4].pk]]


def test_a_run_without_calls_or_events_still_renders_and_is_audited(console, story):
    assert "no model calls yet" in console.get(context(story.second.pk)).content.decode()
    assert "No events" in console.get(events(story.second.pk)).content.decode()
    assert AccessAudit.objects.count() == 2
