"""CTX-2 to CTX-6: pairing, unknown outcomes, late results, call ids, broken calls."""

from __future__ import annotations

from recordkit import assistant, call, result, run_status, tool_call_msg, user

from context import build_request_body, project_records, validate_request
from context.records import INTERRUPTED_SUFFIX, LATE_RESULT_HEADER, UNKNOWN_OUTCOME_TEXT

UNKNOWN = {"content": UNKNOWN_OUTCOME_TEXT}


def tool(call_id: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def test_ctx3_the_placeholder_says_the_action_may_have_happened_and_claims_nothing() -> None:
    assert "may or may not have happened" in UNKNOWN_OUTCOME_TEXT
    assert "Do not assume it succeeded" in UNKNOWN_OUTCOME_TEXT


def test_ctx2_it_drops_unpaired_call_blocks_but_keeps_text() -> None:
    """Within the open run, an unanswered call is pending: its block goes, text stays."""
    records = [
        user(1, "Run the tests and fix main.py"),
        assistant(2, "Running the tests, then editing.",
                  [call("test-1"), call("patch-1", "edit", '{"path": "main.py"}')]),
        result(3, "test-1", "2 failed"),
    ]
    assert project_records(records) == [
        {"role": "user", "content": "Run the tests and fix main.py"},
        {"role": "assistant", "content": "Running the tests, then editing.",
         "tool_calls": [tool_call_msg("call_1")]},
        tool("call_1", "2 failed"),
    ]


def test_ctx2_an_assistant_message_with_nothing_usable_left_is_dropped() -> None:
    records = [user(1, "Edit it"), assistant(2, None, [call("patch-1", "edit")])]
    assert project_records(records) == [{"role": "user", "content": "Edit it"}]


def test_ctx2_an_orphan_result_is_left_out_of_the_view() -> None:
    records = [user(1, "Hi"), result(2, "nobody-called-me", "stray output"), assistant(3, "Hello!")]
    assert project_records(records) == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
    ]


def test_ctx2_a_result_recorded_before_its_call_does_not_answer_it() -> None:
    records = [
        user(1, "Go"),
        result(2, "c1", "too early"),
        assistant(3, "Calling.", [call("c1")]),
        run_status(4),
    ]
    assert project_records(records) == [
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": "Calling.", "tool_calls": [tool_call_msg("call_1")]},
        {"role": "tool", "tool_call_id": "call_1", **UNKNOWN},
    ]


def test_ctx2_parallel_calls_answered_in_part_keep_only_the_answered_ones_while_running() -> None:
    records = [
        user(1, "Check three cities"),
        assistant(2, None, [call("a", "weather", '{"city": "Oslo"}'), call("b", "weather", '{"city": "Rome"}'),
                            call("c", "weather", '{"city": "Lima"}')]),
        result(3, "c", "Lima: 18C", name="weather"),
        result(4, "a", "Oslo: 2C", name="weather"),
    ]
    assert project_records(records) == [
        {"role": "user", "content": "Check three cities"},
        {"role": "assistant", "content": None, "tool_calls": [
            tool_call_msg("call_1", "weather", '{"city": "Oslo"}'),
            tool_call_msg("call_2", "weather", '{"city": "Lima"}')]},
        tool("call_1", "Oslo: 2C"),
        tool("call_2", "Lima: 18C"),
    ]


def test_ctx3_parallel_calls_answered_in_part_get_a_placeholder_once_the_run_ended() -> None:
    records = [
        user(1, "Check two cities"),
        assistant(2, None, [call("a", "weather", '{"city": "Oslo"}'), call("b", "weather", '{"city": "Rome"}')]),
        result(3, "a", "Oslo: 2C", name="weather"),
        run_status(4, status="interrupted"),
    ]
    assert project_records(records)[1:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            tool_call_msg("call_1", "weather", '{"city": "Oslo"}'),
            tool_call_msg("call_2", "weather", '{"city": "Rome"}')]},
        tool("call_1", "Oslo: 2C"),
        {"role": "tool", "tool_call_id": "call_2", **UNKNOWN},
    ]


