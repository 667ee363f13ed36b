"""The compactions page: every CTX-41 figure and a server-drawn SVG chart over time."""
from __future__ import annotations

import re

import pytest

from context.compaction import SECTION_TITLES
from sessions.models import AccessAudit
from tests.admin_console.conftest import compaction
from tests.fakes.summaries import is_summary

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
                   "2.5 s", "tiktoken-o200k_base-v1", '<span class="summary-calls">2 calls</span>',
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
    # Nothing is loaded from elsewhere (a CSRF token may well contain the letters "cdn").
    assert not re.search(r'(?:src|href)="(?:https?:)?//', html)


def test_sub_instance_compactions_are_listed_with_their_instance(console, story):
    from sessions.services.checkpoints import checkpoint_commit

    # Saved before the token figures had one name per meaning: a bare tokens_before still reads.
    checkpoint_commit(run=story.first, instance=story.sub, messages=[], covered_seq=4, estimator_id="bytes-v1",
                      metrics={"trigger": "model_steps", "tokens_before": 9_000, "tokens_after": 3_000})
    html = console.get(compactions(story.session.pk)).content.decode()
    assert f"&middot; sub-instance {story.sub.pk} (sub-1)" in html and "model_steps" in html and "bytes-v1" in html
    assert "9,000" in html and "3,000" in html and "&minus;67%" in html
    # The figures it did not record are shown as missing, never as zero.
    assert "–<br><small>target –</small>" in html and "– calls" in html and "length –" in html
    assert '<td class="num">–</td>' in html  # duration


def test_ctx41_the_before_column_is_the_calibrated_figure_with_the_estimate_beside_it(console, story):
    compaction(story.first, covered_seq=5, tokens_before_estimated=72_000, tokens_after_estimated=24_000)
    # A snapshot from before one name per meaning: the bare figures were the calibrated ones.
    compaction(story.second, covered_seq=9, tokens_before=88_000, tokens_after=33_000,
               tokens_before_calibrated=None, tokens_after_calibrated=None, tokens_before_estimated=None,
               tokens_after_estimated=None)
    html = console.get(compactions(story.session.pk)).content.decode()
    first, second = (row for _, row in re.findall(r'<tr id="compaction-(\d+)">(.*?)</tr>', html, flags=re.S))
    assert '<td class="num">90,000' in first and "estimated 72,000" in first
    assert "30,000" in first and "estimated 24,000" in first and "&minus;67%" in first
    assert '<td class="num">88,000' in second and "33,000" in second and "estimated" not in second


def test_a_session_without_compactions_says_so(console, story):
    html = console.get(compactions(story.session.pk)).content.decode()
    assert "No compaction yet" in html and "compaction-chart" not in html


@pytest.mark.django_db(transaction=True)
def test_a_real_compaction_made_by_the_loop_shows_the_figures_it_stored(console, fake_session, strict):
    """Not a fixture's idea of the metrics: a compaction the worker really committed."""
    from runloop.compaction_manual import compaction_manual
    from runloop.loop import run_execute
    from sessions.models import CompactionSnapshot
    from sessions.services.manual_compaction import compaction_request
    from sessions.services.questions import question_ask
    from tests.fakes.fake_provider import chat_stream

    def handler(request):
        if is_summary(request.json["messages"]):
            sections = "\n".join(f"{n}. {SECTION_TITLES[n - 1]}: noted." for n in range(1, 10))
            return chat_stream([f"<summary>\n{sections}\n</summary>"])
        return chat_stream(["A long answer about the figures. " * 30])

    strict.handler = handler
    session = fake_session(tools=(), window=16_000, context_policy={"target_ratio": 0.05})
    for n in range(3):
        run = question_ask(session=session, content=f"Question {n}: the figures, please. " + "Detail. " * 100)
        run_execute(run_id=run.pk)
    _, run = compaction_request(session=session)
    assert compaction_manual(run_id=run.pk) == "compacted"
    metrics = CompactionSnapshot.objects.get(instance__run=run).metrics
    html = console.get(compactions(session.pk)).content.decode()
    row = re.findall(r'<tr id="compaction-1">(.*?)</tr>', html, flags=re.S)[0]
    for figure in ("manual", f"{metrics['tokens_before_calibrated']:,}", f"{metrics['tokens_after_calibrated']:,}",
                   metrics["estimator_id"],
                   f'<span class="summary-calls">{metrics["summary_calls"]} call'):
        assert figure in row, figure


