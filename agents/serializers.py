"""Input validation and output shapes of the agents API (SPEC §9, CTX-20, CTX-21).

Inputs check types and resolve the model connection within the caller's reach; the
rules (tools in the registry, limits, the CTX-20 policy) live in the agent services so
the admin form applies the same ones.
"""
from __future__ import annotations

from typing import Any

from django.db.models import Max
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agents.models import Agent, AgentVersion
from agents.selectors import agent_budget, version_budget
from agents.server_tools import version_tool_drift
from agents.tool_approvals import version_approvals
from agents.tool_registry import APPROVAL_POLICIES
from core.api.fields import MAX_ID, BoundedJSONField, StrictCharField
from core.errors import NotFound
from models_catalog.selectors import connection_get_for_user
from models_catalog.serializers import RejectUnknownFields


class ConnectionRefField(serializers.IntegerField):
    """A model connection id, resolved within the caller's spaces (context ``user``).

    One message for "no such id" and "not yours", so ids of other spaces do not leak.
    """

    def run_validation(self, data: Any = serializers.empty):
        pk = super().run_validation(data)  # an integer >= min_value by now
        try:
            return connection_get_for_user(connection_id=pk, user=self.context["user"])
        except NotFound:
            raise serializers.ValidationError("No such model connection in your spaces.") from None


class AgentUpdateIn(RejectUnknownFields):
    """A partial update; ``context_policy`` changes only the fields it names (null resets)."""

    name = StrictCharField(required=False, max_length=200)
    instructions = StrictCharField(required=False, allow_blank=True, trim_whitespace=False, max_length=100_000)
    model_connection = ConnectionRefField(required=False, min_value=1)
    tools = serializers.ListField(child=StrictCharField(max_length=200), required=False, max_length=64,
                                  help_text='Built-ins ("calculator") and server tools ("<server>.<tool>", TOOL-3).')
    tool_overrides = BoundedJSONField(required=False, allow_null=True,
                                      help_text='Per tool: {"<tool>": {"approval": "never" | "side_effects" | '
                                                '"always"}} for any chosen tool, and for "memory" while the '
                                                "agent's memory is on (MEM-2: side_effects asks before its writes "
                                                'only) (TOOL-7; absent: side_effects for '
                                                'server tools, never for built-ins); a server tool also takes '
                                                'idempotent and observes_screen, true or false (TOOL-5). Frozen at '
                                                'publish.')
    context_policy = BoundedJSONField(required=False, allow_null=True,
                                      help_text="Any of context_ratio, target_ratio, user_turns, model_steps, "
                                                "max_compaction_calls (CTX-20), prepare_ratio (CTX-45), "
                                                "mask_tool_results (CTX-47: true/false).")
    limits = BoundedJSONField(required=False, allow_null=True,
                              help_text="max_model_calls, max_tool_calls, max_wall_seconds, max_depth (LOOP-2).")
    verify_before_complete = serializers.BooleanField(required=False)
    memory = serializers.BooleanField(
        required=False, help_text="MEM-1: each person gets a memory this agent keeps across their sessions (the "
                                  "memory tool, and its files in every request). Off by default; frozen at publish.")
    call_log_retention_days = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=36_500,
        help_text="Drop the inspector's copies of model calls after this many days (records stay); null keeps them.")


class AgentCreateIn(AgentUpdateIn):
    space = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                     help_text="Default: the model connection's space.")
    name = StrictCharField(max_length=200)
    model_connection = ConnectionRefField(min_value=1)


class BudgetOut(serializers.Serializer):
    context_window = serializers.IntegerField()
    max_output_tokens = serializers.IntegerField()
    safety_margin_tokens = serializers.IntegerField()
    effective_input_tokens = serializers.IntegerField(help_text=(
        "CTX-21: the window less the output reserve and the safety margin, under what the server proved (CAT-9)."))
    trigger_tokens = serializers.IntegerField(allow_null=True, help_text="effective input x context_ratio (CTX-22).")
    target_tokens = serializers.IntegerField(allow_null=True, help_text="effective input x target_ratio.")
    legacy_policy = serializers.BooleanField()


class OperatorsOnly:
    """Hides ``instructions`` from whoever does not administer the agent's space: the
    person chatting may not see them (SPEC §9), only the space's admins who write them.
    The caller's administered space ids come in the context as ``administers``."""

    def hide_from_members(self, data: dict[str, Any], space_id: int) -> dict[str, Any]:
        if space_id not in getattr(self, "context", {}).get("administers", ()):
            data["instructions"] = None
        return data


