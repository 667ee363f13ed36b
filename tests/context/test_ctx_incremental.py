"""LOOP-1: a projection kept between steps (``Projection``) gives exactly what a projection
made afresh gives, for any history cut into steps anywhere — messages, sources and
repairs — and a step re-reads only what is not settled yet."""

from __future__ import annotations

import copy
import json

from histories import build, histories
from hypothesis import given
from hypothesis import strategies as st
from recordkit import assistant, call, image, result, run_status, text, user

from context import project_records
from context.projector import Projection


def _fresh(records: list[dict], **options) -> tuple[list, list, list]:
    sources: list = []
    repairs: list = []
    messages = project_records(records, sources_out=sources, repairs_out=repairs, **options)
    return messages, sources, repairs


@given(events=histories(), cuts=st.lists(st.integers(0, 60), max_size=8), explicit_run=st.booleans(),
       view=st.booleans())
def test_loop1_a_kept_projection_equals_a_fresh_one_for_any_history_cut_anywhere(
        events, cuts, explicit_run, view) -> None:
    records = build(events).records
    before = copy.deepcopy(records)
    options: dict = {"open_runs": {"r2"}} if explicit_run else {}
    if view:  # start from a reusable view covering the first few records
        options.update(start_view=[{"role": "user", "content": "VIEW"}], start_watermark=2)
    projection = Projection(repairs=True, **{k: v for k, v in options.items() if k != "open_runs"})
    open_runs = options.get("open_runs")
    done = 0
    handed_out: list[tuple[list, str]] = []
    for point in [*sorted({min(c, len(records)) for c in cuts}), len(records)]:
        projection.extend(records[done:point])
        done = point
        got = projection.project(open_runs)
        assert (got.messages, got.sources, got.repairs) == _fresh(records[:point], **options)
        handed_out.append((got.messages, json.dumps(got.messages, sort_keys=True)))
    # A later step never changes what an earlier one handed out (it may share it).
    for messages, dumped in handed_out:
        assert json.dumps(messages, sort_keys=True) == dumped
    assert records == before  # CTX-1


def _tool_loop(steps: int) -> list[dict]:
    records = [user(1, "Count up.")]
    for n in range(steps):
        seq = len(records) + 1
        records.append(assistant(seq, f"step {n}", [call(f"c{n}", "calculator")]))
        records.append(result(seq + 1, f"c{n}", f"{n + 1}"))
    return records


def test_loop1_in_a_tool_loop_each_step_re_reads_only_its_own_records() -> None:
    records = _tool_loop(300)
    projection = Projection(repairs=True)
    projection.extend(records[:1])
    projection.project({"r1"})
    for position in range(1, len(records), 2):
        projection.extend(records[position:position + 2])
        assert projection.unsettled == 2  # the assistant message and its result, nothing older
        projection.project({"r1"})
        assert projection.unsettled == 0
    assert projection.project({"r1"}).messages == project_records(records, open_runs={"r1"})


def test_loop1_an_unanswered_call_keeps_what_follows_it_unsettled_until_its_result_comes() -> None:
    records = [*_tool_loop(3), assistant(8, None, [call("late", "search")]), run_status(9, status="interrupted")]
    projection = Projection()
    projection.extend(records)
    first = projection.project({"r1"})
    # The run ended without an answer: a placeholder (CTX-3), and the call may get a late result.
    assert first.messages[-1]["content"].startswith("[unknown outcome")
    assert projection.unsettled == 1  # the assistant message holding the call (a status is no item)
    more = [user(10, "Again?", run="r2"), result(11, "late", "found it")]
    projection.extend(more)
    second = projection.project({"r2"}).messages
    assert second == project_records(records + more, open_runs={"r2"})
    assert "found it" in second[-1]["content"]  # shown where it arrived (CTX-4)
    assert projection.unsettled == 0


def test_ctx8_a_newer_screenshot_strips_an_older_one_kept_from_an_earlier_step() -> None:
    shot = [text("page"), image()]
    records = [user(1, "Browse."), assistant(2, None, [call("s1", "browser_use")]), result(3, "s1", shot)]
    projection = Projection()
    projection.extend(records)
    first = projection.project({"r1"}).messages
    assert first[-1]["content"] == shot  # the newest keeps its image
    more = [assistant(4, None, [call("s2", "browser_use")]), result(5, "s2", shot)]
    projection.extend(more)
    second = projection.project({"r1"}).messages
    assert second == project_records(records + more, open_runs={"r1"})
    assert "omitted" in json.dumps(second[2]) and second[-1]["content"] == shot
    assert first[-1]["content"] == shot  # what the first step handed out is left as it was
