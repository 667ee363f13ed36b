"""The step's pipeline (``context.ContextPipeline``): records in, the next action out.

LOOP-1 (a kept context answers what a fresh projection answers; a step estimates only
what is new), CTX-22/CTX-25 (the trigger reads the calibrated figure of the request as
sent), CTX-39 (one hard-limit rule), CTX-40 (no policy: the legacy threshold, never a
compaction), CTX-44 (a recent failure holds compaction back) and CTX-25's usage option.
"""

from __future__ import annotations

import json

import pytest
from histories import build, histories
from hypothesis import given
from hypothesis import strategies as st
from recordkit import assistant, call, result, user
from test_ctx_incremental import _tool_loop

from context import (
    Budget,
    BytesEstimator,
    Calibration,
    CompactFirst,
    ContextPipeline,
    ContextPolicy,
    ContextTooLong,
    Counters,
    EstimateCache,
    InstanceContext,
    RequestShape,
    RunFigures,
    Send,
    Start,
    build_body,
    project_records,
)

SYSTEM = {"role": "system", "content": "You are Ada's research assistant."}
TOOLS = [{"type": "function", "function": {"name": "calculator", "description": "Arithmetic",
                                           "parameters": {"type": "object", "properties": {}}}}]
OPENAI = RequestShape(model="qwen2.5:7b", dialect="openai")
NATIVE = RequestShape(model="claude-opus-5", dialect="anthropic")
DEFAULT_POLICY = ContextPolicy()


def _figures(budget: Budget | None = None, ratio: float = 1.0) -> RunFigures:
    return RunFigures(EstimateCache(BytesEstimator()), Calibration(prior=ratio),
                      budget or Budget(100_000, 1_000, 1_000))


def _pipeline(shape: RequestShape = OPENAI, *, policy: ContextPolicy | None = DEFAULT_POLICY,
              figures: RunFigures | None = None, records: list[dict] | None = None) -> ContextPipeline:
    context = InstanceContext(open_runs={"r1"})
    context.load(Start(), records if records is not None else [user(1, "What is 17 * 23?")])
    return ContextPipeline(shape=shape, figures=figures or _figures(), policy=policy, context=context,
                           track=("request", 1))


@given(events=histories(), cuts=st.lists(st.integers(0, 60), max_size=6))
def test_loop1_a_fed_context_projects_what_a_fresh_projection_of_its_records_projects(events, cuts) -> None:
    records = build(events).records
    context = InstanceContext(open_runs={"r1"})
    context.load(Start(), [])
    done = 0
    for point in [*sorted({min(c, len(records)) for c in cuts}), len(records)]:
        context.feed(records[done:point])
        context.feed(records[:point])  # what it holds already is skipped
        done = point
        assert context.projected().messages == project_records(records[:point], open_runs={"r1"})


def test_loop1_a_context_loaded_from_another_starting_point_reads_afresh_and_from_the_same_keeps_what_it_read():
    context = InstanceContext(open_runs={"r1"}, screen_tools=["screenshot"])
    context.load(Start(), [user(1, "Q1"), assistant(2, "A1")])
    context.load(Start(), [assistant(2, "A1"), user(3, "Q2")])  # the same start: only the new one is added
    assert [m["content"] for m in context.projected().messages] == ["Q1", "A1", "Q2"]
    context.reload()
    assert not context.loaded
    snapshot = Start("snapshot", ("snapshot", 7), 3, [{"role": "user", "content": "[summary of Q1 to Q2]"}])
    context.load(snapshot, [user(4, "Q3")])
    assert [m["content"] for m in context.projected().messages] == ["[summary of Q1 to Q2]", "Q3"]
    assert context.last_seq == 4


def test_ctx25_a_step_is_estimated_once_on_the_body_as_sent_and_the_next_step_estimates_only_what_is_new():
    records = _tool_loop(30)
    pipeline = _pipeline(records=records)
    first = pipeline.next_action(SYSTEM, TOOLS, counters=Counters())
    assert isinstance(first, Send)
    plain = BytesEstimator()
    # The one figure: the body's own messages and tools, counted as a fresh estimator counts them.
    assert first.estimate == plain.request(first.body["messages"], first.body["tools"])
    assert first.per_message == [plain.message(m) for m in first.body["messages"]]
    estimates = pipeline.figures.estimates
    misses = estimates.misses
    pipeline.context.feed([assistant(62, "step 30", [call("c30", "calculator")]), result(63, "c30", "31")])
    second = pipeline.next_action(SYSTEM, TOOLS, counters=Counters())
    assert isinstance(second, Send) and estimates.misses - misses == 2  # the two new messages, nothing else
    assert second.estimate == plain.request(second.body["messages"], second.body["tools"])


def test_ctx25_a_native_body_is_estimated_on_the_messages_it_was_built_from_with_no_positions():
    records = [user(1, "List the repo."), assistant(2, None, [call("c1", "run")]), result(3, "c1", "README.md")]
    send = _pipeline(NATIVE, records=records).next_action(SYSTEM, TOOLS, counters=Counters())
    assert isinstance(send, Send) and "system" in send.body and send.per_message == []
    messages = [SYSTEM, *project_records(records, open_runs={"r1"})]
    assert send.estimate == BytesEstimator().request(messages, TOOLS)


