"""The decision after the answer (context.after_answer): LOOP-1, LOOP-7, LOOP-10, RUN-5,
CTX-6, CAT-12 — literal answers in, the exact decision out, and the rules that hold for
every answer (Hypothesis)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from context.after_answer import (
    Answer,
    AskAgain,
    Cut,
    CutReason,
    FailedEmpty,
    Finish,
    RunTools,
    TakeSupplement,
    Wait,
    after_answer,
)


@dataclass(frozen=True)
class Call:
    """A tool call as the decision sees it: a name to tell calls apart, and whether its
    arguments arrived whole."""

    name: str
    complete: bool = True


WEATHER = Call("weather")
HALF = Call("half_written", complete=False)


def decide(answer: Answer[Call], *, main: bool = True, supplement: bool = False,
           asked_again: bool = False, waiting: frozenset[int] = frozenset()) -> object:
    return after_answer(answer, main=main, supplement_waiting=supplement, asked_again=asked_again, waiting=waiting)


CASES = [
    # (what happened, answer, main, supplement waiting, asked again, decision)
    ("a plain answer finishes", Answer(text="Paris.", finish_reason="stop"), True, False, False, Finish()),
    ("a sub-agent's plain answer finishes", Answer(text="Done.", finish_reason="stop"), False, False, False,
     Finish()),
    ("complete calls run", Answer(text="", calls=(WEATHER,), finish_reason="tool_calls"), True, False, False,
     RunTools((WEATHER,))),
    ("only the complete calls run (CTX-6)", Answer(calls=(HALF, WEATHER), finish_reason="tool_calls"),
     True, False, False, RunTools((WEATHER,))),
    ("calls run before a waiting supplement is taken (RUN-5)", Answer(calls=(WEATHER,), finish_reason="tool_calls"),
     True, True, False, RunTools((WEATHER,))),
    ("complete calls of an answer the output limit stopped still run",
     Answer(text="Let me look.", calls=(WEATHER,), finish_reason="length"), True, False, False, RunTools((WEATHER,))),
    ("Stop mid-stream cuts, dropping even complete calls (LOOP-7)",
     Answer(text="Let me", calls=(WEATHER,), finish_reason="cancelled", cut=True), True, False, False,
     Cut(CutReason.STOPPED)),
    ("Stop while waiting for the server cuts an answer with nothing in it",
     Answer(text="", finish_reason="cancelled", cut=True), True, True, True, Cut(CutReason.STOPPED)),
    ("the main line takes a supplement that arrived while it answered",
     Answer(text="Paris.", finish_reason="stop"), True, True, False, TakeSupplement()),
    ("a sub-agent never takes the run's supplement", Answer(text="Done.", finish_reason="stop"), False, True, False,
     Finish()),
    ("a supplement is taken before an empty answer is asked again",
     Answer(text="", finish_reason="stop"), True, True, False, TakeSupplement()),
    ("an empty answer is asked again (LOOP-10)", Answer(text="", finish_reason="stop"), True, False, False,
     AskAgain()),
    ("whitespace is an empty answer", Answer(text=" \n\t", finish_reason="stop"), True, False, False, AskAgain()),
    ("only half-written calls is an empty answer", Answer(calls=(HALF,), finish_reason="stop"), True, False, False,
     AskAgain()),
    ("a second empty answer in a row fails", Answer(text="", finish_reason="stop"), True, False, True, FailedEmpty()),
    ("a sub-agent's second empty answer fails its delegation", Answer(text=""), False, True, True, FailedEmpty()),
    ("an answer the output limit stopped is cut, not empty (CAT-12)", Answer(text="", finish_reason="length"),
     True, False, True, Cut(CutReason.OUTPUT_LIMIT)),
    ("a long answer the output limit stopped is cut (CAT-12)", Answer(text="Once upon", finish_reason="length"),
     True, False, False, Cut(CutReason.OUTPUT_LIMIT)),
    ("an answer without a finish reason that is not cut finishes", Answer(text="Paris."), True, False, False,
     Finish()),
]


@pytest.mark.parametrize(("answer", "main", "supplement", "asked_again", "expected"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_it_decides_each_answer(answer: Answer[Call], main: bool, supplement: bool, asked_again: bool,
                                expected: object) -> None:
    assert decide(answer, main=main, supplement=supplement, asked_again=asked_again) == expected


def test_the_reasons_are_stable_slugs() -> None:
    assert [str(reason) for reason in CutReason] == ["stopped", "output_limit"]


def test_an_empty_answer_is_neither_stopped_nor_limited() -> None:
    assert Answer[Call](text="").empty
    assert not Answer[Call](text="", cut=True).empty
    assert not Answer[Call](text="", finish_reason="cancelled").empty
    assert not Answer[Call](text="", finish_reason="length").empty
    assert not Answer(calls=(WEATHER,)).empty
    assert Answer(calls=(HALF,)).empty


calls = st.lists(st.builds(Call, name=st.sampled_from(["weather", "delegate", "clock"]), complete=st.booleans()),
                 max_size=4).map(tuple)
answers = st.builds(Answer, text=st.sampled_from(["", " ", "Paris.", "Let me look"]), calls=calls,
                    finish_reason=st.sampled_from([None, "stop", "tool_calls", "length", "cancelled"]),
                    cut=st.booleans())
flags = st.fixed_dictionaries({"main": st.booleans(), "supplement": st.booleans(), "asked_again": st.booleans()})


@given(answer=answers, situation=flags)
def test_tool_calls_are_never_dropped_unless_the_answer_was_cut(answer: Answer[Call],
                                                                 situation: dict[str, bool]) -> None:
    decision = decide(answer, **situation)
    complete = tuple(call for call in answer.calls if call.complete)
    if answer.cut:
        assert decision == Cut(CutReason.STOPPED)
    elif complete:
        assert decision == RunTools(complete)  # every complete call, in the order the model wrote them
    else:
        assert not isinstance(decision, RunTools)


@given(answer=answers, situation=flags)
def test_an_empty_answer_never_finishes_and_fails_only_once_asked_again(answer: Answer[Call],
                                                                       situation: dict[str, bool]) -> None:
    decision = decide(answer, **situation)
    if answer.empty:
        assert isinstance(decision, TakeSupplement | AskAgain | FailedEmpty)
    if isinstance(decision, AskAgain | FailedEmpty):
        assert answer.empty
        assert isinstance(decision, FailedEmpty) == situation["asked_again"]


@given(answer=answers, situation=flags)
def test_only_the_main_line_takes_supplements_and_only_when_one_waits(answer: Answer[Call],
                                                                      situation: dict[str, bool]) -> None:
    if isinstance(decide(answer, **situation), TakeSupplement):
        assert situation["main"] and situation["supplement"]


@given(answer=answers, situation=flags, waiting=st.frozensets(st.integers(min_value=-1, max_value=4), max_size=3))
def test_only_the_main_line_waits_and_only_for_calls_it_will_run(answer: Answer[Call], situation: dict[str, bool],
                                                                 waiting: frozenset[int]) -> None:
    """TOOL-8: a Wait holds every runnable call (none dropped) and names only real positions;
    without a call that asks, or on a sub-agent's line, or after a Stop, nothing waits."""
    decision = decide(answer, **situation, waiting=waiting)
    real = {index for index in waiting if 0 <= index < len(answer.runnable)}
    if isinstance(decision, Wait):
        assert situation["main"] and not answer.cut and real
        assert decision.calls == answer.runnable and decision.waiting == real
    elif situation["main"] and not answer.cut and real:
        raise AssertionError(f"calls at {sorted(real)} ask first, yet the decision was {decision!r}")
    if not waiting:
        assert decision == decide(answer, **situation)  # the rules without approvals are untouched
