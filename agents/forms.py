"""Admin console form for agent drafts (SPEC §10, CTX-20, LOOP-2).

The context policy is seven separate inputs and the run limits four, so a bad value is
reported on the input that holds it; the rules are the agent services'
(``agent_draft_validate``), the same the API applies.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from django import forms
from django.conf import settings
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from agents.models import Agent
from agents.run_limits import MAX_LIMIT, SETTABLE
from agents.services import agent_draft_validate, context_policy_normalize
from agents.tool_approvals import (
    APPROVAL_LABELS,
    MEMORY_TOOL,
    approval_chosen,
    approval_default,
    approval_tools,
    builtin_read_only,
    builtin_reads_sometimes,
)
from agents.tool_registry import APPROVAL_POLICIES, tool_description, tool_names_available
from context.policy import MAX_COMPACTION_CALLS, POLICY_DEFAULTS
from core.errors import ValidationFailed
from models_catalog.models import ModelConnection
from toolservers.admin import annotations_text
from toolservers.models import ToolServer

POLICY_FIELDS = ("context_ratio", "target_ratio", "user_turns", "model_steps", "max_compaction_calls",
                 "prepare_ratio", "mask_tool_results")
LIMIT_FIELDS = SETTABLE  # max_model_calls, max_tool_calls, max_wall_seconds, max_depth
LIMIT_HELP = {
    "max_model_calls": "Model calls one run may make (summary calls included).",
    "max_tool_calls": "Tool calls one run may make.",
    "max_wall_seconds": "Seconds one run may work before it stops.",
    "max_depth": "How deep delegation to sub-agents may nest.",
}
DRAFT_FORM_FIELDS = ("name", "instructions", "model_connection", "tools", "tool_overrides", "verify_before_complete",
                     "memory", "call_log_retention_days")


@dataclass(frozen=True)
class ToolOption:
    """A tool as the picker shows it: its name, what it says it does, and a note (a server
    tool's annotations, or why it can no longer be chosen)."""

    name: str
    description: str
    note: str = ""
    read_only: bool = False  # TOOL-7: "When it may change something" never asks before it
    reads_sometimes: bool = False  # memory: "When it may change something" asks before writes only
    offered: bool = True  # False: no longer offered, nothing to set beside it

    def __str__(self) -> str:
        return f"{self.name} — {self.description} [{self.note}]" if self.note else f"{self.name} — {self.description}"


def tool_choices(current: list[str]) -> list[tuple[str, Any]]:
    """The picker's choices: the built-ins, then each tool server's tools under its name,
    each with its description and annotations, so an admin reads what a tool says it does
    before choosing it (TOOL-6). Stored names no longer offered stay visible, so saving
    reports them instead of dropping them silently."""
    builtins = tool_names_available()
    groups: list[tuple[str, Any]] = [("Built-in", [
        (name, ToolOption(name, tool_description(name) or "no description", read_only=builtin_read_only(name)))
        for name in builtins])]
    offered = set(builtins)
    names = set()
    for server in ToolServer.objects.defer("headers").select_related("space").order_by("name", "id"):
        owner = "operator's" if server.space is None else server.space.name
        names.add(server.name)
        tools = [(f"{server.name}.{tool['name']}",
                  ToolOption(tool["name"], tool["description"] or "no description",
                             annotations_text(tool["annotations"]),
                             read_only=(tool["annotations"] or {}).get("readOnlyHint") is True))
                 for tool in server.tools]
        offered |= {value for value, _ in tools}
        if tools:
            groups.append((f"{server.name} ({owner} server)", tools))
    stale = [(name, ToolOption(name, "cannot be used any more", (
        f"its server {name.partition('.')[0]!r} no longer exists" if name.partition(".")[0] not in names
        else "its server no longer lists it"), offered=False)) for name in current if name not in offered]
    return groups + ([("No longer offered: untick these", stale)] if stale else [])


# The name of each tool's "Ask before calling" input (TOOL-7): ``approval:<tool>``.
APPROVAL_INPUT = "approval:"


def approval_select(*, tool: str, option: ToolOption, chosen: str, id_: str, about: str) -> SafeString:
    """The tool's "Ask before calling" select beside its annotations. Its default says so,
    and a read-only tool's "When it may change something" says that it then never asks."""
    default = approval_default(tool)

    def text(policy: str) -> str:
        words = APPROVAL_LABELS[policy] + (" (default)" if policy == default else "")
        if policy == "side_effects" and option.read_only:
            return words + ": it only reads, so never"
        return words + (": before writing, not before reading" if policy == "side_effects" and option.reads_sometimes
                        else "")

    options = format_html_join("", '<option value="{}"{}>{}</option>', (
        (policy, mark_safe(" selected") if policy == chosen else "", text(policy)) for policy in APPROVAL_POLICIES))
    # The label is the same under every tool; the tool's line describes it to a screen reader
    # (a description, not the name: only the checkbox is labelled by the tool's name).
    return format_html('<span class="tool-approval"><label for="{}">Ask before calling</label>'
                       '<select name="{}{}" id="{}" aria-describedby="{}">{}</select></span>',
                       id_, APPROVAL_INPUT, tool, id_, about, options)


class ToolPicker(forms.CheckboxSelectMultiple):
    """The tools as a wide list, grouped by server, each with what it does on its own line,
    instead of Django's narrow column of long labels; beside each, whether a person says yes
    before it acts (``approvals``: the policies to show, set by the form)."""

    approvals: dict[str, str] = {}

    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None) -> SafeString:
        chosen = {str(v) for v in (value or [])}
        base = (attrs or {}).get("id") or f"id_{name}"
        groups = []
        index = 0
        for group, options in self.choices:
            rows = []
            for option_value, option in options:
                option = option if isinstance(option, ToolOption) else ToolOption(str(option), "")
                value = str(option_value)
                approval = approval_select(tool=value, option=option, id_=f"{base}_{index}_approval",
                                           about=f"{base}_{index}_about",
                                           chosen=self.approvals.get(value, approval_default(value))) \
                    if option.offered else ""
                rows.append(format_html(
                    '<li><label for="{}_{}"><input type="checkbox" name="{}" value="{}" id="{}_{}"{}>'
                    '<span class="tool-option" id="{}_{}_about"><code class="tool-name">{}</code>'
                    '<span class="tool-description">{}</span>{}</span></label>{}</li>',
                    base, index, name, option_value, base, index, mark_safe(" checked") if value in chosen
                    else "", base, index, option.name, option.description,
                    format_html('<span class="tool-note">{}</span>', option.note) if option.note else "", approval))
                index += 1
            groups.append(format_html('<fieldset class="tool-group"><legend>{}</legend><ul>{}</ul></fieldset>',
                                      group, mark_safe("".join(rows))))
        return format_html('<div class="tool-picker" id="{}">{}</div>', base, mark_safe("".join(groups)))

    def id_for_label(self, id_: str, index: str | None = None) -> str:
        return "" if index is None else f"{id_}_{index}"  # the list has no one input to label


