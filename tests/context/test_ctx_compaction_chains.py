"""Compactions in a row, as a session lives them: records -> projection -> compaction ->
checkpoint record -> projection -> the next compaction (CTX-3, CTX-36, CTX-41).

Each checkpoint is written as a ``compaction`` record with the result's messages and the
traces of what each stands for (``context.traces``), and read back by the projector, the
way the worker stores a snapshot and starts from it.
"""

from __future__ import annotations

import json

from recordkit import assistant, call, record, result, run_status, user
from test_ctx_compaction import BUDGET, EST, LOG, POLICY, SYSTEM, WIDE, drive_recording, nine, scripted

from context import Budget, project_records, tool_call_states
from context.compaction import (
    CompactionRequest,
    CompactionResult,
    RuntimeState,
    compact,
    continuation_message,
    render_runtime_state,
)
from context.records import UNKNOWN_OUTCOME_TEXT
from context.traces import traces_json


class Session:
    """A session's records, written the way the worker writes them."""

    def __init__(self) -> None:
        self.records: list[dict] = []
        self.asked = 0

    @property
    def next_seq(self) -> int:
        return len(self.records) + 1

    def add(self, make, *args, **kwargs) -> None:
        self.records.append(make(self.next_seq, *args, **kwargs))

    def question(self, run: str, *, short: bool = False) -> None:
        """A question, a call, its log, an answer: four records."""
        self.asked += 1
        n = self.asked
        self.add(user, f"Q{n}" if short else f"Q{n} please check the logs of service {n}", run=run)
        self.add(assistant, f"Looking at {n}.", [call(f"c{n}", "read_log", json.dumps({"svc": n}))], run=run)
        self.add(result, f"c{n}", f"log {n} " + LOG, name="read_log", run=run)
        self.add(assistant, f"Answer {n}: all fine.", run=run)

    def end(self, run: str, status: str = "completed") -> None:
        self.add(run_status, run=run, status=status)

    def view(self, run: str) -> tuple[list[dict], list, list]:
        sources: list = []
        traces: list = []
        messages = project_records(self.records, open_runs={run}, sources_out=sources, traces_out=traces)
        return messages, sources, traces

    def compact(self, run: str, *, budget: Budget = BUDGET, anchor: dict | None = None,
                max_calls: int = 4) -> CompactionResult:
        """Compact the view as the worker does (runtime state from the records), and write
        the checkpoint when it commits."""
        messages, sources, traces = self.view(run)
        states = tool_call_states(self.records, open_runs={run})
        request = CompactionRequest(
            system=SYSTEM, messages=messages, sources=sources, traces=traces, task_anchor=anchor,
            runtime_state=RuntimeState(pending_calls=states.pending, unknown_calls=states.unknown), budget=budget,
            policy=POLICY, estimator=EST, tools=[], trigger="manual", max_summary_calls=max_calls)
        outcome, _ = drive_recording(compact(request), scripted)
        assert (outcome.outcome, outcome.reason) == ("compacted", "committed")
        self.add(record, "compaction", {"messages": outcome.messages, "summary": outcome.summary,
                                        "covered_seq": self.next_seq - 1, "traces": traces_json(outcome.traces)},
                 run=run)
        return outcome


# -- CTX-3 and CTX-36: an unknown outcome, once ----------------------------------------------------

SMALL = Budget(context_window=6_000, max_output_tokens=1_000, safety_margin_tokens=200)
DEPLOY = {"id": "toolu_01", "name": "deploy", "arguments": '{"env": "prod"}'}


def deploy_session() -> Session:
    """Ten short questions, then a deploy whose run was interrupted before its result."""
    session = Session()
    for _ in range(10):
        session.question("r1", short=True)
    session.add(user, "Deploy the fix", run="r1")
    session.add(assistant, "Deploying.", [call("toolu_01", "deploy", '{"env": "prod"}')], run="r1")
    session.end("r1", "interrupted")
    session.add(user, "Did the deploy go through?", run="r2")
    return session


