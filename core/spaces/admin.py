from __future__ import annotations

from django.contrib import admin

from core.console_lists import ConsoleListMixin
from core.spaces.models import Membership, Space


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Space)
class SpaceAdmin(ConsoleListMixin, admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(ConsoleListMixin, admin.ModelAdmin):
    list_display = ["user", "space", "role", "created_at"]
    list_filter = ["role"]
    list_select_related = ["user", "space"]
    autocomplete_fields = ["user", "space"]
