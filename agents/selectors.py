"""Reads for agents and their published versions, and the figures shown beside them.

Reach: members of an agent's space read the draft and its versions; only the space's
admins change or publish it (403 for members, 404 for everyone outside the space).
"""
from __future__ import annotations

from typing import Any

from django.db.models import Max, QuerySet

from agents.models import Agent, AgentVersion
from context import Calibration
from context.policy import Budget, ContextPolicy, PolicyError, input_room
from core.errors import NotFound
from core.spaces.models import Membership
from core.spaces.selectors import space_require_admin
from models_catalog.learning import calibration_for_connection
from models_catalog.models import ModelConnection


def agent_list_for_user(*, user, space_id: int | None = None) -> QuerySet[Agent]:
    """Agents of the caller's spaces, each with ``latest_version`` (None before publishing)."""
    spaces = Membership.objects.filter(user=user).values("space_id")
    # The key column is encrypted and never needed here: do not decrypt it per row.
    query = (Agent.objects.filter(space_id__in=spaces).select_related("model_connection")
             .defer("model_connection__api_key"))
    if space_id is not None:
        query = query.filter(space_id=space_id)
    return query.annotate(latest_version=Max("versions__version")).order_by("name", "id")


def agent_get_for_user(*, agent_id: Any, user) -> Agent:
    """An agent of one of the caller's spaces; 404 for anything else."""
    try:
        return agent_list_for_user(user=user).get(pk=int(agent_id))
    except (Agent.DoesNotExist, TypeError, ValueError):
        raise NotFound("Agent not found.") from None


def agent_get_for_admin(*, agent_id: Any, user) -> Agent:
    """An agent the caller may change or publish: 404 outside their spaces, 403 for members."""
    agent = agent_get_for_user(agent_id=agent_id, user=user)
    space_require_admin(space_id=agent.space_id, user=user)
    return agent


def version_list_for_agent(*, agent: Agent) -> QuerySet[AgentVersion]:
    """Published versions, newest first. The caller has checked it may read the agent."""
    return AgentVersion.objects.filter(agent=agent).select_related("agent").order_by("-version")


def budget_summary(
    *, context_window: int, max_output_tokens: int, safety_margin_tokens: int, context_policy: dict | None,
    calibration: Calibration | None = None, connection: ModelConnection | None = None,
) -> dict[str, Any]:
    """CTX-21/22 figures people need beside a draft or a version: the effective input and
    the token counts where compaction triggers and what it aims for. They are the
    provider's tokens: runs compare them with calibrated figures (CTX-25), whose ratio is
    ``calibration_ratio`` (None before the provider has counted anything).

    With ``connection``, the figures are its budget in force (``ModelConnection.budget``,
    CAT-9): the ones a run of them decides with and the chat's meter shows.

    ``trigger_tokens``/``target_tokens`` (and ``prepare_tokens``, where a summary starts
    being prepared in the background) are None for a version without a policy (the
    legacy character threshold applies, CTX-40) or figures that leave no input room.
    """
    figures = (context_window, max_output_tokens, safety_margin_tokens)
    budget: Budget | None = None
    try:
        budget = Budget(*figures)
        if connection is not None:
            budget = connection.budget(budget)
        figures = (budget.context_window, budget.max_output_tokens, budget.safety_margin_tokens)
    except PolicyError:
        budget = None  # shown as the admin's figures, with no thresholds
    summary: dict[str, Any] = {
        "calibration_ratio": round(calibration.ratio, 4) if calibration and calibration.samples else None,
        "calibration_samples": calibration.samples if calibration else 0,
        "context_window": figures[0],
        "max_output_tokens": figures[1],
        "safety_margin_tokens": figures[2],
        "effective_input_tokens": input_room(*figures),
        "trigger_tokens": None,
        "target_tokens": None,
        "prepare_tokens": None,
        "legacy_policy": context_policy is None,
    }
    try:
        if budget is not None and context_policy is not None:
            policy = ContextPolicy.from_dict(context_policy)
            summary["trigger_tokens"] = budget.trigger_tokens(policy)
            summary["target_tokens"] = budget.target_tokens(policy)
            summary["prepare_tokens"] = int(budget.prepare_threshold(policy))  # CTX-45, as the run loop measures it
    except PolicyError:
        pass  # shown as None: the admin sees the figures and the missing thresholds
    return summary


def agent_budget(*, agent: Agent) -> dict[str, Any]:
    """The draft's figures: its connection's budget today (``ModelConnection.budget``), under
    its policy."""
    connection = agent.model_connection
    return budget_summary(
        context_window=min(connection.context_window, connection.server_context_window or connection.context_window),
        max_output_tokens=connection.max_output_tokens,
        safety_margin_tokens=connection.safety_margin_tokens,
        context_policy=agent.context_policy or {},
        calibration=calibration_for_connection(connection=connection),
        connection=connection,
    )


def version_budget(*, version: AgentVersion) -> dict[str, Any]:
    """A version's frozen figures (RUN-4) under what its connection's server proved (CAT-3,
    CAT-9): what every run bound to it uses."""
    connection = version.model_connection
    return budget_summary(
        context_window=version.context_window,
        max_output_tokens=version.max_output_tokens,
        safety_margin_tokens=version.safety_margin_tokens,
        context_policy=version.context_policy,
        calibration=calibration_for_connection(connection=connection, model=version.model) if connection else None,
        connection=connection,
    )

