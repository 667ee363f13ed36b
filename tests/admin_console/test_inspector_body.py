"""The context inspector shows each call's whole body as the provider received it — every
top-level field in order, ``max_tokens``, ``stream`` and ``stream_options`` included — and
what the call answered: its text, tool calls and finish reason (SPEC §10, CTX-25).

olivia, the operator, reads alice's run, driven by the real loop against the strict fake
provider on both wires; the fake's recorded requests are the truth the page is held to.
"""
from __future__ import annotations

import json
import re

import pytest

from runloop.loop import run_execute
from sessions.admin.inspector import body_fields, call_output
from sessions.models import ModelCall, Run
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream, sequence
from tests.runloop.conftest import FAKE_KEY

pytestmark = pytest.mark.django_db(transaction=True)


def context(run_id: int) -> str:
    return f"/admin/agent_sessions/run/{run_id}/context/"


def section(html: str, call_id: int) -> str:
    start = html.index(f'<section class="module call-detail" id="call-{call_id}"')
    return html[start:html.index("</section>", start)]


def summary_row(html: str, call_id: int) -> str:
    start = html.index(f'#call-{call_id}">#{call_id}</a>')
    return html[start:html.index("</tr>", start)]


def ask(session, content: str) -> Run:
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_every_field_of_the_body_is_shown_in_the_order_the_provider_received_it(fake, fake_session, strict,
                                                                               console, dialect):
    strict.handler = sequence(
        chat_stream(tool_calls=[{"id": "call_a", "name": "calculator", "arguments": json.dumps({"expression": "6*7"})}],
                    usage={"prompt_tokens": 120, "completion_tokens": 9}),
        chat_stream(["It is 42."], usage={"prompt_tokens": 180, "completion_tokens": 5}))
    run = ask(fake_session(), "What is 6*7?")
    assert run.status == Run.Status.COMPLETED, run.error
    received = [json.loads(request.body) for request in fake.requests if request.body]  # the bytes on the wire
    calls = list(ModelCall.objects.filter(run=run).order_by("id"))
    assert len(received) == len(calls) == 2
    html = console.get(context(run.pk)).content.decode()
    for call, wire in zip(calls, received):
        detail = section(html, call.pk)
        assert re.findall(r'<tr data-field="([^"]+)">', detail) == list(wire), dialect
        assert {"max_tokens", "stream"} <= set(wire)  # what the page used to leave out
        if dialect == "openai":
            assert wire["stream_options"] == {"include_usage": True}
            assert "include_usage" in detail
        limit = re.search(r'<tr data-field="max_tokens">.*?<pre>(.*?)</pre>', detail, flags=re.S).group(1)
        assert limit == str(wire["max_tokens"])
        assert re.search(r'<tr data-field="stream">.*?<pre>true</pre>', detail, flags=re.S)
    assert FAKE_KEY not in html  # keys travel in headers, never in a body or on the page


def test_each_call_shows_what_it_answered_and_why_it_ended(fake_session, strict, console):
    strict.handler = sequence(
        chat_stream(tool_calls=[{"id": "call_a", "name": "calculator", "arguments": json.dumps({"expression": "6*7"})}],
                    usage={"prompt_tokens": 120, "completion_tokens": 9}),
        chat_stream(["It is 42."], usage={"prompt_tokens": 180, "completion_tokens": 5}))
    run = ask(fake_session(), "What is 6*7?")
    tool_call, answer = ModelCall.objects.filter(run=run).order_by("id")
    html = console.get(context(run.pk)).content.decode()
    first = section(html, tool_call.pk)
    assert '<code class="finish-reason">tool_calls</code>' in first
    assert "calculator" in first[first.index(f'id="call-{tool_call.pk}-output"'):first.index("call-change")]
    second = section(html, answer.pk)
    output = second[second.index(f'id="call-{answer.pk}-output"'):second.index("call-change")]
    assert '<code class="finish-reason">stop</code>' in output and "It is 42." in output
    # The summary's Output column: the provider's count.
    assert re.search(r'data-output="provider">9<', summary_row(html, tool_call.pk))
    assert re.search(r'data-output="provider">5<', summary_row(html, answer.pk))


def test_a_silent_server_shows_the_estimated_output_and_a_secret_in_the_answer_stays_redacted(
        fake_session, strict, console):
    strict.handler = sequence(chat_stream([f"Your key is {FAKE_KEY}, keep it safe."]))
    run = ask(fake_session(), "Tell me my key.")
    [call] = ModelCall.objects.filter(run=run)
    assert call.usage is None and call.estimated_output_tokens > 0
    html = console.get(context(run.pk)).content.decode()
    assert re.search(rf'data-output="estimated">{call.estimated_output_tokens}\s*<mark[^>]*>estimated</mark>',
                     summary_row(html, call.pk))
    detail = section(html, call.pk)
    assert "Your key is [REDACTED], keep it safe." in detail
    assert FAKE_KEY not in html


def test_old_and_pruned_call_logs_say_what_is_missing():
    assert body_fields({"messages": [{"role": "user", "content": "hi"}]}) is None  # logged before v2
    assert body_fields({"v": 2, "pruned": True}) is None
    assert call_output({"v": 2, "order": ["model"], "fields": {"model": "m"}}) is None
    fields = body_fields({"v": 2, "order": ["model", "messages", "max_tokens", "stream"],
                          "fields": {"model": "m", "max_tokens": 64, "stream": True}})
    assert [(f.name, f.value.head if f.value else f.listed) for f in fields] == [
        ("model", '"m"'), ("messages", "the messages, listed below"), ("max_tokens", "64"), ("stream", "true")]


def test_every_repair_kind_the_projector_reports_has_a_label_for_people():
    """The inspector showed a new kind by its slug ("image left out"); the projector's
    docstring is where every kind it reports is listed."""
    import re

    from context.projector import project_records
    from sessions.admin.inspector import REPAIR_LABELS

    listed = re.search(r"\"call_id\"\?}`` each: (.*?)\. The context inspector", project_records.__doc__ or "", re.S)
    assert listed, "the projector's docstring lists the repair kinds"
    kinds = {kind.strip() for kind in listed.group(1).split(",")}
    assert len(kinds) >= 10 and kinds <= set(REPAIR_LABELS), kinds - set(REPAIR_LABELS)
