"""The context meter's reading (runloop/meter.py, web/presenters.py): the figure is the
next request's size, which may pass the trigger, or the maximum one request may hold,
before that request is summarized (an answer adds up to the output reserve, the browser
adds the question being sent). The bar never reads above its maximum, and the words say
what happens next instead of "3,857 of 3,456".
"""
from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runloop.meter import meter_shown
from sessions.models import RunEvent
from tests.runloop.test_prepared_compaction import ASKED, LONG, SMALL, SlowSummaries, ask, preparations
from web.presenters import PAST_TRIGGER_WORDS, meter_label

__all__ = ["preparations"]  # the fixture, used by name
figures = st.integers(min_value=0, max_value=2_000_000)


@st.composite
def meters(draw):
    maximum = draw(st.integers(min_value=1, max_value=1_000_000))
    trigger = draw(st.one_of(st.none(), st.integers(min_value=1, max_value=maximum)))
    return {"tokens": draw(figures), "effective_input_tokens": maximum, "trigger_tokens": trigger,
            "target_tokens": None if trigger is None else trigger // 2,
            "measured_by": draw(st.sampled_from(["provider", "estimate", None])),
            "failed_request": draw(st.booleans())}


@given(meters())
def test_the_bar_never_reads_above_its_maximum_and_keeps_every_figure_below_it(meter):
    shown = meter_shown(meter["tokens"], meter["effective_input_tokens"], meter["trigger_tokens"])
    assert 0 <= shown.value <= shown.maximum == meter["effective_input_tokens"]
    assert shown.past_maximum == (meter["tokens"] > shown.maximum)
    if not shown.past_maximum:
        assert shown.value == meter["tokens"]
    trigger = meter["trigger_tokens"]
    assert shown.past_trigger == (trigger is not None and meter["tokens"] >= trigger)


@given(meters())
def test_the_words_never_read_a_figure_above_its_maximum_and_say_what_happens_past_the_trigger(meter):
    label = meter_label(meter)
    counted = re.match(r"(?:about )?([\d,]+) of ([\d,]+) tokens", label)
    if counted:
        assert int(counted[1].replace(",", "")) <= int(counted[2].replace(",", ""))
    else:
        assert f"more than the {meter['effective_input_tokens']:,} one request may hold" in label
    past = meter["trigger_tokens"] is not None and meter["tokens"] >= meter["trigger_tokens"]
    assert (PAST_TRIGGER_WORDS in label) == (past and not meter["failed_request"])


def test_the_figures_of_the_issue_read_as_what_will_happen():
    # After an answer the next request held 3,857 tokens, 3,456 being the most one may hold.
    meter = {"tokens": 3_857, "effective_input_tokens": 3_456, "trigger_tokens": 2_764, "target_tokens": 2_073,
             "measured_by": "estimate"}
    assert meter_shown(3_857, 3_456, 2_764).value == 3_456
    assert meter_label(meter) == ("about 3,857 tokens, more than the 3,456 one request may hold · summarized at "
                                  "2,764 · earlier messages will be summarized before the next answer")


@pytest.mark.django_db(transaction=True)
def test_a_figure_past_the_trigger_is_summarized_before_the_next_answer(fake_session, strict, preparations):
    """What the words promise, on the loop: the figure after an answer may be past the
    trigger (nothing judges it until the next request), and that request is compacted
    before the model answers it."""
    strict.handler = SlowSummaries()
    session = fake_session(**SMALL)
    for number in range(1, 20):
        run = ask(session, f"{ASKED} {number}. {LONG * (1 + number % 3)}")
        preparations.wait()
        measured = RunEvent.objects.filter(run=run, type="context_measured").order_by("-seq").first().payload
        if measured["tokens"] >= measured["trigger_tokens"]:
            break
    else:
        pytest.fail("no answer left the next request past the trigger")
    assert PAST_TRIGGER_WORDS in meter_label(measured)
    after = ask(session, f"{ASKED} {number + 1}. Short one.")
    types = list(RunEvent.objects.filter(run=after).order_by("seq").values_list("type", flat=True))
    assert "compacted" in types and types.index("compacted") < types.index("message_delta")