class AgentOut(OperatorsOnly, serializers.ModelSerializer):
    space = serializers.IntegerField(source="space_id")
    instructions = serializers.CharField(allow_null=True, help_text="Only for the space's admins; null for members.")
    model_connection = serializers.IntegerField(source="model_connection_id")
    model = serializers.CharField(source="model_connection.model")
    budget = serializers.SerializerMethodField()
    latest_version = serializers.SerializerMethodField()

    class Meta:
        model = Agent
        fields = ["id", "space", "name", "instructions", "model_connection", "model", "tools", "tool_overrides",
                  "context_policy",
                  "limits", "verify_before_complete", "memory", "call_log_retention_days", "budget", "latest_version",
                  "created_at", "updated_at"]

    def to_representation(self, agent: Agent) -> dict[str, Any]:
        return self.hide_from_members(super().to_representation(agent), agent.space_id)

    @extend_schema_field(BudgetOut)
    def get_budget(self, agent: Agent) -> dict[str, Any]:
        return BudgetOut(agent_budget(agent=agent)).data

    def get_latest_version(self, agent: Agent) -> int | None:
        if hasattr(agent, "latest_version"):  # annotated by the list selector
            return agent.latest_version
        return agent.versions.aggregate(n=Max("version"))["n"]


class FrozenToolOut(serializers.Serializer):
    ref = serializers.CharField(help_text="<server>.<tool> as the agent chose it.")
    function = serializers.CharField(help_text="The function name requests carry (TOOL-3).")
    server = serializers.CharField()
    tool = serializers.CharField()
    description = serializers.CharField()
    input_schema = serializers.JSONField()
    annotations = serializers.JSONField()
    idempotent = serializers.BooleanField(help_text="Re-run on resume (TOOL-5).")
    observes_screen = serializers.BooleanField()
    approval = serializers.ChoiceField(choices=APPROVAL_POLICIES, help_text=(
        "TOOL-7: whether a call waits for a person: never, side_effects (unless annotated readOnlyHint) or always."))
    drift = serializers.JSONField(allow_null=True, help_text="How the server's last listing differs, or null.")
    drift_text = serializers.CharField()


class VersionOut(OperatorsOnly, serializers.ModelSerializer):
    """A published version: frozen, read-only (RUN-4)."""

    agent = serializers.IntegerField(source="agent_id")
    instructions = serializers.CharField(allow_null=True, help_text="Only for the space's admins; null for members.")
    model_connection = serializers.IntegerField(source="model_connection_id", allow_null=True)
    published_by = serializers.IntegerField(source="published_by_id", allow_null=True)
    budget = serializers.SerializerMethodField()
    server_tools = serializers.SerializerMethodField()
    tool_approvals = serializers.SerializerMethodField(help_text=(
        "TOOL-7: each tool's approval policy as frozen, built-ins and server tools, defaults included."))

    class Meta:
        model = AgentVersion
        fields = ["id", "agent", "version", "name", "instructions", "tools", "server_tools", "tool_approvals",
                  "model_connection",
                  "provider",
                  "base_url", "model", "context_window", "max_output_tokens", "safety_margin_tokens",
                  "context_policy", "limits", "verify_before_complete", "memory", "budget", "published_by",
                  "published_at"]

    def to_representation(self, version: AgentVersion) -> dict[str, Any]:
        return self.hide_from_members(super().to_representation(version), version.agent.space_id)

    @extend_schema_field(BudgetOut)
    def get_budget(self, version: AgentVersion) -> dict[str, Any]:
        return BudgetOut(version_budget(version=version)).data

    @extend_schema_field(serializers.DictField(child=serializers.ChoiceField(choices=APPROVAL_POLICIES)))
    def get_tool_approvals(self, version: AgentVersion) -> dict[str, str]:
        return {shown.name: shown.policy for shown in version_approvals(version)}

    @extend_schema_field(FrozenToolOut(many=True))
    def get_server_tools(self, version: AgentVersion) -> list[dict[str, Any]]:
        """The frozen server tools, each with how the server's last listing differs now."""
        return [{key: entry[key] for key in FrozenToolOut().fields} for entry in version_tool_drift(version)]
