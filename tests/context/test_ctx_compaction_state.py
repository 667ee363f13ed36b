"""CTX-36: the runtime-state block within its share of the threshold.

The block is required content, in every compacted view, and its lists only grow: every
call of the session whose outcome nobody reported, a plan of up to 50 steps of 500
characters carried into every later question. Unbounded, 20 unknown calls took 646 of a
2,048-token model's 787-unit threshold; the compaction was skipped as
``required_content_too_large`` and every later question ended in ``context_overflow``.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re

from hypothesis import event, given, settings
from hypothesis import strategies as st
from test_ctx_compaction import EST, drive_recording, nine
from test_ctx_compaction_properties import CI
from test_ctx_compaction_sizing import POLICY, SMALL, conversation, small_request

from context.compaction import (
    RUNTIME_STATE_HEADER,
    RUNTIME_STATE_SHARE,
    RuntimeState,
    SummaryReply,
    compact,
    is_runtime_state_message,
    render_runtime_state,
    runtime_state_block,
    runtime_state_room,
)
from context.estimators import tiktoken_estimator


def test_ctx36_the_block_lists_the_newest_calls_that_fit_and_counts_the_rest() -> None:
    calls = tuple({"id": f"c{n}", "name": "pay", "arguments": "{}"} for n in range(40))
    whole = render_runtime_state(RuntimeState(unknown_calls=calls))
    assert "(call c0)" in whole["content"] and "earlier call" not in whole["content"]  # no bound: every call
    block = render_runtime_state(RuntimeState(unknown_calls=calls), max_units=600, cost_of=EST.message)
    text = block["content"]
    assert EST.message(block) <= 600
    shown = [int(n) for n in re.findall(r"\(call c(\d+)\)", text)]
    assert shown == list(range(40 - len(shown), 40)) and 0 < len(shown) < 40  # the newest, in their order
    assert f"- and {40 - len(shown)} earlier calls like these (no room to list them)" in text


def plan_of(steps: int, chars: int = 500, done: int = 0) -> str:
    """A plan as ``sessions.frames.plan_text`` writes it: numbered steps with their status."""
    return "\n".join(f"{n}. [{'done' if n <= done else 'pending'}] S{n}: " + ("check the totals " * 40)[:chars]
                     for n in range(1, steps + 1))


def test_ctx36_a_small_window_with_many_unknown_calls_and_a_long_plan_still_compacts(o200k) -> None:
    # Measured: unbounded, 20 such calls took 646 of the 787 units of this window's threshold
    # (with the plan, more than the threshold), the compaction was skipped as
    # required_content_too_large, and every later question ended in context_overflow.
    calls = tuple({"id": f"call_{n}", "name": "pay_invoice", "arguments": json.dumps(
        {"invoice": f"INV-{n:04d}", "amount": 125.5, "currency": "EUR", "note": "monthly hosting"})} for n in range(20))
    state = RuntimeState(plan=plan_of(50, done=10), unknown_calls=calls)
    req = dataclasses.replace(small_request(conversation(10), o200k), runtime_state=state)
    assert o200k.message(render_runtime_state(state)) > SMALL.trigger_threshold(POLICY)
    result_, _ = drive_recording(compact(req), lambda _call: SummaryReply(f"<summary>\n{nine(['Q1'])}\n</summary>"))
    assert (result_.outcome, result_.reason) == ("compacted", "committed")
    room = runtime_state_room(req)
    assert room == int(SMALL.trigger_threshold(POLICY) * RUNTIME_STATE_SHARE) == result_.metrics["state_room"]
    block = next(m for m in result_.messages if is_runtime_state_message(m))
    assert block == runtime_state_block(req) and o200k.message(block) == result_.metrics["state_cost"] <= room
    # The newest call is listed; what is not listed is counted, never dropped without a word.
    text = block["content"]
    assert "(call call_19)" in text and "do not assume they succeeded" in text
    listed = len(re.findall(r"\(call call_\d+\)", text))
    assert f"- and {20 - listed} earlier calls like these" in text
    assert "50 plan lines" in text  # no room for a step here: said so


def test_ctx36_a_plan_shortened_to_its_room_keeps_its_steps_in_order_unfinished_first() -> None:
    state = RuntimeState(plan=plan_of(50, done=30))
    block = render_runtime_state(state, max_units=1_200, cost_of=EST.message)
    text = block["content"]
    assert EST.message(block) <= 1_200 and "Plan (current; shortened to fit the context window):" in text
    shown = [int(n) for n in re.findall(r"\] S(\d+):", text)]
    assert shown == sorted(shown) and shown[0] == 31  # the unfinished steps got the room first
    assert f"({50 - len(shown)} of 50 plan lines left out: no room to list them)" in text
    # A plan that fits stays verbatim.
    assert render_runtime_state(RuntimeState(plan=plan_of(3, 100)), max_units=1_200, cost_of=EST.message)[
        "content"] == f"{RUNTIME_STATE_HEADER}\n\nPlan (current, verbatim):\n{plan_of(3, 100)}"



# -- properties

WORDS = ("deploy", "invoice", "Zürich", "東京", "totals", "🙂", "region", "{\"a\": 1}", "naïve", "log")


def _words(rng: random.Random, chars: int) -> str:
    out, length = [], 0
    while length < chars:
        out.append(rng.choice(WORDS))
        length += len(out[-1]) + 1
    return " ".join(out)[:chars]


@st.composite
def runtime_states(draw):
    """Any runtime state a session can reach: a plan of up to 50 steps of up to 500
    characters (or one stored as text), and lists of any length with texts of any size."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    plan = None
    kind = draw(st.sampled_from(["none", "steps", "steps", "text"]))
    if kind == "steps":
        steps = draw(st.integers(1, 50))
        plan = "\n".join(f"{n}. [{rng.choice(['done', 'pending', 'in progress'])}] S{n}: "
                         f"{_words(rng, rng.choice([0, 20, 200, 500]))}" for n in range(1, steps + 1))
    elif kind == "text":
        plan = _words(rng, draw(st.integers(0, 3_000)))

    def calls(prefix: str) -> tuple[dict, ...]:
        return tuple({"id": f"{prefix}{n}", "name": rng.choice(["pay", "deploy", "read_log"]),
                      "arguments": rng.choice([json.dumps({"memo": _words(rng, rng.choice([0, 50, 900]))}),
                                               {"n": n, "text": _words(rng, 30)}])}
                     for n in range(draw(st.sampled_from([0, 0, 1, 3, 30, 200]))))

    return RuntimeState(
        plan=plan, pending_calls=calls("cp"), unknown_calls=calls("cu"),
        sub_instances=tuple({"id": f"sub-{n}", "task": _words(rng, rng.choice([10, 2_000])), "status": "running"}
                            for n in range(draw(st.integers(0, 4)))),
        queued_supplements=tuple(_words(rng, rng.choice([5, 6_000])) for _ in range(draw(st.integers(0, 3)))))