def test_ctx47_the_page_shows_the_tiers_and_the_tokens_each_removed(console, story):
    compaction(story.first, covered_seq=5, tiers=["mask"], masked_results=3, mask_tokens_removed=60_000,
               summary_tokens_removed=0, summary_calls=0, summary_chars=0, segments=[])
    compaction(story.second, covered_seq=9, tiers=["mask", "summary"], masked_results=2, mask_tokens_removed=12_000,
               summary_tokens_removed=28_000, pins_kept=2, pins_summarized=1)
    html = console.get(compactions(story.session.pk)).content.decode()
    rows = dict(re.findall(r'<tr id="compaction-(\d+)">(.*?)</tr>', html, flags=re.S))
    folded = re.search(r'<div class="tiers">(.*?)</div>', rows["1"], flags=re.S).group(1)
    assert '<span class="tier tier-mask">folded</span>' in folded and "3 results, &minus;60,000 tokens" in folded
    assert "tier-summary" not in folded and "read the summary" not in rows["1"]  # no summary to read
    both = re.search(r'<div class="tiers">(.*?)</div>', rows["2"], flags=re.S).group(1)
    assert "2 results, &minus;12,000 tokens" in both
    assert '<span class="tier tier-summary">summary</span> <small>&minus;28,000 tokens</small>' in both
    assert "read the summary" in rows["2"]
    # CTX-50: the pins the summary tier quoted verbatim, and those it summarized for lack of room.
    assert "pins: 2 quoted verbatim, 1 summarized for lack of room" in rows["2"] and "pins:" not in rows["1"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("junk", [False, True])
def test_ctx48_the_page_shows_the_checks_verdict_and_a_summary_written_by_code(console, fake_session, strict, junk):
    from runloop.compaction_manual import compaction_manual
    from runloop.loop import run_execute
    from sessions.services.manual_compaction import compaction_request
    from sessions.services.questions import question_ask
    from tests.fakes.fake_provider import chat_stream

    def handler(request):
        if is_summary(request.json["messages"]):
            if junk:  # a small model's reply that ignores the instruction
                return chat_stream(["1. The Blue Whale: the largest animal.\n2. The Shrimp: small and many."])
            sections = "\n".join(f"{n}. {SECTION_TITLES[n - 1]}: the figures, noted." for n in range(1, 10))
            return chat_stream([f"<summary>\n{sections}\n</summary>"])
        return chat_stream(["A long answer about the figures. " * 30])

    strict.handler = handler
    session = fake_session(tools=(), window=16_000, context_policy={"target_ratio": 0.05})
    for n in range(3):
        run = question_ask(session=session, content=f"Question {n}: the figures, please. " + "Detail. " * 100)
        run_execute(run_id=run.pk)
    _, run = compaction_request(session=session)
    assert compaction_manual(run_id=run.pk) == "compacted"
    html = console.get(compactions(session.pk)).content.decode()
    row = re.findall(r'<tr id="compaction-1">(.*?)</tr>', html, flags=re.S)[0]
    if junk:
        assert '<small class="check check-code">Written by code from the records: no reply passed the check.' in row
        assert row.count(": not the nine sections") == 3
    else:
        assert '<small class="check check-model">The model&#x27;s summary passed the check.</small>' in row
        assert "segment 1, attempt 1: passed" in row
