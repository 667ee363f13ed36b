"""Writes for agents: drafts with a complete context policy, and publishing frozen versions."""
from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Max

from agents.models import Agent, AgentVersion
from agents.run_limits import MAX_LIMIT, SETTABLE
from agents.server_tools import (
    is_server_ref,
    server_refs_check,
    server_tools_difference,
    server_tools_freeze,
    tool_overrides_normalize,
)
from agents.tool_approvals import approval_changes, approval_tools, builtin_approvals_freeze
from agents.tool_registry import tool_names_available, tool_names_reserved
from context.policy import ContextPolicy, PolicyError
from core.errors import ValidationFailed
from models_catalog.models import ModelConnection
from models_catalog.providers import provider_label


def context_policy_normalize(raw: dict[str, Any] | None) -> dict[str, Any]:
    """Fill CTX-20 defaults and validate; a bad value is a 400 naming the field."""
    try:
        return ContextPolicy.from_dict(raw or {}).to_dict()
    except PolicyError as exc:
        fields = {f"context_policy.{name}": message for name, message in exc.fields.items()}
        raise ValidationFailed("The context policy is not valid.", fields=fields) from None


def agent_create(
    *,
    space,
    name: str,
    model_connection,
    instructions: str = "",
    tools: list[str] | None = None,
    context_policy: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    tool_overrides: dict[str, Any] | None = None,
    memory: bool = False,
    created_by=None,
) -> Agent:
    if model_connection.space_id != space.pk:
        raise ValidationFailed("The model connection belongs to another space.",
                               fields={"model_connection": "not in this space"})
    tools = agent_tools_normalize(list(tools or []), space_id=space.pk)
    return Agent.objects.create(
        space=space,
        name=name,
        instructions=instructions,
        model_connection=model_connection,
        tools=tools,
        tool_overrides=tool_overrides_normalize(tool_overrides, tools=approval_tools(tools, memory=memory)),
        context_policy=context_policy_normalize(context_policy),
        limits=dict(limits or {}),
        memory=memory,
        created_by=created_by,
    )


def _figures_frozen(connection: ModelConnection) -> dict[str, int]:
    """The figures a version published now freezes: the connection's budget in force
    (``ModelConnection.budget``: within what the server keeps, CAT-7, with the margin and
    output reserve nobody set following a window it proved, CAT-9), so its runs, its page
    and the chat's meter read one figure; the plain figures when they leave no input."""
    try:
        budget = connection.budget()
        return {"context_window": budget.context_window, "max_output_tokens": budget.max_output_tokens,
                "safety_margin_tokens": budget.safety_margin_tokens}
    except PolicyError:
        return {"context_window": connection.effective_context_window(),
                "max_output_tokens": connection.max_output_tokens,
                "safety_margin_tokens": connection.safety_margin_tokens}


def agent_publish(*, agent: Agent, published_by=None) -> AgentVersion:
    """Freeze the draft and its connection's figures into the next version number.

    The frozen figures are the connection's budget in force (``_figures_frozen``): never
    more than the server keeps (CAT-7), so no run of the version relies on context the
    server would drop.
    Server tools are frozen from their servers' last listing, the one the admin saw
    (TOOL-3, TOOL-6): publishing connects to nothing. Each tool's approval policy is frozen
    with it (TOOL-7, ``agents.tool_approvals``). Locks the agent row so two
    publishers never get the same number.
    """
    with transaction.atomic():
        agent = Agent.objects.select_for_update().select_related("model_connection").get(pk=agent.pk)
        connection = agent.model_connection
        server_tools = server_tools_freeze(tools=list(agent.tools), overrides=agent.tool_overrides or {},
                                           space_id=agent.space_id, reserved=tool_names_reserved())
        number = (agent.versions.aggregate(n=Max("version"))["n"] or 0) + 1
        return AgentVersion.objects.create(
            agent=agent,
            version=number,
            name=agent.name,
            instructions=agent.instructions,
            tools=list(agent.tools),
            server_tools=server_tools,
            tool_approvals=builtin_approvals_freeze(tools=list(agent.tools), overrides=agent.tool_overrides or {},
                                                    memory=agent.memory),
            model_connection=connection,
            provider=connection.provider,
            base_url=connection.base_url,
            model=connection.model,
            **_figures_frozen(connection),
            context_policy=context_policy_normalize(agent.context_policy),
            limits=dict(agent.limits),
            verify_before_complete=agent.verify_before_complete,
            memory=agent.memory,
            published_by=published_by,
        )


