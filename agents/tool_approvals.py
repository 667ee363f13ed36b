"""Each tool's approval policy on the agents' side (TOOL-7): read from the draft, frozen at
publish, compared with the last version, and said in words.

The policy decides whether a call waits for a person before it acts (the run loop asks
``agents.tool_registry.approval_needed``): ``never``; ``side_effects``, every call unless the
tool only reads (a server tool annotated ``readOnlyHint``, a built-in that changes nothing);
``always``. An admin sets it per tool in the draft's ``tool_overrides``
(``{"<tool>": {"approval": "always"}}``, checked by ``agents.server_tools.
tool_overrides_normalize``); absent, server tools take ``side_effects`` and built-ins
``never``. Publishing freezes a server tool's policy into its entry of
``AgentVersion.server_tools`` (always written) and the built-ins' into
``AgentVersion.tool_approvals`` (only those the admin set, so a version says what was
decided). Versions published before policies existed have neither: they read as the defaults.

The ``memory`` tool is not chosen from the list: an agent with memory has it (MEM-2), so its
policy is set, frozen and compared whenever the agent's memory is on (``approval_tools``).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agents.server_tools import frozen_server_tools, is_server_ref
from agents.tool_registry import APPROVAL_POLICIES, DEFAULT_BUILTIN_APPROVAL, DEFAULT_SERVER_APPROVAL, registry

# The policy's name in the console, the same words wherever it is set or shown.
APPROVAL_LABELS = {"never": "Never", "side_effects": "When it may change something", "always": "Always"}


# The built-in that comes with the agent's memory instead of from the list of tools (MEM-2).
MEMORY_TOOL = "memory"


def approval_tools(tools: list[str], *, memory: bool) -> list[str]:
    """The tools whose policy a draft or version sets: the chosen ones, and ``memory`` when
    the agent's memory is on."""
    names = [name for name in tools if isinstance(name, str)]
    return [*names, MEMORY_TOOL] if memory and MEMORY_TOOL not in names else names


def approval_default(name: str) -> str:
    """The policy a tool has when the admin set none."""
    return DEFAULT_SERVER_APPROVAL if is_server_ref(name) else DEFAULT_BUILTIN_APPROVAL


def approval_chosen(name: str, overrides: Mapping[str, Any]) -> str:
    """The policy the draft gives ``name``: its override, else the default."""
    values = overrides.get(name)
    chosen = values.get("approval") if isinstance(values, Mapping) else None
    return chosen if chosen in APPROVAL_POLICIES else approval_default(name)


def builtin_approvals_freeze(*, tools: list[str], overrides: Mapping[str, Any],
                             memory: bool = False) -> dict[str, str]:
    """``AgentVersion.tool_approvals``: the policies the admin set on the chosen built-ins,
    and on ``memory`` when the agent's memory is on."""
    return {name: overrides[name]["approval"] for name in approval_tools(tools, memory=memory)
            if not is_server_ref(name) and isinstance(overrides.get(name), Mapping) and "approval" in overrides[name]}


def builtin_read_only(name: str) -> bool:
    """A built-in that changes nothing: ``side_effects`` never asks before it."""
    tool = registry.get(name)
    return tool is not None and tool.read_only


def builtin_reads_sometimes(name: str) -> bool:
    """A built-in some of whose calls only read (``memory``'s ``view``): ``side_effects``
    asks before the others only."""
    tool = registry.get(name)
    return tool is not None and not tool.read_only and tool.reads is not None


def approval_words(policy: str, *, read_only: bool, reads_sometimes: bool = False) -> str:
    """What ``policy`` means for a tool, in words: whether its calls wait for a person."""
    if policy == "always":
        return "asks before every call"
    if policy == "side_effects":
        if read_only:
            return "never asks: it only reads"
        if reads_sometimes:
            return "asks before every call that writes, not before reading"
        return "asks before every call: it may change something"
    return "never asks"


@dataclass(frozen=True)
class ToolApprovalShown:
    """One tool of a version with the policy it froze, as its page lists it."""

    name: str
    policy: str
    read_only: bool

    @property
    def is_default(self) -> bool:
        return self.policy == approval_default(self.name)

    @property
    def words(self) -> str:
        label = APPROVAL_LABELS.get(self.policy, self.policy) + (" (default)" if self.is_default else "")
        words = approval_words(self.policy, read_only=self.read_only,
                               reads_sometimes=builtin_reads_sometimes(self.name))
        return f"{label}: {words}"


def version_approvals(version: Any) -> list[ToolApprovalShown]:
    """Each tool of ``version`` with its frozen policy, in the version's order of tools
    (``memory`` last, when the version has memory)."""
    entries = {entry["ref"]: entry for entry in frozen_server_tools(version)}
    builtins = version.tool_approvals if isinstance(version.tool_approvals, dict) else {}
    shown = []
    for name in approval_tools(list(version.tools or []), memory=bool(getattr(version, "memory", False))):
        if is_server_ref(name):
            entry = entries.get(name, {})
            shown.append(ToolApprovalShown(name, entry.get("approval", DEFAULT_SERVER_APPROVAL), read_only=(
                entry.get("annotations") or {}).get("readOnlyHint") is True))
        else:
            shown.append(ToolApprovalShown(name, builtins.get(name, DEFAULT_BUILTIN_APPROVAL),
                                           read_only=builtin_read_only(name)))
    return shown


def approval_changes(*, version: Any, tools: list[str], overrides: Mapping[str, Any],
                     memory: bool = False) -> list[tuple[str, str, str]]:
    """``(tool, before, after)`` in words for each tool the version and the draft both choose
    (``memory`` when both have memory) whose policy would change at the next publish. Absent
    policies are the defaults on both sides, so a version published before policies existed
    differs from nothing unset."""
    frozen = {shown.name: shown.policy for shown in version_approvals(version)}
    return [(name, APPROVAL_LABELS.get(frozen[name], frozen[name]), APPROVAL_LABELS[approval_chosen(name, overrides)])
            for name in approval_tools(tools, memory=memory)
            if name in frozen and frozen[name] != approval_chosen(name, overrides)]
