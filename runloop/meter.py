"""The chat's context meter: how full the main instance's context is.

After a step it is measured on what was just sent — the provider's own count of it when
the answer says (``prompt_tokens``), else our calibrated estimate (CTX-25) — plus the
answer the step added, which the next request carries; after a compaction, on the
compacted context. Always against the figures the loop decides with: the effective
input, where compaction triggers and what it aims for (CTX-21/22).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from context.calibration import usage_prompt_tokens
from runloop.state import RunState


def context_measured(state: RunState, *, tokens: int, measured_by: str) -> dict[str, Any]:
    """A ``context_measured`` event's data."""
    budget = state.figures.budget
    data: dict[str, Any] = {
        "tokens": tokens, "measured_by": measured_by,
        "context_window": budget.context_window, "effective_input_tokens": budget.effective_input,
        "trigger_tokens": None, "target_tokens": None, "prepare_tokens": None,
    }
    policy = state.policy
    if policy is not None:  # without one the legacy character threshold applies (CTX-40)
        data["trigger_tokens"] = budget.trigger_tokens(policy)
        data["target_tokens"] = budget.target_tokens(policy)
        data["prepare_tokens"] = int(budget.prepare_threshold(policy))  # CTX-45: a summary is made from here
    return data


def step_measured(state: RunState, *, estimate: int, usage: dict[str, Any] | None,
                  answer: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The ``context_measured`` event of one main-instance step, to commit with it."""
    counted = usage_prompt_tokens(usage)
    figures = state.figures
    sent = counted if counted is not None else figures.figure(estimate)
    tokens = sent + figures.figure(figures.estimates.message(answer))
    return "context_measured", context_measured(state, tokens=tokens,
                                                measured_by="provider" if counted is not None else "estimate")


@dataclass(frozen=True)
class MeterShown:
    """What the meter shows of a measurement: ``value`` on the bar, never above
    ``maximum``, and whether the figure is past the trigger or the maximum."""

    value: int
    maximum: int
    past_trigger: bool
    past_maximum: bool


def meter_shown(tokens: int | None, maximum: int | None, trigger: int | None) -> MeterShown:
    """The meter's reading of a figure (the browser reads its updates the same way, chat.js
    ``meterReading``).

    A figure is the size of the *next* request: the last one sent plus the answer it got
    (and, in the browser, the question being sent). The trigger judges a request only when
    it is about to be sent, so between two requests the figure may be past the trigger, or
    past the maximum one request may hold (an answer adds up to the output reserve): the
    next request is then summarized before it goes. The bar stops at its maximum and the
    words say what happens next; the figure itself is never altered."""
    tokens = max(0, int(tokens or 0))
    maximum = max(0, int(maximum or 0))
    return MeterShown(value=min(tokens, maximum), maximum=maximum,
                      past_trigger=bool(trigger) and tokens >= int(trigger or 0),
                      past_maximum=tokens > maximum)
