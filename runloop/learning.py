"""What a run learns of its connection while it runs (CTX-24, CTX-25, CAT-3, CAT-9): the
provider's counts of what we estimated, and the window a refusal proved. Not the run's
own execution — what it taught stays true whoever owns the run — so written here, not by
the run's journal: kept in the run's figures at once, saved for later sessions every few
samples and when the run ends."""
from __future__ import annotations

from typing import Protocol

from context import RunFigures, budget_under_window, estimate_is_exact, prior_ratio
from models_catalog.errors import ContextOverflowError
from models_catalog.learning import (
    PROVIDER_REFUSAL,
    TRUNCATED_PROMPT,
    calibration_record,
    window_from_refusal,
    window_learn,
)
from models_catalog.target import ModelTarget

CALIBRATION_SAVE_EVERY = 8


class Learner(Protocol):
    """What learning reads and keeps of a run's state (``runloop.state.RunState``)."""

    figures: RunFigures
    target: ModelTarget
    unsaved_samples: list[float]
    margin_set: bool
    output_set: bool


def prior(target: ModelTarget, estimator_id: str) -> float:
    """The calibration a run starts from before any sample (CTX-25)."""
    return prior_ratio(estimator_id, exact=estimate_is_exact(estimator_id, target.model,
                                                             exact_tokenizer=target.exact_tokenizer))


def usage_learn(state: Learner, *, estimate: int, provider_count: int | None) -> None:
    """Keep a provider's count of a request we estimated (any call: action, summary,
    check). In force at once; saved for later sessions every few samples and when the
    run ends (:func:`calibration_save`), not with every step."""
    sample = state.figures.learn(estimate=estimate, provider_count=provider_count)
    if sample is not None:
        state.unsaved_samples.append(sample)
        if len(state.unsaved_samples) >= CALIBRATION_SAVE_EVERY:
            calibration_save(state)


def calibration_save(state: Learner) -> None:
    """Add this run's new samples to the connection's stored calibration."""
    samples, state.unsaved_samples = state.unsaved_samples, []
    if samples:
        estimator_id = state.figures.estimator_id
        calibration_record(connection_id=state.target.connection_id, model=state.target.model,
                           estimator_id=estimator_id, prior=prior(state.target, estimator_id), samples=samples)


def estimate_exact(state: Learner) -> bool:
    """Whether the run's estimator is the model's own tokenizer (CAT-10 reads its estimate
    as the count to expect)."""
    return estimate_is_exact(state.figures.estimator_id, state.target.model,
                             exact_tokenizer=state.target.exact_tokenizer)


def refusal_learn(state: Learner, error: ContextOverflowError, *, estimate: int, truncated: bool = False) -> int:
    """CAT-3: a context-overflow refusal. Keep its count as a calibration sample, lower
    the connection's window to what the server keeps, and this run's budget with it.
    Returns the window now in force."""
    usage_learn(state, estimate=estimate, provider_count=error.prompt_tokens)
    figures = state.figures
    refused = figures.figure(estimate)
    window = window_from_refusal(error=error, refused_tokens=refused,
                                 max_output_tokens=figures.budget.max_output_tokens)
    window = min(window, figures.budget.context_window)
    note = (f"{TRUNCATED_PROMPT}: kept {window:,} tokens of a request of about {refused:,}" if truncated else
            f"{PROVIDER_REFUSAL}: refused a request of about {refused:,} tokens"
            + (f" (it counted {error.prompt_tokens:,})" if error.prompt_tokens else "")
            + (f"; its window is {error.window:,}" if error.window else ""))
    window_learn(connection_id=state.target.connection_id, window=window, note=note)
    # CAT-9: the margin and output reserve follow the proven window unless an admin set
    # them (a 32k default's 1,024-token margin would leave a 2,048 window no input).
    # PolicyError when what the admin set leaves no input.
    figures.budget = budget_under_window(figures.budget, window, margin_set=state.margin_set,
                                         output_set=state.output_set)
    return figures.budget.context_window
