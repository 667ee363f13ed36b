"""LOOP-1: what a step keeps from the one before gives exactly what a fresh start gives,
for any history cut into steps anywhere, while a step reads only what is new: the
projection (``Projection``: messages, sources, repairs) and the request body
(``RequestBuilder``: adapted, validated, the same errors)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from functools import partial

from histories import build, histories
from hypothesis import given
from hypothesis import strategies as st
from recordkit import assistant, call, image, result, run_status, text, user

from context import (
    AnthropicBuilder,
    RequestBuilder,
    RequestValidationError,
    anthropic_body_problems,
    build_anthropic_body,
    build_request_body,
    continuation_message,
    project_records,
)
from context.adapters import string_contents
from context.projector import Projection
from context.validate import DIALECTS
from tests.fakes.anthropic_rules import refusal


def _fresh(records: list[dict], **options) -> tuple[list, list, list, list]:
    sources: list = []
    repairs: list = []
    traces: list = []
    messages = project_records(records, sources_out=sources, repairs_out=repairs, traces_out=traces, **options)
    return messages, sources, repairs, traces


VIEW = [{"role": "user", "content": "VIEW"},
        {"role": "assistant", "content": None, "tool_calls": [call("a", "run")]}]  # a call the view left open


@given(events=histories(), cuts=st.lists(st.integers(0, 60), max_size=8),
       open_runs=st.lists(st.sampled_from([None, {"r1"}, {"r2"}, {"r1", "r3"}, set()]), min_size=9, max_size=9),
       view=st.sampled_from([None, VIEW[:1], VIEW]))
def test_loop1_a_kept_projection_equals_a_fresh_one_for_any_history_cut_anywhere(
        events, cuts, open_runs, view) -> None:
    records = build(events).records
    before = copy.deepcopy(records)
    options: dict = {"start_view": view, "start_watermark": 2} if view else {}
    projection = Projection(repairs=True, **options)
    done = 0
    handed_out: list[tuple[list, str]] = []
    for step, point in enumerate([*sorted({min(c, len(records)) for c in cuts}), len(records)]):
        projection.extend(records[done:point])
        done = point
        got = projection.project(open_runs[step])  # the runs still going may change from step to step
        assert (got.messages, got.sources, got.repairs, got.traces) == _fresh(
            records[:point], open_runs=open_runs[step], **options)
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


def test_loop1_a_call_whose_run_ended_unanswered_settles_and_still_gets_its_late_result() -> None:
    records = [*_tool_loop(3), assistant(8, None, [call("late", "search")]), run_status(9, status="interrupted")]
    projection = Projection()
    projection.extend(records)
    first = projection.project({"r1"})
    # The run ended without an answer: a placeholder (CTX-3) that nothing later changes.
    assert first.messages[-1]["content"].startswith("[unknown outcome")
    assert projection.unsettled == 0
    more = [user(10, "Again?", run="r2"), result(11, "late", "found it")]
    projection.extend(more)
    second = projection.project({"r2"}).messages
    assert second == project_records(records + more, open_runs={"r2"})
    assert "found it" in second[-1]["content"]  # its late result, shown where it arrived (CTX-4)
    assert projection.unsettled == 0


def test_loop1_a_pending_call_keeps_what_follows_it_unsettled_and_a_resumed_run_re_reads_all() -> None:
    records = [*_tool_loop(3), assistant(8, None, [call("slow", "search")])]
    projection = Projection()
    projection.extend(records)
    projection.project({"r1"})
    assert projection.unsettled == 1  # its run goes on: the call may yet be answered
    ended = [run_status(9, status="interrupted"), user(10, "Still there?", run="r2")]
    projection.extend(ended)
    projection.project({"r2"})
    assert projection.unsettled == 0
    # Resumed: the call is pending again, and its re-run result answers it (RUN-6).
    resumed = [run_status(11, status="resumed"), result(12, "slow", "done")]
    projection.extend(resumed)
    assert projection.unsettled == 10  # every item read again: 4 questions and answers, 3 calls, 3 results
    assert projection.project({"r1"}).messages == project_records(records + ended + resumed, open_runs={"r1"})


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


def _requests(records: list[dict], cuts: list[int], system: bool) -> Iterator[list[dict]]:
    """The messages of each step's request, the history cut at ``cuts``: a kept projection,
    after a system text that is a new dict at every step (as the run loop builds it)."""
    projection = Projection()
    done = 0
    for point in [*sorted({min(c, len(records)) for c in cuts}), len(records)]:
        projection.extend(records[done:point])
        done = point
        yield ([{"role": "system", "content": "Be brief."}] if system else []) + projection.project().messages


def _body_or_problems(build, messages: list[dict], **options):
    try:
        return build(messages, **options)
    except RequestValidationError as error:
        return [(p.index, p.rule) for p in error.problems]


@given(events=histories(), cuts=st.lists(st.integers(0, 60), max_size=6), dialect=st.sampled_from(DIALECTS),
       images=st.sampled_from([None, True, False]), model=st.sampled_from(["m", "deepseek-reasoner"]),
       system=st.booleans(), strings=st.booleans())
def test_loop1_a_kept_request_builder_equals_a_fresh_build_for_any_history_cut_anywhere(
        events, cuts, dialect, images, model, system, strings) -> None:
    records = build(events).records
    builder = RequestBuilder()
    options = {"dialect": dialect, "model": model, "max_output_tokens": 64, "supports_images": images,
               "tools": [{"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}]}
    for messages in _requests(records, cuts, system):
        before = json.dumps(messages, sort_keys=True)
        kept = _body_or_problems(partial(builder.build, string_contents=strings), messages, **options)
        fresh = _body_or_problems(build_request_body, messages, **options)
        if strings and isinstance(fresh, dict):  # issue #45: what local servers' templates read
            fresh["messages"] = string_contents(fresh["messages"])
        assert kept == fresh
        assert json.dumps(messages, sort_keys=True) == before  # the projected messages are left as they were


def test_loop1_in_a_tool_loop_each_request_adapts_and_validates_only_its_new_messages() -> None:
    records = _tool_loop(200)
    projection = Projection()
    builder = RequestBuilder()
    projection.extend(records[:1])
    builder.build([{"role": "system", "content": "S"}, *projection.project().messages], dialect="openai",
                  model="m", max_output_tokens=64)
    for position in range(1, len(records), 2):
        projection.extend(records[position:position + 2])
        messages = [{"role": "system", "content": "S"}, *projection.project().messages]
        body = builder.build(messages, dialect="openai", model="m", max_output_tokens=64)
        assert builder.reused == len(messages) - 2  # everything but this step's call and result
        assert body == build_request_body(messages, dialect="openai", model="m", max_output_tokens=64)


def test_loop1_with_string_contents_each_body_hands_on_the_messages_of_the_one_before() -> None:
    # Issue #46: every message made anew each step (``string_contents`` of the whole body)
    # sent the estimates and the call log back to comparing every message by value, and a
    # step at 300 cost 1.3–1.6× one at 20. The turns it changes (a tool call's null
    # content, the developer role) are the same objects from body to body too.
    records = [user(1, "Count up.")]
    for n in range(60):  # turns that only call a tool: their null content becomes ""
        records += [assistant(2 * n + 2, None, [call(f"c{n}", "calculator")]), result(2 * n + 3, f"c{n}", f"{n}")]
    projection = Projection()
    builder = RequestBuilder()
    options = {"dialect": "openai", "model": "m", "max_output_tokens": 64, "string_contents": True}
    previous: list[dict] = []
    projection.extend(records[:1])
    for position in range(1, len(records), 2):
        projection.extend(records[position:position + 2])
        messages = [{"role": "developer", "content": "S"}, *projection.project().messages]
        body = builder.build(messages, **options)
        assert body["messages"] == string_contents(build_request_body(
            messages, dialect="openai", model="m", max_output_tokens=64)["messages"])
        kept = [a is b for a, b in zip(body["messages"][1:], previous[1:])]
        assert kept == [True] * (len(previous) - 1)  # all but the system text, rebuilt each step
        assert body["messages"][0] == {"role": "system", "content": "S"}
        assert any(m["role"] == "assistant" and m["content"] == "" for m in body["messages"][1:])
        previous = body["messages"]


@given(events=histories(), cuts=st.lists(st.integers(0, 60), max_size=6), images=st.sampled_from([None, False]),
       keep_thinking=st.booleans(), system=st.booleans(), summary_at=st.integers(0, 8))
def test_loop1_a_kept_anthropic_builder_equals_a_fresh_native_body_for_any_history_cut_anywhere(
        events, cuts, images, keep_thinking, system, summary_at) -> None:
    records = build(events).records
    builder = AnthropicBuilder()
    summary = continuation_message("SUMMARY")
    options = {"model": "claude-opus-5", "max_tokens": 64, "supports_images": images, "keep_thinking": keep_thinking,
               "tools": [{"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}]}
    for messages in _requests(records, cuts, system):
        if summary_at < len(messages):  # a compaction summary somewhere: the cache mark it gets moves with it
            messages[summary_at] = summary  # one object, as a view's messages are from step to step
        before = json.dumps(messages, sort_keys=True)
        kept = _body_or_problems(builder.build, messages, **options)
        assert kept == _body_or_problems(build_anthropic_body, messages, **options)
        if isinstance(kept, dict):  # the split check (turns, then the marks) agrees with the one-pass check,
            assert anthropic_body_problems(kept) == []  # and with the strict fake's own rules
            assert refusal(json.loads(json.dumps(kept))) is None
        assert json.dumps(messages, sort_keys=True) == before


def test_loop1_an_anthropic_tool_loop_builds_only_its_new_turns_and_marks_copies() -> None:
    records = _tool_loop(120)
    projection = Projection()
    builder = AnthropicBuilder()
    projection.extend(records[:1])
    system = {"role": "system", "content": "S"}
    first = builder.build([system, *projection.project().messages], model="m", max_tokens=64)
    for position in range(1, len(records), 2):
        projection.extend(records[position:position + 2])
        messages = [{"role": "system", "content": "S"}, *projection.project().messages]
        body = builder.build(messages, model="m", max_tokens=64)
        assert builder.reused == len(messages) - 2
        assert body == build_anthropic_body(messages, model="m", max_tokens=64)
    # The first body handed out still carries only its own marks.
    assert json.dumps(first).count("cache_control") == 2