# What an empty policy field means, in the console's words.
POLICY_EMPTY = {"user_turns": "off", "model_steps": "off", "prepare_ratio": "halfway"}


@dataclass(frozen=True)
class DraftChange:
    """One way the next version would differ from the last: ``what`` is a field's name in
    the people's words, ``before`` and ``after`` its two values as shown to them."""

    what: str
    before: str
    after: str


def _shown(value: Any, empty: str = "default") -> str:
    if value is None:
        return empty
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def agent_draft_changes(*, agent: Agent) -> tuple[AgentVersion | None, list[DraftChange]]:
    """What publishing ``agent`` now would change against its latest version, field by field
    (the latest version, and ``[]`` when nothing would). Reads only: the same facts
    ``agent_publish`` freezes — the draft, its connection's figures and its server tools'
    last listing — so "nothing to publish" means the next version would equal the last."""
    latest = agent.versions.order_by("-version").first()
    if latest is None:
        return None, []
    connection = agent.model_connection
    changes: list[DraftChange] = []

    def compare(what: str, before: Any, after: Any, empty: str = "default") -> None:
        if before != after:
            changes.append(DraftChange(what=what, before=_shown(before, empty), after=_shown(after, empty)))

    compare("Name", latest.name, agent.name)
    compare("Provider", provider_label(latest.provider), provider_label(connection.provider))
    compare("Base URL", latest.base_url, connection.base_url)
    compare("Model", latest.model, connection.model)
    figures = _figures_frozen(connection)
    compare("Context window", latest.context_window, figures["context_window"])
    compare("Max output tokens", latest.max_output_tokens, figures["max_output_tokens"])
    compare("Safety margin", latest.safety_margin_tokens, figures["safety_margin_tokens"])
    if latest.instructions.replace("\r\n", "\n") != agent.instructions.replace("\r\n", "\n"):
        changes.append(DraftChange(what="Instructions", before=f"{len(latest.instructions):,} characters",
                                   after=f"{len(agent.instructions):,} characters, changed"))
    before_tools, after_tools = list(latest.tools), list(agent.tools)
    added = [name for name in after_tools if name not in before_tools]
    removed = [name for name in before_tools if name not in after_tools]
    if added:
        changes.append(DraftChange(what="Tools added", before="", after=", ".join(added)))
    if removed:
        changes.append(DraftChange(what="Tools removed", before=", ".join(removed), after=""))
    try:
        frozen = server_tools_freeze(tools=after_tools, overrides=agent.tool_overrides or {},
                                     space_id=agent.space_id, reserved=tool_names_reserved())
    except ValidationFailed as exc:
        frozen = None
        changes.append(DraftChange(what="Server tools", before="", after=exc.message))
    difference = server_tools_difference(latest.server_tools, frozen) if frozen is not None else ""
    if difference:
        changes.append(DraftChange(what="Server tools", before="as published", after=difference))
    changes += [DraftChange(what=f"Ask before calling {name}", before=before, after=after) for name, before, after
                in approval_changes(version=latest, tools=after_tools, overrides=agent.tool_overrides or {},
                                     memory=latest.memory and agent.memory)]
    policy_before = latest.context_policy  # None: a version of the legacy character-threshold policy
    for name, value in context_policy_normalize(agent.context_policy).items():
        before = policy_before.get(name) if policy_before is not None else "legacy policy"
        compare(name.replace("_", " ").capitalize(), before, value, empty=POLICY_EMPTY.get(name, "default"))
    for name in SETTABLE:
        compare(f"Run limit: {name.removeprefix('max_').replace('_', ' ')}", latest.limits.get(name),
                agent.limits.get(name))
    compare("Verify before completing", latest.verify_before_complete, agent.verify_before_complete)
    compare("Memory across sessions", latest.memory, agent.memory)
    return latest, changes