def test_ctx22_the_trigger_reads_the_calibrated_figure_and_names_what_fired():
    records = _tool_loop(40)
    uncalibrated = _pipeline(records=records).next_action(SYSTEM, TOOLS, counters=Counters())
    assert isinstance(uncalibrated, Send)
    # A window whose trigger sits just above our estimate: only the calibration pushes it over.
    effective = int(uncalibrated.estimate / 0.8) + 10
    budget = Budget(context_window=effective + 2_000, max_output_tokens=1_000, safety_margin_tokens=1_000)
    assert isinstance(_pipeline(records=records, figures=_figures(budget)).next_action(
        SYSTEM, TOOLS, counters=Counters()), Send)
    action = _pipeline(records=records, figures=_figures(budget, ratio=1.2)).next_action(
        SYSTEM, TOOLS, counters=Counters())
    assert isinstance(action, CompactFirst) and action.trigger == "budget"
    assert action.tokens == Calibration(prior=1.2).figure(uncalibrated.estimate)
    turns = _pipeline(records=records, policy=ContextPolicy(user_turns=3)).next_action(
        SYSTEM, TOOLS, counters=Counters(user_turns=5, baseline_user_turns=1))
    assert isinstance(turns, CompactFirst) and turns.trigger == "user_turns"
    manual = _pipeline(records=records).next_action(SYSTEM, TOOLS, counters=Counters(), manual=True)
    assert isinstance(manual, CompactFirst) and manual.trigger == "manual"


def test_ctx44_a_recent_failure_holds_compaction_back_until_the_request_grew_or_time_passed():
    pipeline = _pipeline(policy=ContextPolicy(user_turns=1))
    counters = Counters(user_turns=2)
    first = pipeline.next_action(SYSTEM, TOOLS, counters=counters)
    assert isinstance(first, CompactFirst)
    failure = {"tokens": first.tokens, "at": 1_000.0}
    held = pipeline.next_action(SYSTEM, TOOLS, counters=counters, failure=failure, now=1_060.0)
    assert isinstance(held, Send) and held.throttled
    later = pipeline.next_action(SYSTEM, TOOLS, counters=counters, failure=failure, now=1_000.0 + 600)
    assert isinstance(later, CompactFirst)
    grown = pipeline.next_action(SYSTEM, TOOLS, counters=counters, failure={**failure, "tokens": first.tokens // 2},
                                 now=1_060.0)
    assert isinstance(grown, CompactFirst)


def test_ctx40_without_a_policy_nothing_compacts_and_the_legacy_threshold_keeps_the_newest_groups():
    records = [user(1, "x" * 70_000), assistant(2, "long answer read"), user(3, "And now?")]
    send = _pipeline(policy=None, records=records).next_action(SYSTEM, TOOLS, counters=Counters(user_turns=99),
                                                               manual=True)
    assert isinstance(send, Send)
    assert [m["content"] for m in send.body["messages"]] == [SYSTEM["content"], "long answer read", "And now?"]


@given(window=st.integers(3_000, 200_000), output=st.integers(1, 1_000), margin=st.integers(0, 1_000),
       figure=st.integers(0, 250_000))
def test_ctx39_one_hard_limit_rule_a_figure_fits_exactly_when_the_effective_input_holds_it(
        window, output, margin, figure) -> None:
    budget = Budget(window, output, margin)
    assert budget.fits(figure) is (figure <= budget.effective_input)


def test_ctx39_a_request_over_the_hard_limit_is_never_sent_and_a_compacted_one_is_checked_again():
    records = [user(1, "y" * 9_000)]
    small = Budget(context_window=4_000, max_output_tokens=1_000, safety_margin_tokens=500)
    with pytest.raises(ContextTooLong) as caught:
        _pipeline(policy=None, records=records, figures=_figures(small)).next_action(SYSTEM, TOOLS,
                                                                                     counters=Counters())
    assert caught.value.reserve == 1_000 and caught.value.figure > small.effective_input
    pipeline = _pipeline(records=records, figures=_figures(small))
    action = pipeline.next_action(SYSTEM, TOOLS, counters=Counters())
    assert isinstance(action, CompactFirst)
    with pytest.raises(ContextTooLong):
        pipeline.without_compaction()  # nothing was compacted: still too long
    send = pipeline.after_compaction(SYSTEM, TOOLS, [{"role": "user", "content": "[summary] Ada asked for y."}])
    assert send.repairs == [] and send.body["messages"][-1]["content"] == "[summary] Ada asked for y."
    assert not pipeline.context.loaded  # the next step loads from the new snapshot


def test_ctx25_the_body_asks_for_stream_usage_only_where_the_provider_reads_it():
    messages = [SYSTEM, {"role": "user", "content": "Hi"}]
    asked = build_body(OPENAI, messages, max_output_tokens=64)
    silent = build_body(RequestShape(model=OPENAI.model, dialect="openai", stream_usage=False), messages,
                        max_output_tokens=64)
    assert asked["stream_options"] == {"include_usage": True} and "stream_options" not in silent
    assert "stream_options" not in build_body(NATIVE, messages, max_output_tokens=64)
    assert json.loads(json.dumps(silent)) == {k: v for k, v in asked.items() if k != "stream_options"}


def test_run13_a_compacted_views_request_holds_at_most_the_image_budgets_images() -> None:
    """The anchor question and the kept newest messages may each carry images; together they
    went out past the budget (the providers refuse more than 100 images, 32 MB)."""
    from context import DEFAULT_IMAGE_BUDGET

    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "iVBORw0KGgo" + "A" * 53}}
    view = [{"role": "user", "content": [{"type": "text", "text": f"screen {n}"}, part]} for n in range(30)]
    seeing = RequestShape(model="gpt-4o", dialect="openai", supports_images=True)
    body = _pipeline(seeing).after_compaction(SYSTEM, TOOLS, view).body
    images = [p for m in body["messages"] if isinstance(m["content"], list) for p in m["content"]
              if p.get("type") == "image_url"]
    assert len(images) == DEFAULT_IMAGE_BUDGET.max_images < 30
    assert body["messages"][-1]["content"][-1] == part  # the newest kept
