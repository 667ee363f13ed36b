"""The session records page (SPEC §10, RUN-11): decrypted on the server, page by page by
cursor, filtered by instance, readable, inert, and audited on every open."""
from __future__ import annotations

import re

import pytest

from sessions.models import AccessAudit
from sessions.selectors.instances import main_instance
from sessions.services.model_steps import step_save_assistant
from sessions.services.records import record_append
from tests.admin_console.conftest import SECRET
from tests.sessions.helpers import answer

pytestmark = pytest.mark.django_db


def records(session_id: int) -> str:
    return f"/admin/agent_sessions/session/{session_id}/records/"


def seqs_on(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<li class="record[^"]*" id="seq-(\d+)"', html)]


def test_it_shows_the_records_decrypted_and_writes_one_audit_row(console, olivia, story):
    page = console.get(records(story.session.pk))
    assert page.status_code == 200
    html = page.content.decode()
    assert SECRET in html and "Noted. It is 42." in html and "Sub-task: count the pages" in html
    assert seqs_on(html) == [1, 2, 3, 4, 5, 6, 7]
    audit = AccessAudit.objects.get()
    assert (audit.user, audit.session, audit.run, audit.what) == (olivia, story.session, None, "records")
    assert audit.detail == {"after": 0, "limit": 100, "instance": "all"}


def test_every_open_writes_its_own_audit_row_with_the_cursor_and_filter(console, story):
    console.get(records(story.session.pk))
    console.get(records(story.session.pk), {"after": 3, "limit": 2, "instance": "main"})
    console.get(records(story.session.pk), {"instance": str(story.sub.pk)})
    rows = list(AccessAudit.objects.order_by("id").values_list("what", "detail"))
    assert rows == [
        ("records", {"after": 0, "limit": 100, "instance": "all"}),
        ("records", {"after": 3, "limit": 2, "instance": "main"}),
        ("records", {"after": 0, "limit": 100, "instance": str(story.sub.pk)}),
    ]


def test_pages_follow_the_keyset_cursor_forwards_and_back(console, story):
    for index in range(8):
        answer(story.second, f"Step {index}", f"more-{index}")  # seqs 8..15
    first = console.get(records(story.session.pk), {"limit": 5}).content.decode()
    assert seqs_on(first) == [1, 2, 3, 4, 5]
    assert 'href="?' not in first  # links are whole admin URLs
    assert f'{records(story.session.pk)}?after=5&amp;limit=5" rel="next"' in first
    assert 'rel="prev"' not in first

    second = console.get(records(story.session.pk), {"after": 5, "limit": 5}).content.decode()
    assert seqs_on(second) == [6, 7, 8, 9, 10]
    assert f'{records(story.session.pk)}?limit=5" rel="prev"' in second  # back to the first page
    assert "after=10&amp;limit=5" in second

    last = console.get(records(story.session.pk), {"after": 10, "limit": 5}).content.decode()
    assert seqs_on(last) == [11, 12, 13, 14, 15] and 'rel="next"' not in last
    assert "after=5&amp;limit=5\" rel=\"prev\"" in last

    past = console.get(records(story.session.pk), {"after": 15})
    assert past.status_code == 200 and seqs_on(past.content.decode()) == []
    assert "No records after #15" in past.content.decode()


def test_the_instance_filter_reads_main_or_one_sub_instance(console, story):
    main = console.get(records(story.session.pk), {"instance": "main"}).content.decode()
    assert seqs_on(main) == [1, 2, 3, 5, 6, 7] and "Sub-task" not in main
    sub = console.get(records(story.session.pk), {"instance": str(story.sub.pk)}).content.decode()
    assert seqs_on(sub) == [4] and SECRET not in sub
    assert f"sub-instance {story.sub.pk} (sub-1)" in sub
    # Seqs skip under a filter; the cursor is still a session seq (RUN-11).
    paged = console.get(records(story.session.pk), {"instance": "main", "after": 3, "limit": 2}).content.decode()
    assert seqs_on(paged) == [5, 6]
    assert "after=6&amp;limit=2&amp;instance=main" in paged