# --- drafts as the API and the admin console write them ---------------------------------

MAX_INSTRUCTIONS = 100_000
DRAFT_FIELDS = ("name", "instructions", "model_connection", "tools", "tool_overrides", "context_policy", "limits",
                "verify_before_complete", "memory", "call_log_retention_days")
MAX_RETENTION_DAYS = 36_500


def agent_tools_normalize(tools: Any, *, space_id: int, stored: Collection[str] = ()) -> list[str]:
    """The tool names, de-duplicated in order; a 400 for a built-in outside the registry or
    a ``"<server>.<tool>"`` that no server of the space lists (TOOL-3).

    Read at call time, so tools registered after start-up are accepted without a restart.
    """
    if not isinstance(tools, (list, tuple)) or not all(isinstance(name, str) for name in tools):
        raise ValidationFailed("The tools are not valid.", fields={"tools": "must be a list of tool names"})
    available = set(tool_names_available())
    unknown = [name for name in tools if name not in available and not is_server_ref(name)]
    if unknown:
        raise ValidationFailed(
            "Unknown tools.",
            fields={"tools": f"unknown: {', '.join(unknown)}; available: {', '.join(sorted(available))}"},
        )
    server_refs_check(refs=[name for name in tools if is_server_ref(name)], space_id=space_id, stored=stored)
    return list(dict.fromkeys(tools))


def agent_limits_normalize(limits: Any) -> dict[str, int]:
    """Per-run bounds (LOOP-2): only the known keys, each a positive integer; absent = default."""
    if limits is None:
        return {}
    if not isinstance(limits, dict):
        raise ValidationFailed("The limits are not valid.", fields={"limits": "must be an object"})
    errors: dict[str, str] = {}
    for key, value in limits.items():
        if key not in SETTABLE:
            errors[f"limits.{key}"] = f"unknown field; use {', '.join(SETTABLE)}"
        elif value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                    or not 1 <= value <= MAX_LIMIT):
            errors[f"limits.{key}"] = f"must be an integer from 1 to {MAX_LIMIT:,} or null"
    if errors:
        raise ValidationFailed("The limits are not valid.", fields=errors)
    return {key: value for key, value in limits.items() if value is not None}


def _policy_merge(agent: Agent | None, raw: Any) -> dict[str, Any]:
    """PATCH semantics for the policy: the fields sent replace the draft's, the rest stay;
    ``null`` resets to the CTX-20 defaults. A new draft starts from the defaults."""
    if raw is None:
        return context_policy_normalize({})
    if not isinstance(raw, dict):
        raise ValidationFailed("The context policy is not valid.", fields={"context_policy": "must be an object"})
    base = agent.context_policy if agent is not None and isinstance(agent.context_policy, dict) else {}
    return context_policy_normalize({**base, **raw})


