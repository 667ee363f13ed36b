"""Creating runs and moving them through their states (RUN-1, RUN_TRANSITIONS)."""
from __future__ import annotations

from django.db import IntegrityError, transaction

from agentloom.agents.models import AgentVersion
from agentloom.errors import ActiveRunConflict
from sessions.models import Instance, Run, Session


def budget_freeze(*, version: AgentVersion) -> dict:
    """The figures a run keeps for its whole life, resumes included (RUN-4)."""
    return {
        "provider": version.provider,
        "model": version.model,
        "context_window": version.context_window,
        "max_output_tokens": version.max_output_tokens,
        "safety_margin_tokens": version.safety_margin_tokens,
        "context_policy": version.context_policy,
        "limits": dict(version.limits or {}),
    }


def run_create(*, session: Session) -> Run:
    """Create a queued run with its main instance, bound to the session's version.

    Raises ``ActiveRunConflict`` (409) when the session already has a queued or running
    run. The database's conditional unique constraint decides, so two concurrent callers
    can never both succeed. Must not be called inside an outer transaction that would
    swallow the IntegrityError; it opens its own.
    """
    version = session.version
    try:
        with transaction.atomic():
            run = Run.objects.create(
                session=session,
                version=version,
                status=Run.Status.QUEUED,
                budget=budget_freeze(version=version),
                inherited_watermark=Session.objects.values_list("last_seq", flat=True).get(pk=session.pk),
            )
            Instance.objects.create(run=run, key=Instance.MAIN)
    except IntegrityError:
        if Run.objects.filter(session=session, status__in=Run.ACTIVE_STATUSES).exists():
            raise ActiveRunConflict(
                "This session already has a run in progress; wait for it, stop it, or add a supplement."
            ) from None
        raise
    return run
