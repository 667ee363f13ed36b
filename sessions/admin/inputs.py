"""Tool servers' questions in the console (TOOL-10): which server asked in which run, how
(a form or a URL), how it ended, who answered and how long it took.

Read-only: an answer is the session's creator's to give, never an operator's. The list
shows plain columns only; the message, the schema or URL and the answer are conversation
content, never shown here (the answer's clear copy, ``delivery``, not even read).
"""
from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from core.console_lists import ConsoleListMixin
from core.readonly_admin import ReadOnlyAdminMixin
from sessions.admin.waits import age_text
from sessions.models import ToolInput


@admin.register(ToolInput)
class ToolInputAdmin(ConsoleListMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "agent", "server", "mode", "status", "waited", "answered_by", "answered_at", "run_link",
                    "created_at"]
    list_filter = ["status", "mode", ("run__version__agent", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["answered_by", "run__version"]
    search_fields = ["=run__id", "=session__id", "server"]
    # One tuple for both: a list would be typed as `fields` only (django-stubs).
    fields = readonly_fields = ("agent", "server", "mode", "status", "waited", "answered_by", "answered_at",
                                "run_link", "call_id", "attempt", "created_at")

    def get_queryset(self, request):
        return super().get_queryset(request).defer("message", "schema", "url", "content", "delivery")

    @admin.display(description="Agent", ordering="run__version__name")
    def agent(self, obj: ToolInput) -> str:
        return str(obj.run.version)

    @admin.display(description="Waited")
    def waited(self, obj: ToolInput) -> str:
        """How long the server waited for the person: until now while it still waits."""
        end = obj.answered_at or (timezone.now() if obj.status == ToolInput.Status.AWAITING else None)
        if end is None:
            return age_text(None)
        text = age_text(int((end - obj.created_at).total_seconds() * 1000))
        return f"{text} so far" if obj.answered_at is None else text

    @admin.display(description="Run", ordering="run_id")
    def run_link(self, obj: ToolInput) -> str:
        return format_html('<a href="{}">Run {}</a> · <a href="{}">session {}</a>',
                           reverse("admin:agent_sessions_run_change", args=[obj.run_id]), obj.run_id,
                           reverse("admin:agent_sessions_session_change", args=[obj.session_id]), obj.session_id)
