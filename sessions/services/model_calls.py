"""The inspector's log of model calls: one row opened before a call is sent, closed after.

What a call received is kept exactly (the messages and tools as sent, with the estimate
per message), so operators see what the model saw; the provider's usage is stored next to
our estimate for calibration (CTX-25). Read it back with ``sessions.selectors``
(``model_call_entries``), never from the row's JSON directly.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.utils import timezone

from sessions.models import Instance, ModelCall, Run


def model_call_open(*, run: Run, instance: Instance, purpose: str, provider: str, model: str, estimator_id: str,
                    estimated_tokens: int, messages: Sequence[dict[str, Any]],
                    tools: Sequence[dict[str, Any]] = (), estimates: Sequence[int] = ()) -> ModelCall:
    """Log a call about to be sent (the row exists even if the worker dies mid-answer)."""
    return ModelCall.objects.create(
        run=run, instance=instance, purpose=purpose, provider=provider, model=model, estimator_id=estimator_id,
        estimated_tokens=estimated_tokens,
        request={"messages": list(messages), "tools": list(tools), "estimates": list(estimates)},
    )


def model_call_close(*, call: ModelCall, outcome: str, usage: dict[str, Any] | None = None) -> None:
    """Record how the call ended (``ok``, ``cancelled`` or an error code) and the provider's usage."""
    ModelCall.objects.filter(pk=call.pk).update(outcome=outcome, usage=usage, finished_at=timezone.now())
    call.outcome, call.usage = outcome, usage