def test_ctx3_the_interrupted_edit_gets_an_unknown_placeholder_not_an_invented_outcome() -> None:
    """The seed's story: tests answered, the edit never reported back, then Stop."""
    records = [
        user(1, "Run the tests and fix the failure"),
        assistant(2, "Running the tests.", [call("test-1")]),
        assistant(3, "Editing the file.", [call("patch-1", "edit", '{"path": "calc.py"}')]),
        result(4, "test-1", "1 failed: test_add"),
        run_status(5, status="cancelled"),
        user(6, "Continue", run="r2"),
    ]
    assert project_records(records) == [
        {"role": "user", "content": "Run the tests and fix the failure"},
        {"role": "assistant", "content": "Running the tests.", "tool_calls": [tool_call_msg("call_1")]},
        tool("call_1", "1 failed: test_add"),
        {"role": "assistant", "content": "Editing the file.",
         "tool_calls": [tool_call_msg("call_2", "edit", '{"path": "calc.py"}')]},
        {"role": "tool", "tool_call_id": "call_2", **UNKNOWN},
        {"role": "user", "content": "Continue"},
    ]


def test_ctx3_a_later_run_closes_an_earlier_one_even_without_a_status_record() -> None:
    records = [user(1, "Deploy"), assistant(2, None, [call("d1", "deploy")]), user(3, "Status?", run="r2")]
    assert project_records(records)[1:3] == [
        {"role": "assistant", "content": None, "tool_calls": [tool_call_msg("call_1", "deploy")]},
        {"role": "tool", "tool_call_id": "call_1", **UNKNOWN},
    ]


def test_ctx3_open_runs_decides_which_runs_may_still_be_waiting() -> None:
    records = [user(1, "Deploy"), assistant(2, None, [call("d1", "deploy")])]
    assert project_records(records) == [{"role": "user", "content": "Deploy"}]
    assert project_records(records, open_runs=()) == [
        {"role": "user", "content": "Deploy"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call_msg("call_1", "deploy")]},
        {"role": "tool", "tool_call_id": "call_1", **UNKNOWN},
    ]


def test_ctx3_ids_reused_across_runs_pair_with_the_call_of_their_own_run() -> None:
    """r1's call X never got a result; r2 reuses X and gets one. The result is r2's."""
    records = [
        user(1, "First"), assistant(2, None, [call("X", "lookup")]), run_status(3),
        user(4, "Second", run="r2"), assistant(5, None, [call("X", "lookup")], run="r2"),
        result(6, "X", "found", run="r2", name="lookup"), assistant(7, "Found it.", run="r2"),
        user(8, "Thanks", run="r2"),
    ]
    assert project_records(records) == [
        {"role": "user", "content": "First"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call_msg("call_1", "lookup")]},
        {"role": "tool", "tool_call_id": "call_1", **UNKNOWN},
        {"role": "user", "content": "Second"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call_msg("call_2", "lookup")]},
        tool("call_2", "found"),
        {"role": "assistant", "content": "Found it."},
        {"role": "user", "content": "Thanks"},
    ]


def test_ctx4_a_late_result_after_the_next_question_is_kept_and_labelled_where_it_arrived() -> None:
    records = [
        user(1, "Book the flight"),
        assistant(2, None, [call("b1", "book", '{"flight": "LX318"}')]),
        run_status(3, status="interrupted"),
        user(4, "Did it work?", run="r2"),
        result(5, "b1", "booked: PNR 7QX2", name="book"),  # the old run's tool reported late
    ]
    header = LATE_RESULT_HEADER.format(call_id="call_1", name="book", seq=5, status="ok")
    assert project_records(records) == [
        {"role": "user", "content": "Book the flight"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call_msg("call_1", "book", '{"flight": "LX318"}')]},
        {"role": "tool", "tool_call_id": "call_1", **UNKNOWN},
        {"role": "user", "content": "Did it work?"},
        {"role": "user", "content": header + "\nbooked: PNR 7QX2"},
    ]
    assert header.startswith("[late tool result] The result of the earlier call call_1 (book)")


def test_ctx4_a_late_result_does_not_close_the_run_that_is_going_on() -> None:
    records = [
        user(1, "Book"), assistant(2, None, [call("b1", "book")]), run_status(3),
        user(4, "Also check seats", run="r2"), assistant(5, "Checking seats.", [call("s1", "seats")], run="r2"),
        result(6, "b1", "booked", name="book"),  # late, carries r1's id
    ]
    header = LATE_RESULT_HEADER.format(call_id="call_1", name="book", seq=6, status="ok")
    # r2 is still open, so its own unanswered call is pending (left out), not unknown;
    # r1's call, closed without a result, has the placeholder and its late result.
    assert project_records(records) == [
        {"role": "user", "content": "Book"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call_msg("call_1", "book")]},
        {"role": "tool", "tool_call_id": "call_1", **UNKNOWN},
        {"role": "user", "content": "Also check seats"},
        {"role": "assistant", "content": "Checking seats."},
        {"role": "user", "content": header + "\nbooked"},
    ]


