"""Approvals in the console (TOOL-8/9): every call that asked a person, who decided what
and when, and how long the waiting ones have waited, by agent.

Read-only: a decision is the session's creator's to make, never an operator's. The list
shows plain columns only; the arguments and the reason are conversation content and stay
on the session's audited pages.
"""
from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from core.console_lists import ConsoleListMixin
from core.readonly_admin import ReadOnlyAdminMixin
from sessions.admin.waits import age_text
from sessions.models import ToolApproval


@admin.register(ToolApproval)
class ToolApprovalAdmin(ConsoleListMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "agent", "tool_name", "status", "waited", "decided_by", "decided_at", "scope", "run_link",
                    "created_at"]
    list_filter = ["status", "scope", ("run__version__agent", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["decided_by", "run__version"]
    search_fields = ["=run__id", "=session__id", "tool", "label"]
    # One tuple for both: a list would be typed as `fields` only (django-stubs).
    fields = readonly_fields = ("agent", "tool_name", "why", "status", "waited", "scope", "decided_by", "decided_at",
                                "started_at", "run_link", "call_id", "step", "index", "created_at")

    def get_queryset(self, request):
        return super().get_queryset(request).defer("arguments", "reason")

    @admin.display(description="Agent", ordering="run__version__name")
    def agent(self, obj: ToolApproval) -> str:
        return str(obj.run.version)

    @admin.display(description="Tool", ordering="tool")
    def tool_name(self, obj: ToolApproval) -> str:
        return obj.label or obj.tool

    @admin.display(description="Waited")
    def waited(self, obj: ToolApproval) -> str:
        """How long the call waited: until now while it still waits."""
        end = obj.decided_at or (timezone.now() if obj.status == ToolApproval.Status.AWAITING else None)
        if end is None:
            return age_text(None)
        text = age_text(int((end - obj.created_at).total_seconds() * 1000))
        return f"{text} so far" if obj.decided_at is None else text

    @admin.display(description="Run", ordering="run_id")
    def run_link(self, obj: ToolApproval) -> str:
        return format_html('<a href="{}">Run {}</a> · <a href="{}">session {}</a>',
                           reverse("admin:agent_sessions_run_change", args=[obj.run_id]), obj.run_id,
                           reverse("admin:agent_sessions_session_change", args=[obj.session_id]), obj.session_id)
