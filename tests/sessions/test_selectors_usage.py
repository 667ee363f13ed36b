"""The usage page's reads (SPEC §10): the database sums the calls' usage by the rules of
``context.usage`` — the same totals as the pure function, odd provider values included —
and groups runs by period."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from context.usage import UsageFigures, usage_figures
from sessions.models import ModelCall, Run
from sessions.run_errors import RunError
from sessions.selectors.instances import main_instance
from sessions.selectors.usage import (
    bucket_kind,
    call_usage,
    usage_groups,
    version_failure_reasons,
    version_usage_cells,
    version_usage_over_time,
    version_usage_runs,
)
from sessions.services.model_calls import model_call_close, model_call_open
from sessions.services.questions import question_ask
from sessions.services.runs import run_finish
from tests.sessions.helpers import claim

pytestmark = pytest.mark.django_db

# What providers (and broken proxies) have been seen to send as usage.
USAGES = [
    None,
    {"prompt_tokens": 100, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 60}},
    {"input_tokens": 7, "cache_read_input_tokens": 20, "cache_creation_input_tokens": 3, "output_tokens": 4},
    {"input_tokens": 7, "cache_read_input_tokens": 20, "cache_creation_input_tokens": 3, "output_tokens": 4,
     "prompt_tokens": 30, "completion_tokens": 4, "prompt_tokens_details": {"cached_tokens": 20}},
    {"prompt_tokens": 40, "completion_tokens": 2, "prompt_cache_hit_tokens": 30, "prompt_cache_miss_tokens": 10},
    {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 50}},
    {"prompt_tokens": "12", "completion_tokens": 1.5},
    {"prompt_tokens": -5, "completion_tokens": 10**19},
    {"prompt_tokens": True, "prompt_tokens_details": "none"},
    {"completion_tokens": 9},
    {},
]


def log_calls(run: Run, usages, purposes=("action", "compaction", "verification")) -> None:
    for index, usage in enumerate(usages):
        call = model_call_open(run=run, instance=main_instance(run=run), purpose=purposes[index % len(purposes)],
                               provider="openai", model="gpt-4o-mini", estimator_id="tiktoken-o200k_base-v1",
                               estimated_tokens=10, body={"messages": [{"role": "user", "content": str(index)}]})
        model_call_close(call=call, outcome="ok", usage=usage)


def total(figures) -> tuple[int, int, int, int]:
    return figures.input_uncached, figures.cache_read, figures.cache_written, figures.output


def test_the_database_sums_every_usage_shape_as_the_pure_function_reads_it(make_session, alice):
    session = make_session(alice)
    run = claim(question_ask(session=session, content="Hi"))
    log_calls(run, USAGES)
    groups = usage_groups(cells=version_usage_cells(version=session.version, kind="day"))
    summed = UsageFigures()
    for group in groups:
        summed = summed + group.figures
    expected = UsageFigures()
    for call in ModelCall.objects.all():
        expected = expected + call_usage(usage=call.usage, outcome=call.outcome, estimated_tokens=call.estimated_tokens,
                                         estimated_output_tokens=call.estimated_output_tokens)[0]
    # The five calls that answered with no usable usage count our request estimate (10 each).
    assert total(summed) == total(expected) == (40 + 7 + 7 + 10 + 5 * 10, 60 + 20 + 20 + 30 + 50, 3 + 3,
                                                5 + 4 + 4 + 2 + 9)
    unreported = sum(1 for call in ModelCall.objects.all() if not usage_figures(call.usage).reported)
    assert sum(group.unreported for group in groups) == unreported == sum(group.estimated for group in groups) == 5
    assert sum(group.calls for group in groups) == len(USAGES)
    assert {group.purpose for group in groups} == {"action", "compaction", "verification"}
    [run_row] = version_usage_runs(version=session.version)
    assert total(sum(run_row.by_purpose.values(), UsageFigures())) == total(expected)
    assert total(run_row.by_model[("openai", "gpt-4o-mini")]) == total(expected)


def test_runs_are_read_a_chunk_at_a_time_in_id_order(make_session, alice, django_assert_num_queries):
    session = make_session(alice)
    runs = []
    for n in range(5):
        run = claim(question_ask(session=session, content=f"Q{n}"))
        log_calls(run, USAGES[1:3])
        run_finish(run=run, status=Run.Status.COMPLETED if n % 2 == 0 else Run.Status.FAILED,
                   error=None if n % 2 == 0 else RunError("provider_unavailable", "down", retryable=True))
        runs.append(run)
    with django_assert_num_queries(2 * 3 + 1):  # three chunks of two runs, and the empty end
        rows = list(version_usage_runs(version=session.version, chunk=2))
    assert [row.run_id for row in rows] == [run.pk for run in runs]
    assert all(row.calls == {"action": 1, "compaction": 1, "verification": 0} for row in rows)
    assert [row.error_code for row in rows] == ["", "provider_unavailable", "", "provider_unavailable", ""]
    assert version_failure_reasons(version=session.version) == [("failed", "provider_unavailable", 2)]


def test_periods_are_days_then_weeks_then_months():
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert bucket_kind(first=None, last=None) == "day"
    assert bucket_kind(first=start, last=start + timedelta(days=61)) == "day"
    assert bucket_kind(first=start, last=start + timedelta(days=62)) == "week"
    assert bucket_kind(first=start, last=start + timedelta(days=62 * 7)) == "month"


def test_runs_and_their_tokens_are_grouped_by_the_period_they_were_asked_in(make_session, alice):
    session = make_session(alice)
    for day in (1, 1, 3):
        run = claim(question_ask(session=session, content="Q"))
        log_calls(run, USAGES[1:2])
        run_finish(run=run, status=Run.Status.COMPLETED)
        Run.objects.filter(pk=run.pk).update(created_at=datetime(2026, 3, day, 12, tzinfo=UTC))
    buckets = version_usage_over_time(version=session.version, kind="day",
                                      cells=version_usage_cells(version=session.version, kind="day"))
    assert [(b.start.day, b.runs, total(b.figures)) for b in buckets] == [
        (1, {"completed": 2}, (80, 120, 0, 10)), (3, {"completed": 1}, (40, 60, 0, 5))]
    with pytest.raises(ValueError):
        version_usage_cells(version=session.version, kind="hour")
