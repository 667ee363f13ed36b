"""API tokens in the console: who holds one for which client, until when; revoking is
deleting. Keys are never shown (only their hashes exist) and never made here."""
from __future__ import annotations

from django.contrib import admin
from django.utils import timezone

from agentloom.accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["user", "client", "created_at", "expires_at", "live"]
    list_select_related = ["user"]
    list_filter = ["client"]
    search_fields = ["user__username", "client"]
    fields = ["user", "client", "created_at", "expires_at"]
    readonly_fields = fields

    @admin.display(description="Live", boolean=True)
    def live(self, obj: ApiToken) -> bool:
        return obj.expires_at > timezone.now()

    def has_add_permission(self, request) -> bool:
        return False  # a token is issued to the person who logs in, never typed here

    def has_change_permission(self, request, obj=None) -> bool:
        return False
