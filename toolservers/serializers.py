"""Input checks and output shapes of the tool-servers API (SPEC §9, TOOL-1, TOOL-2).

Inputs check types only; the rules live in ``toolservers.validation`` and the services,
so the console applies the same. Header values are inputs only: no output here has a
field that could carry one (``header_hints`` are masked). How an operator's server is
started (``operator``) is shown to operators only (``selectors.sees_operator_commands``).
"""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api.fields import MAX_ID, StrictCharField
from models_catalog.serializers import RejectUnknownFields
from toolservers.models import ToolServer
from toolservers.selectors import operator_servers


class ToolServerUpdateIn(RejectUnknownFields):
    name = StrictCharField(required=False, max_length=31)
    url = StrictCharField(required=False, max_length=500)
    headers = serializers.DictField(child=StrictCharField(max_length=8_192, trim_whitespace=False), required=False,
                                    allow_null=True, write_only=True,
                                    help_text="Name → value (a bearer token, an API-key header). Write-only: "
                                              "replaces all stored headers; {} or null removes them.")
    timeout_seconds = serializers.IntegerField(required=False, help_text="Per call, 1 to 3600 (default 60).")


class ToolServerCreateIn(ToolServerUpdateIn):
    space = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                     help_text="Default: the one space you administer.")
    name = StrictCharField(max_length=31, help_text="^[a-z][a-z0-9_]{0,30}$; agents name tools <name>.<tool>.")
    url = StrictCharField(max_length=500, help_text="The MCP endpoint (Streamable HTTP, or the older HTTP+SSE).")


class ServerToolOut(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    input_schema = serializers.JSONField()
    annotations = serializers.JSONField()


class OperatorOut(serializers.Serializer):
    command = serializers.CharField()
    args = serializers.ListField(child=serializers.CharField())
    env_names = serializers.ListField(child=serializers.CharField(), help_text="Values are never shown.")
    spaces = serializers.ListField(child=serializers.IntegerField(), allow_null=True)


class ToolServerOut(serializers.ModelSerializer):
    space = serializers.IntegerField(source="space_id", allow_null=True)
    tools = serializers.SerializerMethodField()
    operator = serializers.SerializerMethodField()

    class Meta:
        model = ToolServer
        fields = ["id", "kind", "space", "name", "url", "transport", "header_hints", "timeout_seconds",
                  "protocol_version", "server_info", "tools", "skipped", "listed_at", "list_error", "operator",
                  "created_at", "updated_at"]

    @extend_schema_field(ServerToolOut(many=True))
    def get_tools(self, server: ToolServer) -> list[dict[str, Any]]:
        return server.tools

    @extend_schema_field(OperatorOut(allow_null=True))
    def get_operator(self, server: ToolServer) -> dict[str, Any] | None:
        """How an operator's server is started: for operators only (context
        ``shows_commands``); null for everyone else, whom ``kind`` tells it is the operator's."""
        config = operator_servers().get(server.name) if server.space_id is None else None
        if config is None or not self.context.get("shows_commands"):
            return None
        return {"command": config.command, "args": list(config.args), "env_names": sorted(config.env),
                "spaces": list(config.spaces) if config.spaces is not None else None}


class ChangesOut(serializers.Serializer):
    added = serializers.ListField(child=serializers.CharField())
    removed = serializers.ListField(child=serializers.CharField())
    changed = serializers.ListField(child=serializers.JSONField())


class RefreshOut(ToolServerOut):
    changes = serializers.SerializerMethodField()

    class Meta(ToolServerOut.Meta):
        fields = [*ToolServerOut.Meta.fields, "changes"]

    @extend_schema_field(ChangesOut)
    def get_changes(self, server: ToolServer) -> dict[str, Any]:
        return self.context["changes"]