class ApprovalInputs(forms.Widget):
    """Reads the picker's "Ask before calling" selects; the picker draws them beside the tools."""

    def value_from_datadict(self, data: Any, files: Any, name: str) -> dict[str, str]:
        return {key.removeprefix(APPROVAL_INPUT): str(data.get(key)) for key in data if key.startswith(APPROVAL_INPUT)}

    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None) -> SafeString:
        return mark_safe("")


class ApprovalsField(forms.Field):
    """``{tool: policy}`` as the page posts it; the agent services check the values (TOOL-7).
    Changed only when a posted select differs: a page without them changes nothing."""

    widget = ApprovalInputs

    def to_python(self, value: Any) -> dict[str, str]:
        return dict(value) if isinstance(value, dict) else {}

    def has_changed(self, initial: Any, data: Any) -> bool:
        return any((initial or {}).get(tool) != policy for tool, policy in (data or {}).items())


class MemoryApprovalSelect(forms.Widget):
    """The ``memory`` tool's "Ask before calling" (MEM-2, TOOL-7) under "Memory across
    sessions": the tool comes with memory, not from the list of tools, so its policy sits
    here, shown and posted only while memory is on (agent_memory.js). The select posts as
    ``approval:memory``, which ``ApprovalsField`` reads with the others."""

    approval: str = approval_default(MEMORY_TOOL)
    memory_on: bool = False

    def value_from_datadict(self, data: Any, files: Any, name: str) -> None:
        return None  # read by ApprovalsField

    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None) -> SafeString:
        base = (attrs or {}).get("id") or f"id_{name}"
        option = ToolOption(MEMORY_TOOL, "", reads_sometimes=builtin_reads_sometimes(MEMORY_TOOL))
        select = approval_select(tool=MEMORY_TOOL, option=option, chosen=self.approval, id_=base,
                                 about=f"{base}_about")
        if not self.memory_on:  # a disabled select is not posted: memory off leaves its policy alone
            select = mark_safe(select.replace("<select ", "<select disabled ", 1))
        return format_html('<div class="memory-approval" id="id_memory_tool_policy"{}><span id="{}_about">'
                           "<code>memory</code>: the tool that reads and writes the person's notes</span>{}</div>",
                           "" if self.memory_on else mark_safe(" hidden"), base, select)


