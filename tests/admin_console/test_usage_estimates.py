"""The usage page when a provider reports no usage (SPEC §10, CTX-25): an OpenAI-compatible
local server that sends none, and the offline demo model. olivia, the operator, sees our
estimates — marked estimated on every row, hatched in the chart, ``tokens_source`` in the
CSV — never a silent 0; a price's currency never reaches the CSV as a formula; and the
chart's axis reads whole, distinct numbers for any range.
"""
from __future__ import annotations

import csv
import io
import json
import re
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from models_catalog.forms import ModelPriceAdminForm
from models_catalog.models import ModelPrice
from runloop.loop import run_execute
from sessions.admin.chart import token_ticks, tokens_label
from sessions.admin.usage_chart import UsageBar, usage_chart
from sessions.models import ModelCall, Run, Session
from sessions.selectors.usage import call_usage
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream, error

pytestmark = pytest.mark.django_db(transaction=True)
FIGURES = ("input_uncached", "cache_read", "cache_written", "output")


def silent_server(request):
    """A local server that never sends ``usage``: answers, computes when asked, refuses REFUSE."""
    last = request.json["messages"][-1]
    content = last.get("content") or "" if last["role"] == "user" else ""
    if "REFUSE" in content:
        return error(400, "This request cannot be served.", code="invalid_request_error")
    if "compute" in content:
        return chat_stream(tool_calls=[{"id": "call_x", "name": "calculator",
                                        "arguments": json.dumps({"expression": "17*23"})}])
    return chat_stream(["The answer is 391, and it was computed."])


def ask(session: Session, content: str) -> Run:
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def usage_page(console, version) -> str:
    response = console.get(f"/admin/agents/agentversion/{version.pk}/usage/")
    assert response.status_code == 200
    return response.content.decode()


def usage_csv(console, version) -> list[dict[str, str]]:
    response = console.get(f"/admin/agents/agentversion/{version.pk}/usage/csv/")
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def expected(calls) -> dict[str, int]:
    totals = dict.fromkeys(FIGURES, 0)
    for call in calls:
        figures, _ = call_usage(usage=call.usage, outcome=call.outcome, estimated_tokens=call.estimated_tokens,
                                estimated_output_tokens=call.estimated_output_tokens)
        for name in FIGURES:
            totals[name] += getattr(figures, name)
    return totals


def totals_row(html: str, row: str) -> tuple[str, dict[str, int]]:
    body = html[html.index('<table class="usage tokens" id="totals">'):]
    body = body[:body.index("</table>")]
    cells = re.search(rf'<tr data-row="{row}"[^>]*>(.*?)</tr>', body, flags=re.S).group(1)
    return cells, {name: int(value) for name, value in re.findall(r'data-figure="(\w+)" data-value="(\d+)"', cells)}


@pytest.fixture
def silent_version(fake_session, strict):
    strict.handler = silent_server
    session = fake_session(tools=("calculator",))
    runs = [ask(session, "Hello there."), ask(session, "Please compute 17*23."), ask(session, "REFUSE this one.")]
    assert [run.status for run in runs] == ["completed", "completed", "failed"], [run.error for run in runs]
    assert strict.rejections == []
    assert not ModelCall.objects.exclude(usage=None).exists()  # the server really sent no usage
    return session.version


def test_a_server_that_reports_no_usage_shows_our_estimates_marked_estimated(silent_version, console):
    html = usage_page(console, silent_version)
    calls = list(ModelCall.objects.filter(run__version=silent_version))
    cells, shown = totals_row(html, "all")
    assert shown == expected(calls)
    assert shown["input_uncached"] > 0 and shown["output"] > 0  # never a silent 0
    # Every answered call counts the request estimate as input and the answer's as output.
    answered = [c for c in calls if c.outcome == "ok"]
    assert shown["input_uncached"] == sum(c.estimated_tokens for c in answered)
    assert shown["output"] == sum(c.estimated_output_tokens for c in answered) > 0
    assert 'data-source="estimated"' in cells and ">estimated</mark>" in cells
    assert 'id="estimated-legend"' in html and f"{len(answered)} calls got an answer but no usage" in html
    assert '<g class="bar estimated" data-source="estimated">' in html and "· estimated</title>" in html
    assert ">estimated</text>" in html  # the chart's legend


def test_the_csv_says_where_each_runs_tokens_come_from(silent_version, console):
    rows = usage_csv(console, silent_version)
    assert [row["tokens_source"] for row in rows] == ["estimated", "estimated", "none"]
    assert all(int(row["total_input_uncached"]) > 0 and int(row["total_output"]) > 0 for row in rows[:2])
    assert int(rows[2]["total_input_uncached"]) == 0  # a refused call was not billed: nothing estimated


