from __future__ import annotations

from django.contrib import admin

from agentloom.agents.models import Agent, AgentVersion


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["name", "space", "model_connection", "updated_at"]
    list_select_related = ["space", "model_connection"]
    search_fields = ["name"]
    list_filter = ["space"]


@admin.register(AgentVersion)
class AgentVersionAdmin(admin.ModelAdmin):
    """Published versions are read-only: they are frozen by design (RUN-4)."""

    list_display = ["name", "version", "agent", "model", "context_window", "published_at"]
    list_select_related = ["agent"]
    list_filter = ["agent__space"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
