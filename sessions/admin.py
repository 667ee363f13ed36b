"""Admin for system-made rows: read-only, encrypted columns deferred in lists."""
from __future__ import annotations

from django.contrib import admin

from sessions.models import (
    AccessAudit,
    CompactionSnapshot,
    Instance,
    Run,
    RunEvent,
    Session,
    SessionMessage,
    SessionView,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Runs, records, snapshots and events are written by the system only."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ["id", "title", "user", "agent", "version", "last_seq", "updated_at"]
    list_select_related = ["user", "agent", "version"]
    list_filter = ["space"]
    search_fields = ["title", "user__username"]
    readonly_fields = ["last_seq", "created_at", "updated_at"]
    raw_id_fields = ["user", "agent", "version", "space"]


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ["id", "session", "status", "attempt", "created_at", "finished_at"]
    list_filter = ["status"]
    list_select_related = ["session"]


@admin.register(Instance)
class InstanceAdmin(ReadOnlyAdmin):
    list_display = ["id", "run", "key", "depth", "user_turns", "model_steps"]
    list_select_related = ["run"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("frame")


@admin.register(SessionMessage)
class SessionMessageAdmin(ReadOnlyAdmin):
    list_display = ["session", "seq", "run", "instance", "kind", "created_at"]
    list_filter = ["kind"]
    list_select_related = ["instance"]
    # Decrypted content is shown on the session records page, which writes an access row.
    exclude = ["message"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("message")


@admin.register(CompactionSnapshot)
class CompactionSnapshotAdmin(ReadOnlyAdmin):
    list_display = ["instance", "revision", "covered_seq", "estimator_id", "created_at"]
    exclude = ["messages"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("messages")


@admin.register(SessionView)
class SessionViewAdmin(ReadOnlyAdmin):
    list_display = ["session", "watermark", "estimator_id", "raw_complete", "created_at"]
    exclude = ["messages"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("messages")


@admin.register(RunEvent)
class RunEventAdmin(ReadOnlyAdmin):
    list_display = ["run", "seq", "type", "created_at"]
    list_filter = ["type"]
    exclude = ["payload"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("payload")


@admin.register(AccessAudit)
class AccessAuditAdmin(ReadOnlyAdmin):
    list_display = ["at", "user", "what", "session", "run"]
    list_filter = ["what"]
