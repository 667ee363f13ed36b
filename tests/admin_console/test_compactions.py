"""The compactions page: every CTX-41 figure and a server-drawn SVG chart over time."""
from __future__ import annotations

import re

import pytest

from sessions.models import AccessAudit
from tests.admin_console.conftest import compaction

pytestmark = pytest.mark.django_db


def compactions(session_id: int) -> str:
    return f"/admin/agent_sessions/session/{session_id}/compactions/"


def test_it_lists_each_compaction_with_its_metrics(console, story):
    compaction(story.first, covered_seq=5)
    compaction(story.second, covered_seq=9, trigger="user_turns", before=70_000, after=50_000)
    page = console.get(compactions(story.session.pk))
    assert page.status_code == 200
    html = page.content.decode()
    table = html.split('<table class="compactions">', 1)[1]
    rows = re.findall(r'<tr id="compaction-(\d+)">(.*?)</tr>', table, flags=re.S)
    assert [number for number, _ in rows] == ["1", "2"]
    first, second = rows[0][1], rows[1][1]
    for figure in ("budget", "90,000", "30,000", "80,000", "target 40,000", "&minus;67%", "4,321 characters",
                   "2.5 s", "tiktoken:o200k_base", '<span class="summary-calls">2 calls</span>',
                   '<span class="summary-retries">1 retry</span>', '<span class="covered">covers #5</span>',
                   "status-ok"):
        assert figure in first, figure
    assert "user_turns" in second and "status-warn" in second and "&minus;29%" in second
    assert f"run {story.first.pk}</a> &middot; main" in first and "revision 1" in first


def test_segments_link_to_the_records_they_consumed_and_the_summary_to_its_record(console, story):
    result = compaction(story.first, covered_seq=5)
    summary_seq = result.records[0].seq
    html = console.get(compactions(story.session.pk)).content.decode()
    records = f"/admin/agent_sessions/session/{story.session.pk}/records/"
    assert f'<a href="{records}?after=0&amp;limit=3&amp;instance=main">#1&ndash;#3</a> &middot; 3 messages' in html
    assert "no record range &middot; 1 message" in html
    assert f'<a href="{records}?after={summary_seq - 1}&amp;limit=1">read the summary</a>' in html
    # The metrics are plain columns: showing them decrypts nothing, so nothing is audited.
    assert not AccessAudit.objects.exists()


def test_the_chart_is_inline_svg_with_a_line_per_series(console, story):
    compaction(story.first, covered_seq=5)
    compaction(story.second, covered_seq=9, before=85_000, after=35_000)
    html = console.get(compactions(story.session.pk)).content.decode()
    svg = html.split("<svg class=\"compaction-chart\"", 1)[1].split("</svg>", 1)[0]
    for series in ("before", "after", "threshold", "target"):
        assert re.search(rf'<polyline class="series series-{series}" fill="none" points="[\d., ]+"/>', svg), series
    assert len(re.findall(r'<circle class="marker marker-before"', svg)) == 2
    assert "<script" not in html.split('<figure class="chart-box">', 1)[1].split("</figure>", 1)[0]
    assert "cdn" not in html.lower()


def test_sub_instance_compactions_are_listed_with_their_instance(console, story):
    from sessions.services.history import checkpoint_commit

    checkpoint_commit(run=story.first, instance=story.sub, messages=[], covered_seq=4, estimator_id="chars:4",
                      metrics={"trigger": "model_steps", "tokens_before": 9_000, "tokens_after": 3_000})
    html = console.get(compactions(story.session.pk)).content.decode()
    assert f"&middot; sub-instance {story.sub.pk} (sub-1)" in html and "model_steps" in html and "chars:4" in html
    # The figures it did not record are shown as missing, never as zero.
    assert "–<br><small>target –</small>" in html and "– calls" in html and "length –" in html
    assert '<td class="num">–</td>' in html  # duration


def test_a_session_without_compactions_says_so(console, story):
    html = console.get(compactions(story.session.pk)).content.decode()
    assert "No compaction yet" in html and "compaction-chart" not in html
