"""CAT-9, RUN-4 amended: a window the server proved applies to a frozen budget -- only ever
lowering it -- with the margin and output reserve that were not set by an admin following it."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context import (
    Budget,
    Calibration,
    PolicyError,
    budget_under_window,
    default_safety_margin,
    prompt_truncated,
    truncation_confirmed,
)
from context.policy import SAFETY_MARGIN_FLOOR


@st.composite
def budgets(draw: st.DrawFn) -> Budget:
    window = draw(st.integers(min_value=64, max_value=2_000_000))
    output = draw(st.integers(min_value=1, max_value=window - 1))
    margin = draw(st.integers(min_value=0, max_value=window - output - 1))
    return Budget(context_window=window, max_output_tokens=output, safety_margin_tokens=margin)


@settings(max_examples=500, deadline=None)
@given(budget=budgets(), window=st.integers(min_value=1, max_value=4_000_000),
       margin_set=st.booleans(), output_set=st.booleans())
def test_cat9_a_learned_window_only_ever_lowers_a_frozen_budget(budget, window, margin_set, output_set):
    try:
        lowered = budget_under_window(budget, window, margin_set=margin_set, output_set=output_set)
    except PolicyError:  # only figures an admin set, or a window under the margin's floor, leave no input
        assert margin_set or output_set or window < 2 * SAFETY_MARGIN_FLOOR
        return
    assert lowered.context_window == min(budget.context_window, window)
    assert lowered.max_output_tokens <= budget.max_output_tokens
    assert lowered.safety_margin_tokens <= budget.safety_margin_tokens
    if window >= budget.context_window:  # a larger window needs a new version
        assert lowered == budget
    if margin_set:
        assert lowered.safety_margin_tokens == budget.safety_margin_tokens
    if output_set:
        assert lowered.max_output_tokens == budget.max_output_tokens


@settings(max_examples=300, deadline=None)
@given(frozen_window=st.integers(min_value=4_096, max_value=1_000_000), window=st.integers(min_value=512,
                                                                                          max_value=1_000_000))
def test_cat9_figures_nobody_set_follow_the_proven_window_and_leave_it_most_of_its_input(frozen_window, window):
    """The issue's 768 tokens of input: a 32k default's margin (1,024) and output (4,096)
    kept under a 2,048 window. Unset figures follow the window instead."""
    frozen = Budget(context_window=frozen_window, max_output_tokens=min(4_096, frozen_window // 2),
                    safety_margin_tokens=default_safety_margin(frozen_window))
    lowered = budget_under_window(frozen, window, margin_set=False, output_set=False)
    if window < frozen_window:
        assert lowered.safety_margin_tokens == min(frozen.safety_margin_tokens, default_safety_margin(window))
        assert lowered.effective_input >= 0.6 * lowered.context_window


def test_cat9_the_issues_2048_server_behind_the_platform_default():
    lowered = budget_under_window(Budget.platform_default(), 2_048, margin_set=False, output_set=False)
    assert (lowered.context_window, lowered.max_output_tokens, lowered.safety_margin_tokens) == (2_048, 512, 64)
    assert lowered.effective_input == 1_472  # was 2,048 - 4,096 - 1,024: no budget at all


def test_cat9_an_admins_figures_are_kept_and_said_not_to_fit():
    with pytest.raises(PolicyError):
        budget_under_window(Budget(32_768, 1_024, 1_100), 2_048, margin_set=True, output_set=True)


# CAT-10: a prompt the server cut, read from its own count.
def test_cat10_a_count_at_the_servers_context_size_is_a_cut_prompt():
    assert prompt_truncated(estimate=5_000, counted=2_048, calibration=Calibration(prior=1.3), exact=False,
                            server_window=2_048)


def test_cat10_a_count_more_than_a_tenth_under_the_expected_count_is_a_cut_prompt():
    exact = {"calibration": Calibration(), "exact": True, "server_window": 32_768}
    assert prompt_truncated(estimate=3_000, counted=2_048, **exact)
    assert not prompt_truncated(estimate=2_200, counted=2_048, **exact)  # within a tenth: a tokenizer's error
    # A proxy's estimate is read through what the model's real counts showed of it.
    learned = Calibration(prior=1.3, ratios=(0.8, 0.82))
    assert not prompt_truncated(estimate=3_000, counted=2_400, calibration=learned, exact=False,
                                server_window=32_768)
    assert prompt_truncated(estimate=3_000, counted=2_048, calibration=learned, exact=False, server_window=32_768)


def test_cat10_before_any_real_count_a_proxys_estimate_is_no_evidence():
    """A byte count is about four times a real one: without a real count to read it by,
    a low count says nothing."""
    assert not prompt_truncated(estimate=8_000, counted=2_048, calibration=Calibration(prior=0.4), exact=False,
                                server_window=None)


@pytest.mark.parametrize("counted", [None, 0, True, "2048"])
def test_cat10_no_usable_count_is_no_cut(counted):
    assert not prompt_truncated(estimate=8_000, counted=counted, calibration=Calibration(), exact=True,
                                server_window=2_048)


def test_cat10_an_under_count_is_a_cut_only_at_the_top_of_the_servers_earlier_counts():
    """A proxy's ratio moves with the text: after a compaction the summary counted 683
    where 933 was counted before, 13% under the ratio learned from the conversation; a
    log of digits counts 40% under prose. A server that truncates caps every count at its
    window: a count under an earlier one is the estimate's error."""
    assert truncation_confirmed(counted=2_048, largest_earlier=1_904, exact=True)
    assert not truncation_confirmed(counted=683, largest_earlier=933, exact=True)
    assert not truncation_confirmed(counted=2_048, largest_earlier=None, exact=True)
    # With a proxy, only the cap met again: the second cut answer of the conversation.
    assert not truncation_confirmed(counted=2_048, largest_earlier=1_904, exact=False)
    assert truncation_confirmed(counted=2_048, largest_earlier=2_048, exact=False)
