"""The built-in tools (LOOP-4): a real arithmetic parser, the clock, the guarded fetcher."""
from __future__ import annotations

import json
import threading
from datetime import datetime

import pytest

from tests.fakes.fake_provider import FakeProvider
from tests.fakes.responses import RawResponse, redirect
from tools import ToolContext, registry, tool_invoke
from tools.calculator import evaluate
from tools.http_fetch import html_to_text


def ctx(**services) -> ToolContext:
    return ToolContext(run_id=1, session_id=1, instance_id=1, services=services)


@pytest.mark.parametrize("expression, value", [
    ("17*23", 391), ("(1+2)*3", 9), ("2^10", 1024), ("2**3**2", 512), ("-3+5", 2), ("7//2", 3), ("7%4", 3),
    ("sqrt(16)+abs(-2)", 6.0), ("1/4", 0.25), ("1e3+1", 1001.0), (".5*4", 2.0), ("round(2.6)", 3),
])
def test_loop4_the_calculator_evaluates_arithmetic(expression, value):
    assert evaluate(expression) == value


@pytest.mark.parametrize("expression, problem", [
    ("__import__('os').system('id')", "Unexpected character"), ("open(1)", "Unknown name"),
    ("1/0", "Division by zero"), ("9^9^9", "Exponents are limited"), ("2*", "ended too early"),
    ("(1+2", "Expected )"), ("1 2", "Unexpected"), ("", "empty"), ("x" * 600, "limited to 500"),
    ("sqrt(-1)", "not defined"), ("10^300*10^300", "too large"),
])
def test_loop4_the_calculator_refuses_what_is_not_arithmetic_with_a_reason(expression, problem):
    outcome = tool_invoke(registry["calculator"], json.dumps({"expression": expression}), ctx())
    assert outcome.status == "error" and problem in outcome.content


def test_loop4_bad_arguments_are_an_error_result_not_a_crash():
    calculator = registry["calculator"]
    assert tool_invoke(calculator, "not json", ctx()).status == "error"
    assert "'expression' is a required property" in tool_invoke(calculator, "{}", ctx()).content
    assert "5 is not of type 'string'" in tool_invoke(calculator, '{"expression": 5}', ctx()).content
    assert "'x' was unexpected" in tool_invoke(calculator, '{"expression": "1", "x": 1}', ctx()).content


def test_tool4_arguments_are_checked_by_every_keyword_of_the_schema_and_the_message_names_the_argument():
    plan = registry["update_plan"]
    outcome = tool_invoke(plan, json.dumps({"steps": [{"step": "a", "status": "later"}]}), ctx())
    assert outcome.status == "error"
    assert "at argument 'steps[0].status'" in outcome.content and "'later' is not one of" in outcome.content
    outcome = tool_invoke(registry["read_record"], '{"seq": true}', ctx())
    assert outcome.content.endswith("True is not of type 'integer'.")


def test_loop4_current_time_answers_in_utc_or_a_named_zone():
    utc = tool_invoke(registry["current_time"], "{}", ctx())
    paris = tool_invoke(registry["current_time"], '{"timezone": "Europe/Paris"}', ctx())
    assert utc.status == "ok" and datetime.fromisoformat(utc.content).utcoffset().total_seconds() == 0
    assert paris.status == "ok" and datetime.fromisoformat(paris.content).tzinfo is not None
    assert tool_invoke(registry["current_time"], '{"timezone": "Mars/Olympus"}', ctx()).status == "error"


def test_loop4_html_becomes_readable_text_without_scripts():
    page = ("<html><head><title>Prices</title><style>p{color:red}</style></head><body>"
            "<script>steal()</script><h1>Plans</h1><p>Basic: 5&nbsp;EUR</p><ul><li>Pro</li></ul></body></html>")
    assert html_to_text(page) == "# Prices\n\nPlans\nBasic: 5 EUR\nPro"


def test_loop4_http_fetch_refuses_loopback_private_and_metadata_addresses():
    fetch = registry["http_fetch"]
    for url in ("http://127.0.0.1:8000/", "http://10.0.0.5/", "http://169.254.169.254/latest/meta-data/",
                "http://[::1]/", "file:///etc/passwd"):
        outcome = tool_invoke(fetch, f'{{"url": "{url}"}}', ctx())
        assert outcome.status == "error", url


def test_loop4_http_fetch_reads_a_public_page_as_text_and_reports_redirects():
    page = b"<html><title>Hello</title><body><p>World</p><script>x()</script></body></html>"
    html = {"Content-Type": "text/html; charset=utf-8"}
    with FakeProvider(lambda request: (redirect("http://example.org/elsewhere") if request.path == "/moved"
                                       else RawResponse(page, headers=html))) as fake:
        options = {"transport": fake.forwarding_transport(), "resolver": lambda host, port: ["93.184.216.34"]}
        text = tool_invoke(registry["http_fetch"], '{"url": "http://example.org/page"}', ctx(fetch_options=options))
        moved = tool_invoke(registry["http_fetch"], '{"url": "http://example.org/moved"}', ctx(fetch_options=options))
    assert text.status == "ok" and text.content == "# Hello\n\nWorld"
    assert moved.status == "ok" and "redirects to http://example.org/elsewhere" in moved.content


def test_loop4_a_tool_past_its_time_out_ends_with_status_timeout():
    from agents.tool_registry import Tool

    release = threading.Event()
    slow = Tool(name="sleepy", description="", parameters={"type": "object", "properties": {}},
                run=lambda arguments, context: release.wait(5) and "late", idempotent=True, timeout_seconds=0.2)
    try:
        outcome = tool_invoke(slow, "{}", ctx())
    finally:
        release.set()
    assert outcome.status == "timeout"


@pytest.mark.django_db(transaction=True)  # the tool reads from its own thread
def test_ctx7_read_record_reads_only_what_the_instance_may_see(make_session, alice):
    from sessions.models import Instance
    from sessions.selectors.instances import main_instance
    from sessions.services.questions import question_ask
    from sessions.services.records import record_append
    from sessions.services.runs import run_claim, run_finish

    session = make_session(alice)
    first = run_claim(run_id=question_ask(session=session, content="First question").pk)
    sub = Instance.objects.create(run=first, parent=main_instance(run=first), key="sub-x", depth=1)
    internal = record_append(session=session, run=first, instance=sub, kind="user",
                             message={"role": "user", "content": "sub-agent internals"}, entry_key="t")
    run_finish(run=first, status="completed")
    second = question_ask(session=session, content="Second question")
    read = lambda seq, instance: tool_invoke(registry["read_record"], json.dumps({"seq": seq}),  # noqa: E731
                                             ToolContext(run_id=instance.run_id, session_id=session.pk,
                                                         instance_id=instance.pk))
    first_main, second_main = main_instance(run=first), main_instance(run=second)
    assert "First question" in read(1, second_main).content  # inherited history
    assert read(internal.seq, second_main).status == "error"  # a sub-agent's internals
    later = second.records.get(kind="user").seq
    assert read(later, first_main).status == "error"  # a later question, from the earlier run
    assert "sub-agent internals" in read(internal.seq, sub).content  # the sub-agent's own
