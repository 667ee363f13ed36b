"""CTX-45 in the console: for each compaction, whether its summary was prepared in the
background or made while the person waited, the wait, the prepared summary's age and why
a ready one was not used; the wait drawn under the tokens chart; the prepared summaries'
own read-only list, which never shows their text."""
from __future__ import annotations

import re

import pytest

from context.compaction import SECTION_TITLES
from sessions.models import CompactionSnapshot, PreparedCompaction
from sessions.selectors.instances import main_instance
from sessions.services.prepared import preparation_claim, preparation_ready, preparation_request
from tests.admin_console.conftest import compaction
from tests.fakes.summaries import is_summary

pytestmark = pytest.mark.django_db

PREPARED = {"prepared": True, "stall_ms": 40, "prepared_age_ms": 41_200, "summary_form": "cached"}
INLINE = {"prepared": False, "stall_ms": 3_460, "prepared_age_ms": None, "prepared_discarded": "view_changed",
          "summary_form": "transcript"}


def compactions(session_id: int) -> str:
    return f"/admin/agent_sessions/session/{session_id}/compactions/"


def rows(html: str) -> list[str]:
    table = html.split('<table class="compactions">', 1)[1]
    return [row for _, row in re.findall(r'<tr id="compaction-(\d+)">(.*?)</tr>', table, flags=re.S)]


def wait_cell(row: str) -> str:
    return re.search(r'<td class="wait">(.*?)</td>', row, flags=re.S).group(1)


def wait_svg(html: str) -> str:
    return html.split('<svg class="wait-chart"', 1)[1].split("</svg>", 1)[0]


def test_ctx45_each_compaction_says_how_its_summary_was_made_and_how_long_the_person_waited(console, story):
    compaction(story.first, covered_seq=5, **PREPARED)
    compaction(story.second, covered_seq=9, **INLINE)
    html = console.get(compactions(story.session.pk)).content.decode()
    assert '<th scope="col">Wait</th>' in html
    first, second = (wait_cell(row) for row in rows(html))
    assert "0.0 s" in first and "prepared in the background" in first and "summary 41.2 s old" in first
    assert "not used" not in first
    assert "3.5 s" in second and "made while the person waited" in second and " old" not in second
    assert "a prepared summary was not used: the conversation changed under it" in second
    assert 'title="view_changed"' in second


def test_ctx45_compactions_saved_before_preparation_show_missing_figures_and_no_wait_chart(console, story):
    compaction(story.first, covered_seq=5)  # the CTX-41 keys only
    page = console.get(compactions(story.session.pk))
    assert page.status_code == 200
    html = page.content.decode()
    cell = wait_cell(rows(html)[0])
    assert re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", cell)).strip() == "– –"
    assert "compaction-chart" in html and "wait-chart" not in html


@pytest.mark.parametrize("odd", [
    {"prepared": "yes", "stall_ms": "12", "prepared_age_ms": [1]},
    {"prepared": None, "stall_ms": True, "prepared_discarded": 7},
    {"prepared": True, "stall_ms": -5, "prepared_age_ms": None},
])
def test_ctx45_odd_recorded_values_are_shown_as_missing_never_a_crash(console, story, odd):
    compaction(story.first, covered_seq=5, **odd)
    page = console.get(compactions(story.session.pk))
    assert page.status_code == 200
    cell = wait_cell(rows(page.content.decode())[0])
    assert "not used" not in cell
    if odd["prepared"] is True:  # a negative wait is a clock's error, shown as none
        assert "0.0 s" in cell and "prepared in the background" in cell and "summary – old" in cell
    else:
        assert re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", cell)).strip() == "– –"


def test_ctx45_the_wait_is_drawn_under_the_tokens_at_each_compaction(console, story):
    compaction(story.first, covered_seq=5, **PREPARED)
    compaction(story.second, covered_seq=9, **INLINE)
    compaction(story.second, covered_seq=10)  # an older kind of snapshot: no wait recorded
    html = console.get(compactions(story.session.pk)).content.decode()
    figure = html.split('<figure class="chart-box">', 1)[1].split("</figure>", 1)[0]
    assert figure.index('<svg class="compaction-chart"') < figure.index('<svg class="wait-chart"')
    svg = wait_svg(html)
    bars = re.findall(r'<rect class="wait wait-(\w+)" x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)">'
                      r"<title>(.*?)</title>", svg)
    assert [kind for kind, *_ in bars] == ["prepared", "inline"]
    (_, _, short, prepared_tip), (_, _, tall, inline_tip) = bars
    assert 0 < float(short) < 3 < float(tall)  # 40 ms is a sliver beside 3.5 s
    assert "#1" in prepared_tip and "waited 0.0 s · prepared in the background, summary 41.2 s old" in prepared_tip
    assert "waited 3.5 s · made while the person waited" in inline_tip and "conversation changed" in inline_tip
    assert re.search(r'<text class="wait-missing"[^>]*>–<title>#3 · [^<]* · wait not recorded</title>', svg)
    for label in ("0 s", "2 s", "4 s"):  # seconds on the axis, up to a round figure above 3.5 s
        assert f">{label}</text>" in svg, label
    assert "<script" not in figure


