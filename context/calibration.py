"""CTX-25: one calibrated figure for every decision.

An estimator counts with its own tokenizer; the provider counts with the model's. After a
call, the provider's ``usage`` says how many tokens the request really was, and the ratio
(provider count / our estimate) corrects every later figure of the same model: the
compaction trigger, the commit rule and segment budgets, and the hard limit of action,
summary and verification calls all read ``calibrated(estimate, ratio)``.

The ratio is the **largest** of the most recent samples, so a calibrated figure is never
below what the provider counted for any of those requests. Before the first sample the
ratio is a *prior*, the one each estimator's error measurement justifies: 1.0 when the
estimator is the model's own tokenizer; a safety factor above 1 for the o200k proxy
(``PROXY_PRIOR``), so a model whose tokenizer is unknown is not under-counted while
nothing is known yet; and a factor below 1 for ``bytes-v1`` (``BYTES_PRIOR``), which
counts about four times what any real tokenizer does — left at 1.0 it refused a
6,000-character question to a 4,000-token model before any provider could count it.
A prior that under-counts a request the server then refuses is learned from (CAT-3: the
refusal's count becomes a sample and the window is lowered), never sent again as it was.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from context.estimators import BYTES_V1, Estimator

RECENT_SAMPLES = 5
# Until a provider has counted, a proxy tokenizer's figure is multiplied by this. Chosen
# by measurement (benchmarks/estimation.py, docs/context-engine.md "Calibration").
PROXY_PRIOR = 1.3
# And a byte count's by this. Measured the same way: over the corpus's 3,279 requests the
# real count of the six tokenizers measured is at most 0.35 of bytes-v1 (Mistral's
# SentencePiece; 0.27-0.32 for the others), so 0.40 stays above every one of them with a
# tenth to spare. Machine-made text (digit strings, hex) can reach 0.99 of the bytes with
# a tokenizer that splits digits; such a first request may be refused, and that refusal
# teaches the ratio (docs/context-engine.md "Calibration").
BYTES_PRIOR = 0.40
# A ratio outside this range is a provider reporting nonsense (or another request's
# usage); it is ignored rather than allowed to shrink or blow up every figure.
MIN_RATIO, MAX_RATIO = 0.05, 20.0


def prior_ratio(estimator_id: str, *, exact: bool) -> float:
    """The ratio to assume before any provider count: 1.0 for the model's own tokenizer,
    ``BYTES_PRIOR`` for ``bytes-v1`` (a byte count over-counts every real tokenizer about
    fourfold), ``PROXY_PRIOR`` for a proxy tokenizer."""
    if exact:
        return 1.0
    return BYTES_PRIOR if estimator_id == BYTES_V1 else PROXY_PRIOR


def ratio_sample(*, estimate: int, provider_count: Any) -> float | None:
    """provider count / our estimate for one request, or None when it tells nothing."""
    if isinstance(provider_count, bool) or not isinstance(provider_count, int) or provider_count <= 0:
        return None
    if estimate <= 0:
        return None
    ratio = provider_count / estimate
    return ratio if MIN_RATIO <= ratio <= MAX_RATIO else None


def usage_prompt_tokens(usage: Mapping[str, Any] | None) -> int | None:
    """The input a provider counted, from an OpenAI-style ``usage`` (``prompt_tokens``,
    which for Anthropic-style usage the client fills with uncached + cache read + written)."""
    if not isinstance(usage, Mapping):
        return None
    value = usage.get("prompt_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Calibration:
    """Recent ratios of one model with one estimator, and the prior used without any."""

    prior: float = 1.0
    ratios: tuple[float, ...] = field(default_factory=tuple)

    @property
    def ratio(self) -> float:
        recent = self.ratios[-RECENT_SAMPLES:]
        return max(recent) if recent else self.prior

    @property
    def samples(self) -> int:
        return len(self.ratios)

    def with_sample(self, sample: float | None) -> Calibration:
        """This calibration with one more sample (unchanged for None); keeps the recent ones."""
        if sample is None:
            return self
        return Calibration(prior=self.prior, ratios=(*self.ratios, sample)[-RECENT_SAMPLES:])

    def figure(self, estimate: int) -> int:
        """The calibrated figure of an estimate: what every budget decision reads."""
        return calibrated(estimate, self.ratio)


def calibrated(units: int, ratio: float) -> int:
    """``units`` scaled by ``ratio``, rounded up (so a figure never drops below a count it
    was calibrated against)."""
    return units if ratio == 1.0 else math.ceil(units * ratio)


class CalibratedEstimator:
    """An estimator whose every figure is calibrated: hand it to the compaction engine so
    the trigger, the commit rule and segment budgets judge the same figures as the hard
    limit. Keeps the base estimator's id (the figures are still that estimator's, scaled)."""

    def __init__(self, base: Estimator, ratio: float) -> None:
        self.base, self.ratio, self.id = base, ratio, base.id

    def message(self, message: Mapping[str, Any]) -> int:
        return calibrated(self.base.message(message), self.ratio)

    def tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        return calibrated(self.base.tools(tools), self.ratio)

    def request(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None) -> int:
        return calibrated(self.base.request(messages, tools), self.ratio)


# CAT-10: a prompt the server counts more than this share under what was expected of it
# was cut by the server (Ollama drops the start of a prompt longer than its context).
TRUNCATION_SHARE = 0.9
# No server keeps less than this: a smaller count is a short prompt, never a window's cap.
SMALLEST_WINDOW = 512
# What ``prompt_truncated`` says: the count reached the server's window / fell short.
AT_WINDOW, UNDER_COUNT = "at_window", "under_count"


def prompt_truncated(*, estimate: int, counted: Any, calibration: Calibration, exact: bool,
                     server_window: int | None) -> str | None:
    """CAT-10: did the server silently truncate a prompt we estimated at ``estimate`` and it
    counted as ``counted``? ``AT_WINDOW`` when its count reaches its own context size
    (``server_window``, as far as it is known); ``UNDER_COUNT`` when it falls more than 10%
    under what the request should have counted: our estimate itself when it is the model's
    own tokenizer, else the estimate times the smallest ratio this model's real counts have
    shown, at most 1. Before any real count, a proxy's estimate is no evidence (a byte count is four
    times a real one), so only the first rule applies. None otherwise.

    ``UNDER_COUNT`` alone is a suspicion: a proxy's ratio moves with the text (a summary
    reads differently from the conversation it replaced), so the caller confirms it with
    :func:`truncation_confirmed` before acting on it."""
    if isinstance(counted, bool) or not isinstance(counted, int) or counted < SMALLEST_WINDOW or estimate <= 0:
        return None
    if server_window and counted >= server_window:
        return AT_WINDOW
    if exact:
        ratio = 1.0
    elif calibration.ratios:
        # Never above 1: a proxy's ratio moves with the text by more than a tenth (a model
        # counting half again our figure on prose counts about ours on a repetitive log),
        # so what it showed above our own figure is not relied on here.
        ratio = min(1.0, *calibration.ratios)
    else:
        return None
    return UNDER_COUNT if counted < TRUNCATION_SHARE * estimate * ratio else None


def truncation_confirmed(*, counted: int, largest_earlier: int | None, exact: bool) -> bool:
    """CAT-10: an under-count is a cut only when the count is at the top of what the server
    counted for this conversation before: a server that truncates caps every count at its
    window, so a count below one it reported earlier is the estimate's error, not a cut.
    With the model's own tokenizer, at or above the earlier counts is enough. With a proxy
    the count must *be* the cap, met before: a proxy's error moves with the text by far
    more than a tenth (digits, logs, a summary against prose), so only a count the server
    gave twice for prompts of other sizes tells a cut (the first cut answer of such a
    server goes by; the second is caught). With no earlier count there is nothing to
    compare: not a cut (the first prompt of a conversation is small)."""
    if largest_earlier is None:
        return False
    return counted >= largest_earlier if exact else counted == largest_earlier