def resumed(seq: int, run: str = "r1") -> dict:
    """The record a resumed run writes when it starts again (it reopens the run)."""
    from recordkit import record

    return record(seq, "run_status", {"status": "resumed", "attempt": 1}, run)


def test_run6_a_resumed_run_reads_as_reopened_and_its_rerun_result_is_the_calls_result() -> None:
    records = [
        user(1, "Look up the weather"),
        assistant(2, None, [call("w1", "weather", '{"city": "Oslo"}')]),
        run_status(3, status="interrupted"),
        resumed(4),
        result(5, "w1", "Oslo: 4 °C", name="weather"),  # the idempotent tool, run again
    ]
    projected = project_records(records)
    assert projected == [
        {"role": "user", "content": "Look up the weather"},
        {"role": "assistant", "content": None,
         "tool_calls": [tool_call_msg("call_1", "weather", '{"city": "Oslo"}')]},
        tool("call_1", "Oslo: 4 °C"),
    ]
    assert validate_request(projected) == []


def test_run6_a_resumed_run_says_unknown_once_for_a_call_it_may_not_repeat() -> None:
    records = [
        user(1, "Pay the invoice"),
        assistant(2, None, [call("p1", "pay")]),
        run_status(3, status="interrupted"),
        resumed(4),
        result(5, "p1", "[unknown outcome] It may or may not have taken effect.", name="pay", status="unknown"),
        assistant(6, "I cannot tell whether the payment went through; please check."),
    ]
    projected = project_records(records)
    texts = [str(m.get("content")) for m in projected]
    assert sum("unknown outcome" in t or "may or may not" in t for t in texts) == 1
    assert not any("late tool result" in t for t in texts)
    build_request_body(projected, dialect="openai", model="m", max_output_tokens=64)  # raises when invalid


def test_run9_a_later_question_sees_the_resumed_runs_result_paired_at_its_call() -> None:
    records = [
        user(1, "Look up the weather"),
        assistant(2, None, [call("w1", "weather")]),
        run_status(3, status="interrupted"),
        user(4, "Meanwhile: what is 2+2?", run="r2"),
        assistant(5, "4.", run="r2"),
        run_status(6, run="r2", status="completed"),
        resumed(7),
        result(8, "w1", "Oslo: 4 °C", name="weather"),
        assistant(9, "It is 4 °C in Oslo."),
        run_status(10, status="completed"),
        user(11, "Thanks. And tomorrow?", run="r3"),
    ]
    projected = project_records(records)
    assert projected == [
        {"role": "user", "content": "Look up the weather"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call_msg("call_1", "weather")]},
        tool("call_1", "Oslo: 4 °C"),
        {"role": "user", "content": "Meanwhile: what is 2+2?"},
        {"role": "assistant", "content": "4."},
        {"role": "assistant", "content": "It is 4 °C in Oslo."},
        {"role": "user", "content": "Thanks. And tomorrow?"},
    ]


def test_run6_a_result_for_a_closed_run_that_was_not_resumed_is_still_late() -> None:
    records = [user(1, "Book"), assistant(2, None, [call("b1", "book")]), run_status(3, status="interrupted"),
               result(4, "b1", "booked", name="book")]
    projected = project_records(records)
    assert projected[2] == {"role": "tool", "tool_call_id": "call_1", **UNKNOWN}
    assert projected[3]["content"].startswith("[late tool result]")


def test_ctx5_ids_no_provider_accepts_are_rewritten_and_stay_paired() -> None:
    bad = ["call.1", "ns:call:2", "id with spaces", "x" * 80]
    records = [user(1, "Go"), assistant(2, None, [call(i) for i in bad])]
    records += [result(3 + n, i, f"out {n}") for n, i in enumerate(bad)]
    projected = project_records(records)
    assert projected[1]["tool_calls"] == [tool_call_msg(f"call_{n}") for n in range(1, 5)]
    assert projected[2:] == [tool(f"call_{n + 1}", f"out {n}") for n in range(4)]
    assert records[1]["message"]["tool_calls"][0]["id"] == "call.1"  # records keep originals


def test_ctx5_a_duplicate_id_inside_one_message_comes_out_as_two_distinct_pairs() -> None:
    records = [
        user(1, "Two reads"),
        assistant(2, None, [call("dup", "read", '{"f": "a"}'), call("dup", "read", '{"f": "b"}')]),
        result(3, "dup", "content of a", name="read"),
        result(4, "dup", "content of b", name="read"),
    ]
    assert project_records(records)[1:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            tool_call_msg("call_1", "read", '{"f": "a"}'), tool_call_msg("call_2", "read", '{"f": "b"}')]},
        tool("call_1", "content of a"),
        tool("call_2", "content of b"),
    ]