def test_ctx45_the_snapshot_list_shows_the_wait(console, story):
    compaction(story.first, covered_seq=5, **INLINE)
    compaction(story.second, covered_seq=9)
    html = console.get("/admin/agent_sessions/compactionsnapshot/").content.decode()
    assert "3.5 s, made while the person waited" in html
    assert re.search(r'<td class="field-wait">-</td>', html)


def listed(html: str) -> dict[str, str]:
    """The one row of a changelist, cell by field name, as text."""
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    cells = re.findall(r'<t[dh] class="field-(\w+)[^"]*">(.*?)</t[dh]>', body, flags=re.S)
    return {name: re.sub(r"<[^>]+>", "", value).strip() for name, value in cells}


def _prepared(story, *, ready: bool) -> PreparedCompaction:
    run = story.second
    prepared = preparation_request(
        run=run, instance=main_instance(run=run), tokens=2_900, policy={"target_ratio": 0.5}, estimator_id="bytes-v1",
        snapshot={"system": {"role": "system", "content": "Be brief."}, "tools": [], "sources": [None],
                  "messages": [{"role": "user", "content": "The snapshot holds the heron Waldemar."}]})
    if ready:
        claimed = preparation_claim(prepared_id=prepared.pk)
        assert preparation_ready(prepared=claimed, summary="The summary names the heron Ottokar.", prefix=1,
                                 digest="d" * 64, metrics={"summary_calls": 2, "duration_ms": 4_300})
    prepared.refresh_from_db()
    return prepared


def test_ctx45_prepared_summaries_are_listed_read_only_without_their_text(console, story):
    ready = _prepared(story, ready=True)
    html = console.get("/admin/agent_sessions/preparedcompaction/").content.decode()
    cells = listed(html)
    assert f"Session {story.session.pk}" in cells["session_link"] and f"Run {story.second.pk}" in cells["run_link"]
    assert (cells["status"], cells["reason"], cells["tokens"], cells["prefix"]) == ("Ready", "-", "2900", "1")
    assert (cells["summary_calls"], cells["duration"]) == ("2", "4.3 s")
    page = console.get(f"/admin/agent_sessions/preparedcompaction/{ready.pk}/change/")
    assert page.status_code == 200
    for shown in (html, page.content.decode()):
        assert "Ottokar" not in shown and "Waldemar" not in shown
    assert 'name="_save"' not in page.content.decode()
    assert console.get("/admin/agent_sessions/preparedcompaction/add/").status_code == 403


def test_ctx45_a_preparation_under_way_is_listed_with_missing_figures(console, story):
    preparing = _prepared(story, ready=False)
    cells = listed(console.get("/admin/agent_sessions/preparedcompaction/").content.decode())
    assert (cells["status"], cells["prefix"], cells["summary_calls"], cells["duration"]) == ("Preparing", "-", "-", "-")
    assert "Waldemar" not in console.get(f"/admin/agent_sessions/preparedcompaction/{preparing.pk}/change/"
                                         ).content.decode()


@pytest.mark.django_db(transaction=True)
def test_ctx45_a_summary_the_worker_prepared_and_committed_shows_as_prepared(console, fake_session, strict,
                                                                              dispatched_preparations):
    """Not a fixture's idea of the metrics: a preparation the worker made, committed by the loop."""
    from runloop.loop import run_execute
    from runloop.preparation import compaction_prepare
    from sessions.services.questions import question_ask
    from tests.fakes.fake_provider import chat_stream

    def handler(request):
        if is_summary(request.json["messages"]):
            return chat_stream(["<summary>\n" + "\n".join(f"{n}. {SECTION_TITLES[n - 1]}: noted." for n in range(1, 10))
                                + "\n</summary>"])
        return chat_stream(["Noted. " + "Growth is steady. " * 6])

    strict.handler = handler
    session = fake_session(tools=(), window=4_000, provider="openai", model="gpt-4o-mini")
    detail = "Please keep this detail in mind: " + "the quarterly figures show steady growth across regions. " * 7
    for number in range(1, 13):
        run_execute(run_id=question_ask(session=session, content=f"Question {number}. {detail}").pk)
        while dispatched_preparations:  # the worker prepares while the session is idle
            compaction_prepare(prepared_id=dispatched_preparations.pop(0))
        assert not CompactionSnapshot.objects.filter(instance__run__session=session).exists()
        if PreparedCompaction.objects.filter(session=session, status="ready").exists():
            break
    else:
        pytest.fail("no summary was ever prepared")
    run_execute(run_id=question_ask(session=session, content=f"Question {number + 1}. {detail * 3}").pk)
    [snapshot] = CompactionSnapshot.objects.filter(instance__run__session=session)
    assert snapshot.metrics["prepared"] is True
    cell = wait_cell(rows(console.get(compactions(session.pk)).content.decode())[0])
    stall = snapshot.metrics["stall_ms"] / 1_000
    assert f"{stall:.1f} s" in cell and "prepared in the background" in cell and " old" in cell