def test_a_run_with_and_without_provider_counts_is_mixed(fake_session, strict, console):
    answers = iter([chat_stream(tool_calls=[{"id": "c1", "name": "calculator", "arguments": '{"expression": "2+2"}'}],
                                usage={"prompt_tokens": 50, "completion_tokens": 5}),
                    chat_stream(["It is 4."])])
    strict.handler = lambda request: next(answers)
    session = fake_session(tools=("calculator",))
    assert ask(session, "Please compute 2+2.").status == "completed"
    [row] = usage_csv(console, session.version)
    assert row["tokens_source"] == "mixed"
    cells, shown = totals_row(usage_page(console, session.version), "all")
    assert ">partly estimated</mark>" in cells
    assert shown == expected(ModelCall.objects.filter(run__version=session.version))
    assert shown["input_uncached"] > 50 and shown["output"] > 5


def test_the_demo_model_run_shows_estimated_tokens_not_zeros(make_session, alice, console):
    session = make_session(alice)
    assert ask(session, "What is 17*23?").status == "completed"
    calls = list(ModelCall.objects.filter(run__session=session))
    assert calls and all(not call.usage for call in calls)  # the demo reports no usage figures the page can read
    cells, shown = totals_row(usage_page(console, session.version), "all")
    assert shown == expected(calls) and shown["input_uncached"] > 0 and shown["output"] > 0
    assert ">estimated</mark>" in cells
    assert [row["tokens_source"] for row in usage_csv(console, session.version)] == ["estimated"]


HOSTILE = "=1+2"


def test_a_hostile_currency_is_refused_by_the_form_and_written_as_text_in_the_csv(silent_version, console):
    form = ModelPriceAdminForm(data={"provider": "openai", "model": "gpt-4o-mini", "input_per_million": "1",
                                     "output_per_million": "2", "currency": HOSTILE})
    assert not form.is_valid()
    assert form.errors["currency"] == ["Enter a three-letter currency code, such as USD or EUR."]
    posted = console.post("/admin/models_catalog/modelprice/add/", {
        "provider": "openai", "model": "gpt-4o-mini", "input_per_million": "1", "output_per_million": "2",
        "currency": HOSTILE})
    assert posted.status_code == 200 and not ModelPrice.objects.exists()
    accepted = ModelPriceAdminForm(data={"provider": "openai", "model": "gpt-4o-mini", "input_per_million": "1",
                                         "output_per_million": "2", "currency": " eur "})
    assert accepted.is_valid() and accepted.cleaned_data["currency"] == "EUR"
    # A price stored before the form checked it still never reaches a spreadsheet as a formula.
    ModelPrice.objects.create(provider=silent_version.provider, model=silent_version.model, currency=HOSTILE,
                              input_per_million=Decimal("1"), output_per_million=Decimal("2"))
    raw = b"".join(console.get(f"/admin/agents/agentversion/{silent_version.pk}/usage/csv/")
                   .streaming_content).decode()
    rows = list(csv.reader(io.StringIO(raw)))
    assert all(not str(cell).startswith(("=", "+", "-", "@", "\t", "\r")) for row in rows for cell in row)
    assert [row[-1] for row in rows[1:3]] == ["'" + HOSTILE] * 2


@pytest.mark.parametrize(("top", "labels"), [
    (0, ["0", "1"]), (1, ["0", "1"]), (2, ["0", "1", "2"]), (3, ["0", "1", "2", "3"]),
    (7, ["0", "2", "4", "6", "8"]), (1_100, ["0", "500", "1k", "1.5k"]),
    (999_999, ["0", "200k", "400k", "600k", "800k", "1M"]), (2_500_000_000, ["0", "500M", "1B", "1.5B", "2B", "2.5B"]),
])
def test_the_axis_of_a_small_or_large_chart_reads_distinct_whole_numbers(top, labels):
    assert [tokens_label(tick) for tick in token_ticks(top)] == labels


@given(st.integers(min_value=0, max_value=10**15))
def test_the_axis_ticks_are_distinct_whole_numbers_covering_the_top_for_any_range(top):
    ticks = token_ticks(top)
    assert ticks[0] == 0 and ticks[-1] >= top and 2 <= len(ticks) <= 7
    assert all(isinstance(tick, int) for tick in ticks)
    assert all(b > a for a, b in zip(ticks, ticks[1:]))
    labels = [tokens_label(tick) for tick in ticks]
    assert len(set(labels)) == len(labels), labels


def test_a_chart_of_three_tokens_does_not_repeat_its_axis_labels():
    svg = usage_chart([UsageBar(label="01 Dec", runs=1, completed=1, input_uncached=1, cache_read=0,
                                cache_written=0, output=2)])
    labels = re.findall(r'<text x="56" y="[\d.]+" text-anchor="end">([^<]+)</text>', svg)
    assert labels == ["0", "1", "2", "3"]


def test_the_model_call_list_shows_the_answer_estimate_beside_the_request_estimate(silent_version, console):
    html = console.get("/admin/agent_sessions/modelcall/").content.decode()
    assert "column-estimated_output_tokens" in html
    for call in ModelCall.objects.filter(outcome="ok"):
        assert re.search(rf'<td class="field-estimated_output_tokens">{call.estimated_output_tokens}</td>', html)
