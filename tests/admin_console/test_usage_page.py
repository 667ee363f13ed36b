"""The usage and cost page of an agent version (SPEC §10): its figures are the sum of its
model calls' usage — runs driven by the real loop against the strict fake provider, with
tool steps, compactions, completion checks and a refused request, on both wires.
"""
from __future__ import annotations

import csv
import io
import json
import re
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from context.usage import TokenPrices, UsageFigures, usage_cost, usage_figures
from models_catalog.models import ModelPrice
from runloop.loop import run_execute
from runloop.verification import VERIFY_SYSTEM
from sessions.models import AccessAudit, ModelCall, Run, Session
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream, error
from tests.fakes.summaries import is_summary
from tests.runloop.test_compaction import SMALL, VERY_LONG, scripted_summary

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")
FIGURES = ("input_uncached", "cache_read", "cache_written", "output")


class Provider:
    """Answers, calls the calculator when asked to compute, summarizes, checks answers and
    refuses a question marked REFUSE. On OpenAI's wire it reports usage with cached input;
    on Anthropic's, the fake's prompt cache does (read, written and uncached input)."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect

    def usage(self, request, output: int):
        if self.dialect == "anthropic":
            return None
        prompt = len(json.dumps(request.json["messages"])) // 4
        return {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output,
                "prompt_tokens_details": {"cached_tokens": prompt // 2}}

    def __call__(self, request):
        messages = request.json["messages"]
        system = messages[0].get("content") or ""
        if is_summary(messages):
            return chat_stream([scripted_summary(request)], usage=self.usage(request, 90))
        if system.startswith(VERIFY_SYSTEM[:30]):
            return chat_stream(["VERIFIED\nThe answer follows from the question."], usage=self.usage(request, 7))
        last = messages[-1]
        if last["role"] == "user" and "REFUSE" in (last.get("content") or ""):
            return error(400, "This request cannot be served.", code="invalid_request_error")
        if last["role"] == "user" and "compute" in (last.get("content") or ""):
            return chat_stream(tool_calls=[{"id": "call_x", "name": "calculator",
                                            "arguments": json.dumps({"expression": "17*23"})}],
                               usage=self.usage(request, 20))
        return chat_stream(["Noted. " + "Growth is steady. " * 6], usage=self.usage(request, 40))


def ask(session: Session, content: str) -> Run:
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


@pytest.fixture
def busy_version(fake_session, strict, dialect):
    """One version, two sessions: long questions (compactions), a computation (a tool
    step), completion checks on every answer, and one refused question."""
    strict.handler = Provider(dialect)
    first = fake_session(**{**SMALL, "tools": ("calculator",)})
    version = first.version
    type(version).objects.filter(pk=version.pk).update(verify_before_complete=True)
    version.refresh_from_db()
    second = Session.objects.create(space=first.space, user=first.user, agent=first.agent, version=version)
    runs = [ask(first, f"Question {n}. {VERY_LONG}") for n in range(1, 6)]
    runs.append(ask(second, "Please compute 17*23."))
    runs.append(ask(second, "REFUSE this one."))
    assert [run.status for run in runs] == ["completed"] * 6 + ["failed"], [run.error for run in runs]
    assert strict.rejections == []
    return version


def usage_url(version) -> str:
    return f"/admin/agents/agentversion/{version.pk}/usage/"


def table_row(html: str, table: str, row: str) -> dict[str, str]:
    """The data-value of each figure (and calls) of one row of a tokens table."""
    body = html[html.index(f'<table class="usage tokens" id="{table}">'):]
    body = body[:body.index("</table>")]
    cells = re.search(rf'<tr data-row="{row}"[^>]*>(.*?)</tr>', body, flags=re.S).group(1)
    values = dict(re.findall(r'data-figure="(\w+)" data-value="([^"]*)"', cells))
    values["calls"] = re.search(r'<td class="num" data-value="([^"]*)"', cells).group(1)
    return values


def summed(calls) -> tuple[UsageFigures, int]:
    total = UsageFigures()
    for call in calls:
        total = total + usage_figures(call.usage)
    return total, len(calls)


def test_the_page_totals_equal_the_sum_of_the_calls_usage(busy_version, console, dialect):
    html = console.get(usage_url(busy_version)).content.decode()
    calls = list(ModelCall.objects.filter(run__version=busy_version))
    completed = [c for c in calls if c.run.status == Run.Status.COMPLETED]
    for row, subset in (("all", calls), ("completed", completed)):
        figures, count = summed(subset)
        shown = table_row(html, "totals", row)
        assert {name: int(shown[name]) for name in FIGURES} == {name: getattr(figures, name) for name in FIGURES}
        assert int(shown["calls"]) == count
    all_calls, _ = summed(calls)
    assert all_calls.cache_read > 0 and all_calls.output > 0
    # Anthropic's cache writes what it could not read; OpenAI's bills the rest as uncached input.
    assert (all_calls.cache_written if dialect == "anthropic" else all_calls.input_uncached) > 0
    # Per completed run: summary and verification calls apart from the action calls.
    runs_completed = Run.objects.filter(version=busy_version, status="completed").count()
    assert runs_completed == 6
    for purpose in ("action", "compaction", "verification"):
        figures, count = summed([c for c in completed if c.purpose == purpose])
        assert count > 0, purpose  # the scenario makes every kind of call
        shown = table_row(html, "per-run", purpose)
        for name in FIGURES:
            assert float(shown[name]) == pytest.approx(getattr(figures, name) / runs_completed)
        assert float(shown["calls"]) == pytest.approx(count / runs_completed)
    # Seven runs, six completed, one refused with its error code.
    assert re.search(r"<dt>Runs</dt><dd data-value=\"7\">", html) and 'id="share-completed">86%<' in html
    code = Run.objects.get(version=busy_version, status="failed").error["code"]
    assert re.search(rf"<code>{code}</code></td><td class=\"num\" data-value=\"1\">", html)
    assert "No model of these calls has a" in html and 'data-figure="cost"' not in html  # no price: tokens only
    assert 'class="usage-chart"' in html and "<rect class=\"layer layer-cache_read\"" in html
    assert not AccessAudit.objects.exists()  # figures only: nothing decrypted, nothing audited


def test_with_a_price_the_page_shows_what_the_calls_cost(busy_version, console):
    ModelPrice.objects.create(provider=busy_version.provider, model=busy_version.model, currency="EUR",
                              input_per_million=Decimal("2.50"), cached_input_per_million=Decimal("1.25"),
                              cache_write_per_million=Decimal("3.125"), output_per_million=Decimal("10"))
    prices = TokenPrices(input=Decimal("2.50"), cached_input=Decimal("1.25"), cache_write=Decimal("3.125"),
                         output=Decimal("10"))
    html = console.get(usage_url(busy_version)).content.decode()
    expected = sum(usage_cost(usage_figures(call.usage), prices)
                   for call in ModelCall.objects.filter(run__version=busy_version))
    cell = re.search(r'<tr data-row="all" class="total">.*?data-figure="cost" data-value="([^"]+)">([^<]+)<',
                     html[html.index('id="totals"'):], flags=re.S)
    assert Decimal(cell.group(1)) == expected > 0
    assert cell.group(2) == f"{expected:,.4f} EUR"


def test_the_csv_has_one_row_per_run_adding_up_to_the_page(busy_version, console):
    ModelPrice.objects.create(provider=busy_version.provider, model=busy_version.model, currency="USD",
                              input_per_million=Decimal("1"), output_per_million=Decimal("4"))
    response = console.get(f"/admin/agents/agentversion/{busy_version.pk}/usage/csv/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    runs = list(Run.objects.filter(version=busy_version).order_by("id"))
    assert [int(row["run"]) for row in rows] == [run.pk for run in runs]
    assert [row["status"] for row in rows] == [run.status for run in runs]
    calls = list(ModelCall.objects.filter(run__version=busy_version))
    figures, count = summed(calls)
    for name in FIGURES:
        assert sum(int(row[f"total_{name}"]) for row in rows) == getattr(figures, name)
        assert sum(int(row[f"{p}_{name}"]) for row in rows for p in ("action", "compaction", "verification")) == \
            getattr(figures, name)
    assert sum(int(row[f"{p}_calls"]) for row in rows for p in ("action", "compaction", "verification")) == count
    prices = TokenPrices(input=Decimal("1"), output=Decimal("4"))
    assert sum(Decimal(row["cost"]) for row in rows) == pytest.approx(
        sum(usage_cost(usage_figures(call.usage), prices) for call in calls), abs=Decimal("0.00001"))
    failed = next(row for row in rows if row["status"] == "failed")
    assert failed["error_code"] and failed["currency"] == "USD"


def test_the_page_costs_the_same_queries_for_more_runs(busy_version, console):
    with CaptureQueriesContext(connection) as before:
        assert console.get(usage_url(busy_version)).status_code == 200
    session = Session.objects.filter(version=busy_version).order_by("id").first()
    for n in range(4):
        assert ask(session, f"One more, {n}.").status == "completed"
    with CaptureQueriesContext(connection) as after:
        assert console.get(usage_url(busy_version)).status_code == 200
    assert len(after.captured_queries) == len(before.captured_queries)
