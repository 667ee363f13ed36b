"""What the projector reports it changed to make a request valid (the inspector's list).

Each repair names its kind, why, the record it came from and the position in the
output, and asking for them never changes the output.
"""

from __future__ import annotations

from histories import build, histories
from hypothesis import given, settings
from recordkit import assistant, call, image, result, run_status, text, user

from context import project_records


def repairs_of(records: list[dict], **kwargs) -> tuple[list[dict], list[dict]]:
    repairs: list[dict] = []
    out = project_records(records, repairs_out=repairs, **kwargs)
    return out, repairs


def test_ctx3_an_unanswered_call_of_an_ended_run_is_reported_at_its_placeholder() -> None:
    records = [user(1, "Deploy"), assistant(2, None, [call("d1", "deploy")]), run_status(3)]
    out, repairs = repairs_of(records)
    assert [(r["kind"], r["seq"], r["position"]) for r in repairs] == [("unknown_outcome", 2, 2)]
    assert out[repairs[0]["position"]]["role"] == "tool"
    assert "deploy" in repairs[0]["reason"] and "CTX-3" in repairs[0]["reason"]


def test_ctx2_a_call_without_result_in_a_running_run_is_reported_dropped() -> None:
    records = [user(1, "Go"), assistant(2, "Looking.", [call("c1", "search")])]
    _, repairs = repairs_of(records)
    assert [(r["kind"], r["call_id"]) for r in repairs] == [("call_dropped", "c1")]


def test_ctx6_a_cut_stream_reports_both_the_marked_text_and_the_dropped_call() -> None:
    records = [user(1, "Edit"), assistant(2, "I will", [call("e1", "edit", '{"pa')], partial=True), run_status(3)]
    _, repairs = repairs_of(records)
    assert sorted(r["kind"] for r in repairs) == ["call_dropped", "interrupted_text"]


def test_ctx6_wrapped_arguments_and_orphan_results_are_reported() -> None:
    records = [user(1, "Read"), assistant(2, None, [call("r1", "read", "{path: x}")]),
               result(3, "r1", "bad", status="error", name="read"), result(4, "nobody", "stray")]
    _, repairs = repairs_of(records)
    assert [(r["kind"], r["seq"]) for r in repairs] == [("arguments_wrapped", 2), ("orphan_result_dropped", 4)]


def test_ctx5_only_ids_a_provider_would_refuse_or_confuse_are_reported() -> None:
    records = [user(1, "Go"),
               assistant(2, None, [call("call_ok"), call("toolu:01/x")]), result(3, "call_ok"), result(4, "toolu:01/x"),
               assistant(5, None, [call("call_ok")]), result(6, "call_ok"), assistant(7, "done")]
    _, repairs = repairs_of(records)
    assert [(r["kind"], r["call_id"]) for r in repairs] == [("id_rewritten", "call_2"), ("id_rewritten", "call_3")]


def test_ctx4_a_late_result_is_reported_where_it_arrived() -> None:
    records = [user(1, "Build"), assistant(2, None, [call("b1", "build")]), run_status(3),
               user(4, "Any news?", run="r2"), result(5, "b1", "built", run="r1")]
    out, repairs = repairs_of(records)
    late = [r for r in repairs if r["kind"] == "late_result"]
    assert [(r["seq"], out[r["position"]]["role"]) for r in late] == [(5, "user")]


def test_ctx7_a_long_result_is_reported_truncated_with_the_limit() -> None:
    records = [user(1, "Cat"), assistant(2, None, [call("c1", "cat")]), result(3, "c1", "x" * 5000, name="cat")]
    _, repairs = repairs_of(records, tool_result_limit=1000)
    assert [(r["kind"], r["seq"], r["position"]) for r in repairs] == [("truncated", 3, 2)]
    assert "1,000" in repairs[0]["reason"]


def test_ctx8_older_screenshots_are_reported_trimmed() -> None:
    shot = [text("screen"), image()]
    records = [user(1, "Click"),
               assistant(2, None, [call("s1", "browser_use")]), result(3, "s1", shot, name="browser_use"),
               assistant(4, None, [call("s2", "browser_use")]), result(5, "s2", shot, name="browser_use")]
    _, repairs = repairs_of(records)
    assert [(r["kind"], r["position"]) for r in repairs] == [("screenshot_trimmed", 2)]


@settings(max_examples=150, deadline=None)
@given(events=histories())
def test_asking_for_repairs_never_changes_the_output(events: list) -> None:
    records = build(events).records
    out, repairs = repairs_of(records)
    assert out == project_records(records)
    assert all(0 <= r["position"] <= len(out) for r in repairs)