def memory_help() -> str:
    """What memory does, in plain words, with the bound in force (MEM-1..4)."""
    return (
        "Each person who talks with this agent gets a memory of their own: short notes the agent keeps "
        "about them across their conversations, with a memory tool. Every request of that person's later "
        "conversations carries the notes, after the instructions. Each person sees, edits and erases their "
        "own notes in the chat's Memory panel, and can turn memory off for themselves. Nobody else sees "
        "them; an operator reads them only through an audited read in this console. Memory is bounded "
        f"(AGENTLOOM_MEMORY_MAX_CHARS: {settings.AGENTLOOM_MEMORY_MAX_CHARS:,} characters per person) and "
        "costs tokens in every request: the version's usage page shows how many. \"Ask before calling\" sets whether a "
        "person says yes before the memory tool acts; \"When it may change something\" asks before it "
        "writes, not before it reads. Frozen at publish.")


def _limit_input(name: str) -> forms.IntegerField:
    # No bounds here: the service's rule (1 to MAX_LIMIT) gives the message, as in the API.
    return forms.IntegerField(required=False, label=name.removeprefix("max_").replace("_", " ").capitalize(),
                              help_text=f"{LIMIT_HELP[name]} Empty: the platform default.",
                              widget=forms.NumberInput(attrs={"min": 1, "max": MAX_LIMIT, "step": 1}))