def test_ctx5_an_id_reused_for_a_later_call_pairs_each_result_with_its_own_call() -> None:
    """The tau-bench quirk: one id, two calls, each answered right away."""
    records = [
        user(1, "Look twice"),
        assistant(2, None, [call("call_HGn16", "get", '{"n": 1}')]), result(3, "call_HGn16", "one", name="get"),
        assistant(4, None, [call("call_HGn16", "get", '{"n": 2}')]), result(5, "call_HGn16", "two", name="get"),
        user(6, "ok"),
    ]
    projected = project_records(records)
    assert [m.get("tool_call_id") or m.get("tool_calls", [{}])[0].get("id") for m in projected[1:5]] == [
        "call_1", "call_1", "call_2", "call_2"]
    assert projected[2]["content"] == "one" and projected[4]["content"] == "two"


def test_ctx6_a_stream_cut_inside_tool_arguments_keeps_the_text_marked_and_drops_the_call() -> None:
    records = [
        user(1, "Edit main.py"),
        assistant(2, "I will change the", [call("e1", "edit", '{"path": "src/ma')], partial=True),
        run_status(3),
    ]
    assert project_records(records) == [
        {"role": "user", "content": "Edit main.py"},
        {"role": "assistant", "content": "I will change the" + INTERRUPTED_SUFFIX},
    ]
    assert INTERRUPTED_SUFFIX == "\n\n[interrupted: this response was cut off before it finished]"


def test_ctx6_the_models_own_invalid_json_arguments_stay_with_their_error_result() -> None:
    records = [
        user(1, "Read it"),
        assistant(2, None, [call("r1", "read", "{path: src/app.py}")]),
        result(3, "r1", "arguments are not valid JSON", status="error", name="read"),
    ]
    assert project_records(records)[1:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            tool_call_msg("call_1", "read", '{"invalid_json_arguments": "{path: src/app.py}"}')]},
        tool("call_1", "[tool status: error]\narguments are not valid JSON"),
    ]


def test_ctx6_a_result_without_a_call_id_is_left_out() -> None:
    records = [user(1, "Go"), assistant(2, None, [call("c1")]), result(3, None, "who am I for?"),
               result(4, "c1", "real")]
    assert project_records(records)[2:] == [tool("call_1", "real")]


def test_ctx6_a_second_result_for_an_answered_call_is_left_out() -> None:
    records = [user(1, "Go"), assistant(2, None, [call("c1")]), result(3, "c1", "first"),
               result(4, "c1", "second"), user(5, "and?")]
    assert project_records(records)[2:] == [tool("call_1", "first"), {"role": "user", "content": "and?"}]


def test_ctx6_complete_calls_of_a_cut_stream_without_results_were_never_run_and_are_dropped() -> None:
    records = [user(1, "Go"), assistant(2, "Starting", [call("c1", "deploy")], partial=True), run_status(3)]
    assert project_records(records)[1:] == [{"role": "assistant", "content": "Starting" + INTERRUPTED_SUFFIX}]


def test_ctx2_every_history_above_passes_validation_in_every_mode_after_a_question() -> None:
    records = [
        user(1, "Go"), assistant(2, "a", [call("x"), call("y")]), result(3, "y", "Y"),
        result(4, "zzz", "orphan"), run_status(5), user(6, "Next", run="r2"),
    ]
    projected = project_records(records)
    for mode in ("openai", "anthropic", "deepseek"):
        assert validate_request(projected, mode) == []


def test_ctx6_arguments_nested_past_the_decoders_depth_are_wrapped_not_a_crash() -> None:
    """A model wrote `{"a": [[[[…` 50,000 deep: json raises RecursionError, not ValueError,
    and the projection of the whole session stopped at every step after it."""
    deep = '{"a": ' + "[" * 50_000
    records = [user(1, "Go"), assistant(2, None, [call("r1", "read", deep)]),
               result(3, "r1", "arguments are not valid JSON", status="error", name="read")]
    out = project_records(records)
    sent = out[1]["tool_calls"][0]["function"]["arguments"]
    assert sent.startswith('{"invalid_json_arguments": "{\\"a\\": [[[')
    assert validate_request(out) == []
    assert validate_request([{"role": "user", "content": "Go"},
                             {"role": "assistant", "content": None, "tool_calls": [tool_call_msg("c1", "read", deep)]},
                             {"role": "tool", "tool_call_id": "c1", "content": "x"}])[0].rule == "call-arguments"
