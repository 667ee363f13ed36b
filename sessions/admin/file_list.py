"""Every file people attached (RUN-13), read-only in the console: how big, whose, in which
session and space, when, and whether a question used it — with the total size of the
files listed, so an operator sees what attachments take and who holds most of it.

The list reads plain columns only: a file's name is the person's words and its bytes and
text their content, all encrypted, so none is read here (the list defers them). Each row
links to its session, and to the audited records page where the question that carried the
file lists its name; the audited download is on that page.
"""
from __future__ import annotations

from django.contrib import admin
from django.db.models import Count, Sum
from django.urls import reverse
from django.utils.html import format_html

from core.console_lists import ConsoleListMixin
from core.readonly_admin import ReadOnlyAdminMixin
from sessions.admin import pages
from sessions.models import SessionFile


def size_text(size: int | None) -> str:
    """Bytes for people: "812 bytes", "13 KB", "4.2 MB", "1.30 GB"."""
    size = size or 0
    if size < 1024:
        return f"{size:,} byte{'' if size == 1 else 's'}"
    if size < 1024**2:
        return f"{size / 1024:,.0f} KB"
    if size < 1024**3:
        return f"{size / 1024**2:,.1f} MB"
    return f"{size / 1024**3:,.2f} GB"


@admin.register(SessionFile)
class SessionFileAdmin(ConsoleListMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    change_list_template = "admin/agent_sessions/sessionfile/change_list.html"
    list_display = ["id", "size_column", "uploaded_by", "session_link", "space", "kind", "content_type", "used",
                    "created_at"]
    list_display_links = ["id"]
    list_select_related = ["uploaded_by", "session__space"]
    list_filter = [("uploaded_by", admin.RelatedOnlyFieldListFilter),
                   ("session__space", admin.RelatedOnlyFieldListFilter), "kind"]
    search_fields = ["=id", "=session__id", "uploaded_by__username"]
    date_hierarchy = "created_at"
    ordering = ["-created_at", "-id"]
    # One tuple for both: a list would be typed as `fields` only (django-stubs).
    fields = readonly_fields = ("session_link", "space", "uploaded_by", "kind", "content_type", "size_column",
                                "encoding", "pages", "pages_read", "width", "height", "used", "created_at")

    def get_queryset(self, request):
        return super().get_queryset(request).defer("name", "sha256", "data", "text", "session__title")

    def changelist_view(self, request, extra_context=None):
        response = super().changelist_view(request, extra_context)
        changelist = getattr(response, "context_data", {}).get("cl")
        if changelist is not None:  # the list itself (an action's redirect has none)
            totals = changelist.queryset.order_by().aggregate(files=Count("id"), size=Sum("size"))
            response.context_data["files_total"] = {"files": totals["files"], "size": size_text(totals["size"])}
        return response

    @admin.display(description="Size", ordering="size")
    def size_column(self, obj: SessionFile) -> str:
        return size_text(obj.size)

    @admin.display(description="Session", ordering="session_id")
    def session_link(self, obj: SessionFile) -> str:
        return format_html('<a href="{}">Session {}</a>',
                           reverse("admin:agent_sessions_session_change", args=[obj.session_id]), obj.session_id)

    @admin.display(description="Space", ordering="session__space__name")
    def space(self, obj: SessionFile) -> str:
        return str(obj.session.space)

    @admin.display(description="Used by")
    def used(self, obj: SessionFile) -> str:
        """The question that carried it (its record, on the audited records page), or not yet."""
        if obj.question_seq is None:
            return "No question yet (attached, not sent)"
        return format_html('<a href="{}">Question, record {}</a>',
                           pages.records_url(obj.session_id, after=max(0, obj.question_seq - 1), limit=1),
                           obj.question_seq)