class AgentAdminForm(forms.ModelForm):
    tools = forms.MultipleChoiceField(required=False, widget=ToolPicker)
    tool_approvals = ApprovalsField(required=False, label="Ask before calling")
    tool_overrides = forms.JSONField(
        required=False, initial=dict,
        help_text='Per server tool, what you decide against its annotations, e.g. {"git.git_commit": '
                  '{"idempotent": true}} lets a pending call run again on resume. Whether a person says yes '
                  'before a tool acts is "Ask before calling" beside each tool above. Frozen at publish.')
    context_ratio = forms.FloatField(
        initial=POLICY_DEFAULTS["context_ratio"],
        help_text="Compaction triggers at effective input x this ratio (0 < target < context <= 1).",
    )
    target_ratio = forms.FloatField(
        initial=POLICY_DEFAULTS["target_ratio"], help_text="What a compaction aims for; below context_ratio."
    )
    user_turns = forms.IntegerField(required=False, help_text="Also compact after this many questions; empty = off.")
    model_steps = forms.IntegerField(required=False, help_text="Also compact after this many model steps; empty = off.")
    max_compaction_calls = forms.IntegerField(
        initial=POLICY_DEFAULTS["max_compaction_calls"],
        help_text=f"Summary calls per compaction, 1 to {MAX_COMPACTION_CALLS}.",
    )
    prepare_ratio = forms.FloatField(
        required=False,
        help_text="A summary is prepared in the background from effective input x this ratio, so compaction "
                  "costs no waiting (between target and context ratio); empty = halfway between them.",
    )
    # CTX-47: unticked, a compaction goes straight to a summary (a model call).
    mask_tool_results = forms.BooleanField(
        required=False, initial=POLICY_DEFAULTS["mask_tool_results"], label="Fold older tool results first",
        help_text="At a compaction, older tool results are first replaced by short notes the agent can read "
                  "back whole (read_record), with no model call; a summary is asked for only when that is not "
                  "enough. The read_record tool is then offered to an agent with tools even when not chosen above. "
                  "Frozen at publish.",
    )

    memory = forms.BooleanField(required=False, label="Memory across sessions")
    memory_approval = forms.Field(required=False, label="The memory tool", widget=MemoryApprovalSelect)

    max_model_calls = _limit_input("max_model_calls")
    max_tool_calls = _limit_input("max_tool_calls")
    max_wall_seconds = _limit_input("max_wall_seconds")
    max_depth = _limit_input("max_depth")

    class Meta:
        model = Agent
        fields = ["space", "name", "instructions", "model_connection", "verify_before_complete", "memory",
                  "call_log_retention_days"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        current = list(self.instance.tools or []) if self.instance.pk else []
        # Stored names outside the registry stay visible, so saving reports them instead of
        # dropping them silently.
        choices = tool_choices(current)
        cast(forms.MultipleChoiceField, self.fields["tools"]).choices = choices  # declared above
        if "model_connection" in self.fields:  # the ModelForm's field of the foreign key
            cast(forms.ModelChoiceField, self.fields["model_connection"]).queryset = (
                ModelConnection.objects.defer("api_key").select_related("space"))
        overrides = self.instance.tool_overrides if self.instance.pk and isinstance(
            self.instance.tool_overrides, dict) else {}
        offered = [value for _, options in choices for value, option in options if option.offered]
        self.initial["tool_approvals"] = {tool: approval_chosen(tool, overrides) for tool in [*offered, MEMORY_TOOL]}
        picker = cast(ToolPicker, self.fields["tools"].widget)
        picker.approvals = {**self.initial["tool_approvals"], **(self["tool_approvals"].data if self.is_bound else {})}
        self.fields["memory"].help_text = memory_help()
        approval = cast(MemoryApprovalSelect, self.fields["memory_approval"].widget)
        approval.approval = picker.approvals[MEMORY_TOOL]
        approval.memory_on = bool(self["memory"].value())
        if self.instance.pk:
            self.initial["tools"] = current
            # The approvals are the selects beside the tools; this field keeps the rest.
            self.initial["tool_overrides"] = {
                tool: rest for tool, values in overrides.items()
                if isinstance(values, dict) and (rest := {k: v for k, v in values.items() if k != "approval"})}
            try:
                policy = context_policy_normalize(self.instance.context_policy)
            except ValidationFailed:
                policy = dict(self.instance.context_policy or {})
            for name in POLICY_FIELDS:
                self.initial[name] = policy.get(name)
            limits = self.instance.limits if isinstance(self.instance.limits, dict) else {}
            for name in LIMIT_FIELDS:
                self.initial[name] = limits.get(name)

    def space_id(self) -> int | None:
        if self.instance.pk:
            return self.instance.space_id
        space = self.cleaned_data.get("space")
        return space.pk if space is not None else None

    def service_data(self) -> dict[str, Any]:
        """The service's input; the form always carries the whole policy."""
        cleaned = self.cleaned_data
        data = {name: cleaned.get(name) for name in DRAFT_FORM_FIELDS if name in self.fields}
        tools = [str(tool) for tool in cleaned.get("tools") or []]
        data["tools"] = tools
        data["tool_overrides"] = self._overrides_with_approvals(tools, cleaned.get("tool_overrides") or {})
        data["context_policy"] = {name: cleaned.get(name) for name in POLICY_FIELDS}
        # Empty inputs are left out: absent means the platform default (LOOP-2).
        data["limits"] = {name: cleaned[name] for name in LIMIT_FIELDS if cleaned.get(name) is not None}
        return data

    def _overrides_with_approvals(self, tools: list[str], overrides: Any) -> Any:
        """The JSON field's overrides with each chosen tool's "Ask before calling" (TOOL-7): the
        posted select, else what the draft had; a default is left out, so the draft says only
        what the admin decided."""
        if not isinstance(overrides, dict):
            return overrides  # the services say it must be an object
        stored = self.instance.tool_overrides if self.instance.pk and isinstance(
            self.instance.tool_overrides, dict) else {}
        posted = self.cleaned_data.get("tool_approvals") or {}
        merged = {tool: dict(values) if isinstance(values, dict) else values for tool, values in overrides.items()}
        for tool in approval_tools(tools, memory=bool(self.cleaned_data.get("memory"))):
            policy = posted.get(tool, approval_chosen(tool, stored))
            values = merged.get(tool, {})
            if not isinstance(values, dict):
                continue
            values = {k: v for k, v in values.items() if k != "approval"}
            if policy != approval_default(tool):
                values["approval"] = policy
            merged.pop(tool, None)
            if values:
                merged[tool] = values
        return merged

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        written = cleaned.get("tool_overrides")
        if isinstance(written, dict) and any(isinstance(v, dict) and "approval" in v for v in written.values()):
            self.add_error("tool_overrides", 'Set "approval" with "Ask before calling" beside each tool above, '
                                             "not here.")
        space_id = self.space_id()
        if self.errors or space_id is None:
            return cleaned
        try:
            agent_draft_validate(agent=self.instance if self.instance.pk else None, space_id=space_id,
                                 data=self.service_data())
        except ValidationFailed as exc:
            for name, message in exc.fields.items():
                # context_policy.target_ratio and limits.max_depth are inputs of their own.
                section, _, rest = name.partition(".")
                field = rest if section in ("context_policy", "limits") and rest else section
                self.add_error(field if field in self.fields else None, message)
        return cleaned
