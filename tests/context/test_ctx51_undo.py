"""CTX-51 in the pure engine: which starting point an undo puts back, that what it appends
never reaches the model, and the hold it leaves on the triggers (literal cases, then
properties over any history)."""
from __future__ import annotations

from typing import Any

from histories import build, histories
from hypothesis import given
from hypothesis import strategies as st

from context import Budget, project_records, throttled
from context.undo import (
    ALREADY_UNDONE,
    NOTHING_TO_UNDO,
    UNDONE,
    Base,
    Checkpoint,
    undo_decision,
    undo_hold_unpinned,
    undo_holds,
)

BUDGET = Budget(context_window=10_000, max_output_tokens=1_000, safety_margin_tokens=0)  # fits up to 9,000
SUMMARY = [{"role": "user", "content": "summary"}]


def test_ctx51_there_is_nothing_to_undo_before_a_compaction():
    assert undo_decision([], Base()).reason == NOTHING_TO_UNDO


def test_ctx51_undoing_the_first_compaction_returns_to_where_the_instance_started():
    view = Base(watermark=4, messages=[{"role": "user", "content": "older summary"}], estimator_id="bytes-v1")
    decision = undo_decision([Checkpoint(revision=1, covered_seq=9, messages=SUMMARY)], view)
    assert decision.allowed and decision.undone == 1 and decision.restored == view


def test_ctx51_undoing_a_later_compaction_returns_to_the_checkpoint_before_it_and_never_twice():
    first = Checkpoint(revision=1, covered_seq=9, messages=SUMMARY, traces=[[[1, 9]]], estimator_id="e1")
    second = Checkpoint(revision=2, covered_seq=15, messages=[{"role": "user", "content": "newer"}])
    decision = undo_decision([second, first], Base())  # any order in, by revision
    assert decision.undone == 2
    assert decision.restored == Base(watermark=9, messages=SUMMARY, traces=[[[1, 9]]], estimator_id="e1")
    undo = Checkpoint(revision=3, covered_seq=9, messages=SUMMARY, undoes=2)
    assert undo_decision([first, second, undo], Base()).reason == ALREADY_UNDONE


def test_ctx51_the_hold_waits_for_a_tenth_of_growth_and_time_never_lifts_it():
    hold = {"reason": UNDONE, "tokens": 5_000, "at": 0.0}
    assert throttled(hold, 5_499, BUDGET, now=10**9)  # days later, still held
    assert not throttled(hold, 5_500, BUDGET, now=1.0)  # grown by a tenth: the trigger may fire
    assert not throttled({**hold, "tokens": 8_500}, 9_001, BUDGET, now=1.0)  # over the hard limit: never held


def test_ctx51_an_unpinned_hold_waits_until_the_next_step_measures_the_view():
    hold = {"reason": UNDONE, "tokens": 0, "at": 0.0}
    assert undo_hold_unpinned(hold) and not undo_hold_unpinned({**hold, "tokens": 10})
    assert not undo_hold_unpinned({"reason": "summary_failed", "tokens": 0, "at": 0.0}) and not undo_hold_unpinned(None)
    assert undo_holds(hold, 8_999, growth=0.1, fits=True) and not undo_holds(hold, 9_001, growth=0.1, fits=False)
    # A failure's back-off is unchanged: ten minutes lift it.
    assert not throttled({"reason": "summary_failed", "tokens": 5_000, "at": 0.0}, 5_000, BUDGET, now=600.0)


def _records(count: int) -> list[dict[str, Any]]:
    records = []
    for seq in range(1, count + 1):
        role = "user" if seq % 2 else "assistant"
        records.append({"seq": seq, "run": f"r{(seq + 1) // 4}", "instance": "main",
                        "kind": "user" if role == "user" else "assistant",
                        "message": {"role": role, "content": f"{role} {seq}"}})
    return records


def _view(records: list[dict[str, Any]], start: Base) -> list[dict[str, Any]]:
    if start.messages is None:
        return project_records(records)
    return project_records(records, start_view=start.messages, start_watermark=start.watermark)


@given(ops=st.lists(st.tuples(st.sampled_from(("compact", "compact", "undo")), st.integers(1, 30)), max_size=14),
       base_at=st.integers(0, 6))
def test_ctx51_for_any_chain_of_compactions_and_undos_an_undo_restores_the_exact_prior_view(ops, base_at):
    """Whatever was compacted and undone before, the view after an undo is, message for
    message, the one the instance had just before the undone compaction was committed."""
    records = _records(30)
    base = Base() if base_at == 0 else Base(watermark=base_at, messages=project_records(records[:base_at]))
    checkpoints: list[Checkpoint] = []
    replaced: dict[int, list[dict[str, Any]]] = {}  # revision -> the view it replaced
    current = base
    for op, at in ops:
        if op == "compact":
            revision = len(checkpoints) + 1
            replaced[revision] = _view(records, current)
            checkpoint = Checkpoint(revision=revision, covered_seq=max(at, current.watermark),
                                    messages=[{"role": "user", "content": f"summary {revision}"}])
            checkpoints.append(checkpoint)
            current = Base(watermark=checkpoint.covered_seq, messages=checkpoint.messages)
            continue
        decision = undo_decision(checkpoints, base)
        if not checkpoints:
            assert decision.reason == NOTHING_TO_UNDO
        elif checkpoints[-1].undoes is not None:
            assert decision.reason == ALREADY_UNDONE
        else:
            restored = decision.restored
            assert restored is not None and decision.undone == checkpoints[-1].revision
            assert _view(records, restored) == replaced[decision.undone]
            # Saved as the service saves it: a records start as no messages at watermark 0.
            checkpoints.append(Checkpoint(revision=len(checkpoints) + 1, covered_seq=restored.watermark,
                                          messages=list(restored.messages or []), undoes=decision.undone))
            current = Base(watermark=restored.watermark, messages=list(restored.messages or []))


@given(events=histories(), inserted=st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(
    ("compaction_undone", "compaction_summary")), st.integers(0, 10**6)), max_size=6))
def test_ctx51_what_an_undo_appends_never_changes_what_the_model_reads(events, inserted):
    """The undo's record (and the summary record it marks) belongs to an earlier run and may
    sit anywhere after it: for any history, the projection is the same with or without them —
    the reason the request after an undo differs by the new question only."""
    history = build(events)
    records = [{**record, "seq": record["seq"] * 10} for record in history.records]
    runs = [record["run"] for record in records]
    extra = []
    for n, (position, kind, pick) in enumerate(inserted):
        at = position % (len(records) + 1)
        seen = runs[:at] or ["r1"]
        extra.append((at, {"seq": (records[at - 1]["seq"] if at else 0) + 1 + n, "run": seen[pick % len(seen)],
                           "instance": "main", "kind": kind,
                           "message": {"META": "undone by the creator", "undone_revision": 1, "summary_seq": 3}}))
    mixed = list(records)
    for at, record in sorted(extra, key=lambda item: (item[0], item[1]["seq"]), reverse=True):
        mixed.insert(at, record)
    mixed.sort(key=lambda record: record["seq"])
    repairs_plain: list[dict[str, Any]] = []
    repairs_mixed: list[dict[str, Any]] = []
    plain = project_records(records, repairs_out=repairs_plain)
    assert project_records(mixed, repairs_out=repairs_mixed) == plain
    assert repairs_mixed == repairs_plain
    assert "undone by the creator" not in str(plain)
