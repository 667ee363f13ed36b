"""A run that failed, was resumed and then answered: its old error reads as settled."""
from __future__ import annotations

from types import SimpleNamespace

from web.transcript import Answer, Bubble, ErrorBox, Notice, items_from_records

FAILED = {"status": "failed", "error": {"code": "provider_unavailable", "message": "HTTP 503"}}


def rec(kind: str, **message) -> SimpleNamespace:
    return SimpleNamespace(kind=kind, message=message, seq=0)


def test_an_error_resumed_into_an_answer_is_resolved_and_says_resumed_once():
    items = items_from_records([
        rec("user", role="user", content="Hello?"),
        rec("run_status", **FAILED),
        rec("run_status", status="resumed"),
        rec("assistant", role="assistant", content="Hi."),
        rec("run_status", status="completed"),
    ])
    assert [type(item) for item in items] == [Bubble, ErrorBox, Answer]
    assert items[1].resolved is True


def test_two_failures_before_the_answer_are_both_resolved():
    items = items_from_records([
        rec("user", role="user", content="Hello?"),
        rec("run_status", **FAILED), rec("run_status", status="resumed"),
        rec("run_status", **FAILED), rec("run_status", status="resumed"),
        rec("assistant", role="assistant", content="Hi."),
        rec("run_status", status="completed"),
    ])
    assert [item.resolved for item in items if isinstance(item, ErrorBox)] == [True, True]
    assert not any(isinstance(item, Notice) for item in items)


def test_an_error_still_standing_is_not_resolved():
    resumed_then_failed = items_from_records([
        rec("user", role="user", content="Hello?"),
        rec("run_status", **FAILED), rec("run_status", status="resumed"), rec("run_status", **FAILED),
    ])
    assert [item.resolved for item in resumed_then_failed if isinstance(item, ErrorBox)] == [False, False]
    assert [item.text for item in resumed_then_failed if isinstance(item, Notice)] == ["Resumed."]
    resumed_then_stopped = items_from_records([
        rec("user", role="user", content="Hello?"),
        rec("run_status", **FAILED), rec("run_status", status="resumed"), rec("run_status", status="cancelled"),
    ])
    assert [item.resolved for item in resumed_then_stopped if isinstance(item, ErrorBox)] == [False]
