"""API tokens in the console: who holds one for which client, until when; revoking is
deleting. Keys are never shown (only their hashes exist) and never made here.

Django's own pages of people and groups are registered again with the console's list
rules (``core.console_lists``), like every other list of the console."""
from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.utils import timezone

from core.accounts.models import ApiToken
from core.console_lists import ConsoleListMixin


@admin.register(ApiToken)
class ApiTokenAdmin(ConsoleListMixin, admin.ModelAdmin):
    list_display = ["user", "client", "created_at", "expires_at", "live"]
    list_select_related = ["user"]
    list_filter = ["client"]
    search_fields = ["user__username", "client"]
    # One tuple for both: a list would be typed as `fields` only (django-stubs).
    fields = readonly_fields = ("user", "client", "created_at", "expires_at")

    @admin.display(description="Live", boolean=True)
    def live(self, obj: ApiToken) -> bool:
        return obj.expires_at > timezone.now()

    def has_add_permission(self, request) -> bool:
        return False  # a token is issued to the person who logs in, never typed here

    def has_change_permission(self, request, obj=None) -> bool:
        return False


admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(User)
class PersonAdmin(ConsoleListMixin, UserAdmin):
    """Django's page of people, with the console's list rules."""


@admin.register(Group)
class PersonGroupAdmin(ConsoleListMixin, GroupAdmin):
    """Django's page of groups, with the console's list rules."""