def test_ctx3_a_kept_group_with_an_unknown_outcome_shows_the_call_once_in_the_runtime_state_block() -> None:
    session = deploy_session()
    question = {"role": "user", "content": "Did the deploy go through?"}
    before, _, _ = session.view("r2")
    assert before[-3:-1] == [  # the placeholder (CTX-3) beside the call, renumbered (CTX-5)
        {"role": "assistant", "content": "Deploying.", "tool_calls": [
            {"id": "call_11", "type": "function", "function": {"name": "deploy", "arguments": '{"env": "prod"}'}}]},
        {"role": "tool", "tool_call_id": "call_11", "content": UNKNOWN_OUTCOME_TEXT}]
    compacted = session.compact("r2", budget=SMALL, anchor=question)
    assert compacted.metrics["unknown_calls_in_block"] == 1
    view = project_records(session.records, open_runs={"r2"})
    block = render_runtime_state(RuntimeState(unknown_calls=(DEPLOY,)))
    # It used to be listed in the block as toolu_01 and shown again in the kept group as
    # call_1 with its placeholder: two ids for one call. The block lists it (CTX-36); the
    # group keeps its text.
    assert view == [
        continuation_message(nine([f"Q{n}" for n in range(1, 11)])),
        block,
        {"role": "assistant", "content": "Answer 10: all fine."},
        {"role": "user", "content": "Deploy the fix"},
        {"role": "assistant", "content": "Deploying."},
        question]
    # The summary stands for records 1-39, the kept messages for theirs; the block for none.
    assert compacted.traces == [((1, 39),), (), ((40, 40),), ((41, 41),), ((42, 42),), ((44, 44),)]
    dumped = json.dumps(view)
    assert dumped.count("deploy (call toolu_01)") == 1 and '"name": "deploy"' not in dumped
    assert UNKNOWN_OUTCOME_TEXT not in dumped
    # The next compaction reads the call from the records again: still listed, once.
    for _ in range(8):
        session.question("r2", short=True)
    session.compact("r2", budget=SMALL)
    again = json.dumps(project_records(session.records, open_runs={"r2"}))
    assert again.count('deploy (call toolu_01) with arguments {\\"env\\": \\"prod\\"}') == 1
    assert '"name": "deploy"' not in again and UNKNOWN_OUTCOME_TEXT not in again


def test_ctx3_a_kept_call_the_block_does_not_list_keeps_its_placeholder() -> None:
    # Nothing the block says stands for it (a caller that computed no runtime state):
    # the call stays where it is, with its placeholder, rather than vanish.
    session = deploy_session()
    messages, sources, traces = session.view("r2")
    request = CompactionRequest(
        system=SYSTEM, messages=messages, sources=sources, traces=traces, task_anchor=None,
        runtime_state=RuntimeState(plan="1. check the deploy"), budget=SMALL, policy=POLICY, estimator=EST,
        tools=[], trigger="manual", max_summary_calls=4)
    outcome, _ = drive_recording(compact(request), scripted)
    assert outcome.outcome == "compacted" and outcome.metrics["unknown_calls_in_block"] == 0
    assert outcome.messages[-3:-1] == messages[-3:-1]