ESTIMATORS = {"bytes": EST, "o200k": tiktoken_estimator("o200k_base")}


@settings(max_examples=400 if CI else 100, deadline=None)
@given(state=runtime_states(), max_units=st.integers(0, 8_000), name=st.sampled_from(sorted(ESTIMATORS)))
def test_ctx36_for_any_runtime_state_the_block_costs_at_most_its_room(state, max_units, name) -> None:
    estimator = ESTIMATORS[name]
    block = render_runtime_state(state, max_units=max_units, cost_of=estimator.message)
    whole = render_runtime_state(state)
    if whole is None:
        assert block is None
        return
    if estimator.message(whole) <= max_units:  # what fits is the unbounded block, exactly
        assert block == whole
        return
    event(f"{name}: {'no block' if block is None else 'shortened'}")
    if block is None:  # not even the header and a line counting everything fit, in less than this
        assert max_units < {"bytes": 600, "o200k": 150}[name]
        return
    assert estimator.message(block) <= max_units
    text = block["content"]
    assert is_runtime_state_message(block)
    for prefix, calls in (("cp", state.pending_calls), ("cu", state.unknown_calls)):
        if not calls:
            continue
        shown = [int(n) for n in re.findall(rf"\(call {prefix}(\d+)\)", text)]
        assert shown == list(range(len(calls) - len(shown), len(calls)))  # the newest, in their order
        left = len(calls) - len(shown)
        if left and shown:  # the earlier ones counted
            assert f"- and {left} earlier call{'s' if left != 1 else ''} like these" in text
        elif left:  # none listed: the list counted in the last line
            assert re.search(rf"listed, for lack of room .*\b{left} (pending tool calls?|tool calls? with an "
                             "unknown outcome)", text)
    if state.unknown_calls:
        assert "unknown outcome" in text
    steps = [int(n) for n in re.findall(r"\] S(\d+):", text)]
    assert steps == sorted(steps)  # the plan's steps keep their order
    if steps and state.plan:
        lines = state.plan.splitlines()
        if len(steps) < len(lines):
            assert f"({len(lines) - len(steps)} of {len(lines)} plan lines left out" in text
        done = {n for n, line in enumerate(lines, 1) if "[done]" in line}
        if done & set(steps):  # a done step listed: every unfinished one is
            assert set(range(1, len(lines) + 1)) - done <= set(steps)