@pytest.mark.parametrize("params, field", [
    ({"limit": 0}, "limit"), ({"limit": 201}, "limit"), ({"limit": "ten"}, "limit"),
    ({"after": -1}, "after"), ({"after": "x"}, "after"), ({"instance": "sub-9"}, "instance"),
    ({"instance": "999999"}, "instance"),
])
def test_a_bad_parameter_gets_a_400_naming_it_and_shows_and_audits_nothing(console, story, params, field):
    page = console.get(records(story.session.pk), params)
    assert page.status_code == 400
    html = page.content.decode()
    assert f"{field}:" in html and SECRET not in html
    assert not AccessAudit.objects.exists()


def test_a_sub_instance_of_another_session_is_refused(console, story, make_session, alice):
    other = make_session(alice)
    page = console.get(records(other.pk), {"instance": str(story.sub.pk)})
    assert page.status_code == 400


def test_limit_200_is_the_largest_page(console, story):
    for index in range(200):
        answer(story.second, f"Line {index}", f"bulk-{index}")
    html = console.get(records(story.session.pk), {"limit": 200}).content.decode()
    assert len(seqs_on(html)) == 200 and "after=200&amp;limit=200" in html


def test_tool_calls_and_results_are_shown_with_name_arguments_and_status(console, story):
    step_save_assistant(run=story.second, instance=main_instance(run=story.second), entry_key="t", message={
        "role": "assistant", "content": "Let me fetch it.", "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "http_fetch",
                                                             "arguments": '{"url": "https://example.com"}'}},
            {"id": "call_10", "type": "function", "function": {"name": "calculator", "arguments": "{not json"}}]})
    record_append(session=story.session, run=story.second, instance=main_instance(run=story.second),
                  kind="tool_result", entry_key="r9", message={"role": "tool", "tool_call_id": "call_9",
                                                               "name": "http_fetch", "content": "timed out",
                                                               "status": "timeout"})
    html = console.get(records(story.session.pk), {"after": 7}).content.decode()
    assert "calls <code>http_fetch</code>" in html and "call_9" in html
    assert "&quot;url&quot;: &quot;https://example.com&quot;" in html  # pretty-printed JSON arguments
    assert "arguments (not JSON)" in html and "{not json" in html
    assert "result of <code>http_fetch</code>" in html
    assert '<span class="status status-timeout">timeout</span>' in html


def test_a_long_message_is_cut_with_a_show_all_that_holds_the_whole_text(console, story):
    long_text = "".join(f"line {n:05d}\n" for n in range(3000))  # 33,000 characters
    answer(story.second, long_text, "long")
    html = console.get(records(story.session.pk), {"after": 7}).content.decode()
    assert f"Show all {len(long_text)} characters" in html
    assert "line 02999" in html  # inside the "Show all" details
    head = html.split('<pre class="head">', 1)[1].split("</pre>", 1)[0]
    assert "line 00000" in head and "line 02999" not in head and len(head) < 1_700


def test_hostile_text_is_rendered_inert(console, story):
    answer(story.second, "<script>alert(1)</script> <img src=x onerror=alert(1)> [x](javascript:alert(1))", "xss")
    html = console.get(records(story.session.pk), {"after": 7}).content.decode()
    assert "<script>alert(1)" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert 'href="javascript:' not in html


def test_the_page_costs_the_same_queries_for_5_or_50_records(console, story):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for index in range(50):
        answer(story.second, f"More {index}", f"q-{index}")
    with CaptureQueriesContext(connection) as small:
        console.get(records(story.session.pk), {"limit": 5})
    with CaptureQueriesContext(connection) as large:
        console.get(records(story.session.pk), {"limit": 50})
    assert len(small.captured_queries) == len(large.captured_queries)


def test_a_models_arguments_nested_past_the_decoders_depth_are_shown_as_text(console, story):
    """A model can write anything as arguments; `[[[…` 50,000 deep made json raise
    RecursionError and the records page answered 500 for the whole session."""
    deep = "[" * 50_000
    step_save_assistant(run=story.second, instance=main_instance(run=story.second), entry_key="deep", message={
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "call_deep", "type": "function", "function": {"name": "read", "arguments": deep}}]})
    page = console.get(records(story.session.pk))
    assert page.status_code == 200
    assert "arguments (not JSON)" in page.content.decode()
