"""Summaries prepared in the background (CTX-45), read-only in the console.

The list and each row's page show plain columns only: status and the reason it ended,
tokens, the prefix the summary covers, the times, and the figures of the metrics. The
``summary`` and the ``snapshot`` are conversation text and are shown nowhere here (nor
read: the list defers them); a committed summary is read, audited, on the session's
records page.
"""
from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from core.console_lists import ConsoleListMixin
from core.readonly_admin import ReadOnlyAdminMixin
from sessions.admin import pages
from sessions.admin.display import metric_number
from sessions.admin.waits import seconds_text
from sessions.models import PreparedCompaction


def _metric(obj: PreparedCompaction, name: str) -> int | None:
    return metric_number(obj.metrics.get(name)) if isinstance(obj.metrics, dict) else None


@admin.register(PreparedCompaction)
class PreparedCompactionAdmin(ConsoleListMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "session_link", "run_link", "status", "reason", "tokens", "prefix", "summary_calls",
                    "duration", "created_at", "ready_at", "ended_at"]
    list_filter = ["status"]
    search_fields = ["=session__id", "=run__id"]
    # One tuple for both: a list would be typed as `fields` only (django-stubs).
    fields = readonly_fields = ("session_link", "run_link", "instance_id", "status", "reason", "tokens", "prefix",
                                "summary_calls", "duration", "estimator_id", "policy", "metrics", "claimed_at",
                                "lease_until", "created_at", "ready_at", "ended_at")

    def get_queryset(self, request):
        return super().get_queryset(request).defer("summary", "snapshot")

    @admin.display(description="Session", ordering="session_id")
    def session_link(self, obj: PreparedCompaction) -> str:
        return format_html('<a href="{}">Session {}</a> · <a href="{}">compactions</a>',
                           reverse("admin:agent_sessions_session_change", args=[obj.session_id]), obj.session_id,
                           pages.admin_url("session_compactions", obj.session_id))

    @admin.display(description="Run", ordering="run_id")
    def run_link(self, obj: PreparedCompaction) -> str:
        return format_html('<a href="{}">Run {}</a>', reverse("admin:agent_sessions_run_change", args=[obj.run_id]),
                           obj.run_id)

    @admin.display(description="Summary calls")
    def summary_calls(self, obj: PreparedCompaction) -> int | None:
        return _metric(obj, "summary_calls")  # None: shown as the admin's empty value

    @admin.display(description="Took")
    def duration(self, obj: PreparedCompaction) -> str | None:
        took = _metric(obj, "duration_ms")
        return None if took is None else seconds_text(took)