def agent_draft_validate(*, agent: Agent | None, space_id: int, data: Mapping[str, Any]) -> dict[str, Any]:
    """Validate the draft fields present in ``data`` and return them normalized.

    Shared by the API and the admin form, so both refuse the same inputs; every problem
    is reported in one 400 whose field names (``context_policy.target_ratio``,
    ``limits.max_depth``, ``tools``) the form maps back onto its inputs.
    """
    unknown = set(data) - set(DRAFT_FIELDS)
    if unknown:
        raise ValidationFailed("Unknown fields.", fields=dict.fromkeys(sorted(unknown), "unknown field"))
    errors: dict[str, str] = {}
    out: dict[str, Any] = {}
    if "name" in data:
        name = data["name"].strip() if isinstance(data["name"], str) else ""
        if not name or len(name) > 200:
            errors["name"] = "required, at most 200 characters"
        out["name"] = name
    if "instructions" in data:
        instructions = data["instructions"]
        if not isinstance(instructions, str) or len(instructions) > MAX_INSTRUCTIONS:
            errors["instructions"] = f"text of at most {MAX_INSTRUCTIONS:,} characters"
        out["instructions"] = instructions if isinstance(instructions, str) else ""
    if "model_connection" in data:
        connection = data["model_connection"]
        if connection is None or connection.space_id != space_id:
            errors["model_connection"] = "not a model connection of this agent's space"
        out["model_connection"] = connection
    checks = {
        "tools": lambda raw: agent_tools_normalize(raw, space_id=space_id,
                                                   stored=agent.tools if agent is not None else ()),
        "limits": agent_limits_normalize,
        "context_policy": lambda raw: _policy_merge(agent, raw),
    }
    for name, check in checks.items():
        if name in data:
            try:
                out[name] = check(data[name])
            except ValidationFailed as exc:
                errors.update(exc.fields)
    for flag in ("verify_before_complete", "memory"):
        if flag in data:
            out[flag] = bool(data[flag])
    changed = "tools" in out or "memory" in out
    if "tool_overrides" in data or (changed and agent is not None and agent.tool_overrides):
        # Overrides follow the tools: a tool taken out of the list takes its override with it,
        # and ``memory``'s goes when the agent's memory is turned off (MEM-2).
        memory = out.get("memory", agent.memory if agent is not None else False)
        tools = approval_tools(list(out.get("tools", agent.tools if agent is not None else [])), memory=memory)
        raw = data.get("tool_overrides", agent.tool_overrides if agent is not None else {}) or {}
        if "tool_overrides" not in data:
            raw = {ref: flags for ref, flags in raw.items() if ref in tools}
        try:
            out["tool_overrides"] = tool_overrides_normalize(raw, tools=tools)
        except ValidationFailed as exc:
            errors.update(exc.fields)
    if "call_log_retention_days" in data:
        days = data["call_log_retention_days"]
        if days is not None and (isinstance(days, bool) or not isinstance(days, int)
                                 or not 1 <= days <= MAX_RETENTION_DAYS):
            errors["call_log_retention_days"] = f"a number of days from 1 to {MAX_RETENTION_DAYS:,}, or empty"
        out["call_log_retention_days"] = days
    if errors:
        raise ValidationFailed("The agent is not valid.", fields=errors)
    return out


@transaction.atomic
def agent_draft_create(*, space, data: Mapping[str, Any], created_by=None) -> Agent:
    """Create a draft from API or admin input: names, tools, limits and policy validated
    (CTX-20 defaults filled in). ``data["model_connection"]`` is a ModelConnection; the
    caller has checked that ``created_by`` administers ``space``."""
    missing = {name: "required" for name in ("name", "model_connection") if data.get(name) is None}
    if missing:
        raise ValidationFailed("The agent is not valid.", fields=missing)
    fields = agent_draft_validate(agent=None, space_id=space.pk, data={"context_policy": {}, **data})
    agent = agent_create(
        space=space,
        name=fields["name"],
        model_connection=fields["model_connection"],
        instructions=fields.get("instructions", ""),
        tools=fields.get("tools", []),
        tool_overrides=fields.get("tool_overrides"),
        context_policy=fields["context_policy"],
        limits=fields.get("limits", {}),
        memory=bool(fields.get("memory")),
        created_by=created_by,
    )
    extra = {name: fields[name] for name in ("verify_before_complete", "call_log_retention_days")
             if fields.get(name)}
    if extra:
        for name, value in extra.items():
            setattr(agent, name, value)
        agent.save(update_fields=list(extra))
    return agent


def agent_update(*, agent: Agent, data: Mapping[str, Any]) -> Agent:
    """Change a draft; published versions are untouched (RUN-4). The saved draft always
    carries all six policy fields (CTX-20, CTX-45), so it is re-normalized on every save."""
    fields = agent_draft_validate(agent=agent, space_id=agent.space_id, data=data)
    fields.setdefault("context_policy", context_policy_normalize(agent.context_policy))
    for name, value in fields.items():
        setattr(agent, name, value)
    agent.save(update_fields=[*fields, "updated_at"])
    return agent