def test_ctx3_a_kept_result_recorded_with_status_unknown_is_left_to_the_block_too() -> None:
    session = Session()
    for _ in range(10):
        session.question("r1", short=True)
    session.add(user, "Pay the invoice", run="r1")
    session.add(assistant, "Paying.", [call("pay_1", "pay", '{"invoice": 7}'), call("look_1", "look")], run="r1")
    session.add(result, "pay_1", "the worker stopped while the payment was sent", status="unknown", run="r1",
                name="pay")
    session.add(result, "look_1", "nothing to see", run="r1", name="look")
    session.end("r1")
    session.add(user, "Was it paid?", run="r2")
    session.compact("r2", budget=SMALL)
    view = project_records(session.records, open_runs={"r2"})
    assert view[-4:] == [
        {"role": "user", "content": "Pay the invoice"},
        {"role": "assistant", "content": "Paying.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "nothing to see"},  # the other call stays
        {"role": "user", "content": "Was it paid?"}]
    dumped = json.dumps(view)
    assert dumped.count("pay (call pay_1)") == 1 and "the worker stopped" not in dumped


# -- CTX-41: record ranges through earlier checkpoints ---------------------------------------------


def three_compactions() -> tuple[Session, list[CompactionResult]]:
    session = Session()
    for run in ("r1", "r2"):
        for _ in range(3):
            session.question(run)
        session.end(run)  # records 13 and 26: no message
    session.question("r3")
    first = session.compact("r3")  # record 31
    session.question("r3")
    session.end("r3")  # record 36
    for _ in range(3):
        session.question("r4")
    second = session.compact("r4")  # record 49
    session.end("r4")  # record 50
    for _ in range(4):
        session.question("r5")
    third = session.compact("r5")
    return session, [first, second, third]


def test_ctx41_chained_compactions_trace_every_summary_to_its_records_exactly() -> None:
    _, (first, second, third) = three_compactions()
    assert first.metrics["segments"] == [
        {"index": 0, "consumed": [1, 16], "ranges": [[1, 12], [14, 16]], "messages": 15}]
    # The second summary replaced the first (records 1-12, 14-16), the messages the first
    # checkpoint kept (17-25, 27-30) and three new ones (32-34). It used to say [32, 34]:
    # what came through the checkpoint was not traced.
    assert second.metrics["segments"] == [
        {"index": 0, "consumed": [1, 34], "ranges": [[1, 12], [14, 25], [27, 30], [32, 34]], "messages": 16}]
    assert third.metrics["segments"] == [
        {"index": 0, "consumed": [1, 53], "ranges": [[1, 12], [14, 25], [27, 30], [32, 35], [37, 48], [51, 53]],
         "messages": 16}]
    assert [c.metrics["covered_ranges"] for c in (first, second, third)] == [
        s.metrics["segments"][0]["ranges"] for s in (first, second, third)]
    # Every message of each new view says what it stands for: the summary its records, each
    # kept message its record, through the checkpoints before.
    assert second.traces == [((1, 12), (14, 25), (27, 30), (32, 34)), ((35, 35),),
                             *[((seq, seq),) for seq in range(37, 49)]]
    assert third.traces == [((1, 12), (14, 25), (27, 30), (32, 35), (37, 48), (51, 53)),
                            *[((seq, seq),) for seq in range(54, 67)]]


def test_ctx41_with_segments_the_first_carries_the_earlier_summary_and_each_its_own_records() -> None:
    session = Session()
    for _ in range(12):
        session.question("r1", short=True)
    first = session.compact("r1", budget=WIDE, max_calls=6)
    for _ in range(30):
        session.question("r1", short=True)
    second = session.compact("r1", budget=WIDE, max_calls=6)
    segments = second.metrics["segments"]
    assert len(segments) >= 2
    carried = first.metrics["covered_ranges"]
    assert segments[0]["ranges"][:len(carried) - 1] == carried[:-1]  # the earlier summary goes first
    consumed = sorted(seq for s in segments for a, b in s["ranges"] for seq in range(a, b + 1))
    assert consumed == sorted(set(consumed))  # no record in two segments
    # Every record but the first checkpoint's own (record 49, a compaction record).
    assert second.metrics["covered_ranges"] == [[1, 48], [50, consumed[-1]]]
    assert [s["consumed"] for s in segments] == [[s["ranges"][0][0], s["ranges"][-1][1]] for s in segments]


def test_ctx41_the_projector_reads_a_checkpoints_traces_and_trusts_none_that_are_malformed() -> None:
    checkpoint = {"messages": [{"role": "user", "content": "summary"}, {"role": "user", "content": "Q2"}],
                  "covered_seq": 5, "traces": [[[1, 3], [5, 5]], [[4, 4]]]}
    traces: list = []
    sources: list = []
    project_records([user(1, "Q1"), record(6, "compaction", checkpoint), user(7, "Q3")], traces_out=traces,
                    sources_out=sources)
    assert traces == [((1, 3), (5, 5)), ((4, 4),), ((7, 7),)]
    assert sources == [None, None, (7, 7)]  # read from the checkpoint, not from a record (the planner relies on it)
    # Not one per message: nothing is known. One malformed entry: that message is not known.
    for junk, read in (([[[1, 3]]], [(), ()]), ("1-3", [(), ()]), (None, [(), ()]),
                       ([[["1", 3]], [[4, 4]]], [(), ((4, 4),)]), ([[[3, 1]], [[4, 4]]], [(), ((4, 4),)]),
                       ([[[1, 3], [True, 5]], [[4, 4]]], [(), ((4, 4),)])):
        project_records([record(6, "compaction", {**checkpoint, "traces": junk})], traces_out=traces)
        assert traces == read, junk
    project_records([user(12, "Q4")], start_view=checkpoint["messages"], start_watermark=10,
                    start_traces=checkpoint["traces"], traces_out=traces)
    assert traces == [((1, 3), (5, 5)), ((4, 4),), ((12, 12),)]
