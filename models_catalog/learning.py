"""What the platform learns from a provider's answers, per connection.

- **Calibration** (CTX-25): every answer's real ``usage`` against our estimate for the same
  request, kept per connection, model and estimator, so a new session starts calibrated.
- **The real window** (CAT-3, CAT-9): a context-overflow refusal below the configured window
  lowers the connection's effective window, with provenance ``provider_refusal``; it applies
  at once to every version and run of the connection, frozen budgets included, with the
  safety margin and output reserve recomputed for it unless an admin set them
  (``budget_in_force``).

Both only ever make figures safer: a calibration keeps the largest recent ratio, and a
learned window only goes down.
"""
from __future__ import annotations

from collections.abc import Sequence

from django.db import connection as db_connection
from django.db import transaction
from django.utils import timezone

from context import (
    Budget,
    Calibration,
    PolicyError,
    estimate_is_exact,
    get_estimator,
    prior_ratio,
)
from context.policy import input_room
from models_catalog.errors import ContextOverflowError
from models_catalog.models import ModelConnection, TokenCalibration
from models_catalog.providers import get_provider

PROVIDER_REFUSAL = "provider_refusal"
# CAT-10: a window learned from a server's count of a prompt it cut without refusing.
TRUNCATED_PROMPT = "truncated_prompt"
# With no figure in the refusal, the window is taken to be this share of what was refused.
UNCOUNTED_REFUSAL_SHARE = 0.9


def calibration_get(*, connection_id: int | None, model: str, estimator_id: str, prior: float) -> Calibration:
    """The stored calibration of a model behind a connection, or just the prior."""
    if connection_id is None:
        return Calibration(prior=prior)
    # Written out (every run starts here, and composing the ORM's read cost more than it, issue #29).
    field = TokenCalibration._meta.get_field("ratios")
    with db_connection.cursor() as cursor:
        cursor.execute(f'SELECT "ratios" FROM "{TokenCalibration._meta.db_table}" WHERE "connection_id" = %s '
                       'AND "model" = %s AND "estimator_id" = %s LIMIT 1', [connection_id, model, estimator_id])
        row = cursor.fetchone()
    ratios = field.from_db_value(row[0], field.cached_col, db_connection) if row is not None else None
    return Calibration(prior=prior, ratios=tuple(float(r) for r in ratios or ()))


def calibration_for_connection(*, connection: ModelConnection, model: str | None = None) -> Calibration:
    """The calibration runs of ``connection`` start from (for its model, or ``model``):
    the estimator they would use, its prior, and what the provider has counted so far."""
    model = model or connection.model
    exact = get_provider(connection.provider).exact_tokenizer
    estimator_id = get_estimator(model, exact_tokenizer=exact).id
    prior = prior_ratio(estimator_id, exact=estimate_is_exact(estimator_id, model, exact_tokenizer=exact))
    return calibration_get(connection_id=connection.pk, model=model, estimator_id=estimator_id, prior=prior)


def calibration_record(*, connection_id: int | None, model: str, estimator_id: str, prior: float,
                       samples: Sequence[float]) -> Calibration:
    """Add provider-count / estimate samples, oldest first; returns the calibration now in force.

    The row is locked while its recent samples are updated, so concurrent runs of the
    same model each add theirs.
    """
    samples = [sample for sample in samples if sample is not None]
    if not samples or connection_id is None:
        return calibration_get(connection_id=connection_id, model=model, estimator_id=estimator_id, prior=prior)
    with transaction.atomic():
        row, _ = TokenCalibration.objects.select_for_update().get_or_create(
            connection_id=connection_id, model=model, estimator_id=estimator_id)
        calibration = Calibration(prior=prior, ratios=tuple(float(r) for r in row.ratios or ()))
        for sample in samples:
            calibration = calibration.with_sample(sample)
        row.ratios = list(calibration.ratios)
        row.samples += len(samples)
        row.save(update_fields=["ratios", "samples", "updated_at"])
    return calibration


def window_from_refusal(*, error: ContextOverflowError, refused_tokens: int, max_output_tokens: int) -> int:
    """The window a refusal tells of: the provider's own figure when it gave one; else an
    upper bound from what it counted (the prompt plus the output reserve did not fit);
    else a share of what we estimate was refused."""
    if error.window:
        return error.window
    if error.prompt_tokens:
        return error.prompt_tokens + max_output_tokens - 1
    return int((refused_tokens + max_output_tokens) * UNCOUNTED_REFUSAL_SHARE)


def window_learn(*, connection_id: int | None, window: int, note: str) -> int | None:
    """Lower the connection's effective window to ``window`` when that is below what it
    uses now; returns the learned window, or None when nothing changed."""
    if connection_id is None or window < 1:
        return None
    with transaction.atomic():
        connection = ModelConnection.objects.select_for_update().filter(pk=connection_id).first()
        if connection is None or window >= connection.effective_context_window():
            return None
        connection.learned_context_window = window
        connection.learned_window_at = timezone.now()
        connection.learned_window_note = note[:300]
        connection.save(update_fields=["learned_context_window", "learned_window_at", "learned_window_note"])
    return window


def figures_set(*, connection: ModelConnection | None) -> tuple[bool, bool]:
    """Whether an admin set the safety margin and the output reserve of ``connection``'s
    runs (``ModelConnection.figures_set``; neither without a connection)."""
    return connection.figures_set() if connection is not None else (False, False)


def budget_in_force(*, connection: ModelConnection | None, budget: Budget) -> Budget:
    """CAT-9, RUN-4 amended: a frozen budget under what the server proved about the window
    (``ModelConnection.budget``); unchanged without a connection. PolicyError when the
    figures an admin set leave no input in that window."""
    return connection.budget(budget) if connection is not None else budget


def connection_input_tokens(connection: ModelConnection) -> int:
    """CTX-21, CAT-9: what a request of this connection's figures may use, as the runs of a
    version published now use it (``ModelConnection.budget``); the plain difference when
    the figures leave nothing, so the console shows the admin the shortfall."""
    try:
        return connection.budget().effective_input
    except PolicyError:
        return input_room(connection.effective_context_window(), connection.max_output_tokens,
                          connection.safety_margin_tokens)


# Failures a window the server proved since can fix (CAT-9): a resumed run compacts under it.
WINDOW_FAILURES = ("context_window", "context_overflow")


def window_since_proven(*, code: str | None, connection: ModelConnection | None,
                        frozen: tuple[int, int, int]) -> bool:
    """CAT-9: whether a run that failed with ``code`` on its ``frozen`` (window, output,
    margin) may be resumed: it failed on the window, and what the server proved of its
    window since (learned from a refusal or a cut prompt, read from the server) gives it
    other figures, with room for input -- a session is never stuck on an unknown window.
    Runs stopped that way before this rule stored ``retryable: false``."""
    if code not in WINDOW_FAILURES or connection is None:
        return False
    try:
        budget = Budget(context_window=frozen[0], max_output_tokens=frozen[1], safety_margin_tokens=frozen[2])
        return budget_in_force(connection=connection, budget=budget) != budget
    except PolicyError:  # the figures an admin set leave no input: only the admin can fix that
        return False
