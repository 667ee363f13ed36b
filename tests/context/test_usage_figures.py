"""A provider's usage in four figures — uncached input, cache read, cache written, output —
whatever the provider's terms, and their cost at per-million prices (SPEC §10)."""
from __future__ import annotations

from decimal import Decimal

import pytest

from context.usage import MAX_COUNT, TokenPrices, UsageFigures, usage_cost, usage_figures


def test_openai_usage_splits_the_prompt_into_cached_and_uncached_input():
    usage = {"prompt_tokens": 2_006, "completion_tokens": 300, "total_tokens": 2_306,
             "prompt_tokens_details": {"cached_tokens": 1_920, "audio_tokens": 0},
             "completion_tokens_details": {"reasoning_tokens": 64}}
    assert usage_figures(usage) == UsageFigures(input_uncached=86, cache_read=1_920, cache_written=0, output=300,
                                                reported=True)


def test_anthropic_usage_as_the_client_stores_it_reads_the_same_from_either_set_of_names():
    # The Anthropic client keeps the provider's figures and adds the OpenAI-style totals.
    native = {"input_tokens": 40, "cache_read_input_tokens": 2_000, "cache_creation_input_tokens": 300,
              "output_tokens": 120}
    stored = {**native, "prompt_tokens": 2_340, "completion_tokens": 120, "total_tokens": 2_460,
              "prompt_tokens_details": {"cached_tokens": 2_000}}
    expected = UsageFigures(input_uncached=40, cache_read=2_000, cache_written=300, output=120, reported=True)
    assert usage_figures(stored) == expected
    assert usage_figures(native) == expected
    assert expected.input_total == 2_340 and expected.cache_read_share == pytest.approx(2_000 / 2_340)


def test_deepseek_names_its_cached_input_prompt_cache_hit_tokens():
    usage = {"prompt_tokens": 1_000, "completion_tokens": 10, "prompt_cache_hit_tokens": 768,
             "prompt_cache_miss_tokens": 232}
    assert usage_figures(usage) == UsageFigures(input_uncached=232, cache_read=768, output=10, reported=True)


@pytest.mark.parametrize("usage", [None, {}, "12 tokens", {"prompt_tokens": "12"}, {"prompt_tokens": 1.5},
                                   {"prompt_tokens": True}, {"prompt_tokens": -3}, {"prompt_tokens": MAX_COUNT + 1}])
def test_a_missing_or_malformed_usage_counts_nothing_and_says_so(usage):
    figures = usage_figures(usage)
    assert figures == UsageFigures() and not figures.reported and figures.cache_read_share is None


def test_a_cache_figure_larger_than_the_prompt_never_makes_the_uncached_input_negative():
    figures = usage_figures({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 50}})
    assert (figures.input_uncached, figures.cache_read) == (0, 50)


def test_figures_add_up():
    a = UsageFigures(input_uncached=1, cache_read=2, cache_written=3, output=4, reported=True)
    assert a + UsageFigures() == a and (a + a).output == 8


def test_the_cost_uses_the_cached_and_write_prices_and_falls_back_to_the_input_price():
    figures = UsageFigures(input_uncached=1_000_000, cache_read=2_000_000, cache_written=500_000, output=100_000,
                           reported=True)
    claude = TokenPrices(input=Decimal("3"), cached_input=Decimal("0.30"), cache_write=Decimal("3.75"),
                         output=Decimal("15"))
    assert usage_cost(figures, claude) == Decimal("3") + Decimal("0.60") + Decimal("1.875") + Decimal("1.5")
    plain = TokenPrices(input=Decimal("0.5"), output=Decimal("1"))
    assert usage_cost(figures, plain) == Decimal("0.5") * Decimal("3.5") + Decimal("0.1")
    assert usage_cost(UsageFigures(), plain) == 0
