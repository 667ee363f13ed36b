"""People's memory in the console (SPEC §7c, MEM-1, MEM-4): who has a memory for which agent,
how big it is and when it last changed — never what it says — and the one audited door to
its files.

Memory belongs to its person (MEM-1): "nobody else sees it, no staff without an audited
read". So the lists read plain columns only: the owners' list counts files and characters
from the file paths and the sizes every change records (``MemoryChange`` keeps sizes, never
text), and the change log shows who changed what kind of thing when, without paths or text.
The files themselves are on the read page, which writes an ``AccessAudit`` row (``what`` =
``memory``, no session) before it decrypts anything, and only for staff holding the view
permissions of the memory's owner row and of its files (``sessions.staff``'s rule). A
person reading their own memory here is not audited, as in the chat's panel.
"""
from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Count, F, IntegerField, OuterRef, Subquery, Sum
from django.db.models.functions import Coalesce, Length
from django.http import HttpRequest, HttpResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from core.console_lists import ConsoleListMixin
from core.readonly_admin import ReadOnlyAdminMixin
from memory.models import MemoryChange, MemoryFile, MemoryState
from memory.selectors import MemoryOwner, memory_changes, memory_overview
from sessions.admin.pages import object_or_404, render_page
from sessions.services.access_audit import read_audited

# What a change's ``command`` means, for people (the tool's commands, and the person's own).
COMMAND_WORDS = {"create": "wrote a file", "str_replace": "edited a file", "insert": "inserted text",
                 "delete": "deleted", "rename": "renamed", "forget": "forgot everything",
                 "memory_on": "turned memory on", "memory_off": "turned memory off"}


def _of_owner(model: Any) -> Any:
    """The rows of ``model`` of the outer owner row (agent and person; the agent fixes the space)."""
    return model.objects.filter(agent_id=OuterRef("agent_id"), user_id=OuterRef("user_id")).order_by()


def _total(model: Any, expression: Any) -> Coalesce:
    rows = _of_owner(model).values("user_id").annotate(total=Sum(expression)).values("total")
    return Coalesce(Subquery(rows, output_field=IntegerField()), 0)


def owners_with_sizes(queryset: Any) -> Any:
    """Each owner with its files, its characters as the bound counts them (paths, plain, and
    texts, from the recorded sizes: every change says how many characters it took and left)
    and its last change — plain columns only."""
    files = _of_owner(MemoryFile).values("user_id").annotate(n=Count("id")).values("n")
    return queryset.annotate(
        files=Coalesce(Subquery(files, output_field=IntegerField()), 0),
        characters=_total(MemoryFile, Length("path")) + _total(MemoryChange, F("chars_after") - F("chars_before")),
        last_change=Subquery(_of_owner(MemoryChange).order_by("-id").values("created_at")[:1]),
    )


@admin.register(MemoryState)
class MemoryOwnerAdmin(ConsoleListMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """One row per person and agent with a memory (or a choice about it)."""

    list_display = ["user", "agent", "space", "files_column", "characters_column", "use_memory", "last_change_column",
                    "read_link"]
    list_display_links = ["user"]
    list_select_related = ["user", "agent", "space"]
    list_filter = [("space", admin.RelatedOnlyFieldListFilter), ("agent", admin.RelatedOnlyFieldListFilter),
                   "use_memory"]
    search_fields = ["user__username", "agent__name"]
    # One tuple for both: a list would be typed as `fields` only (django-stubs).
    fields = readonly_fields = ("user", "agent", "space", "use_memory", "files_column", "characters_column",
                                "last_change_column", "read_link", "changes_list")

    def get_queryset(self, request):
        return owners_with_sizes(super().get_queryset(request))

    def get_urls(self):
        read = self.admin_site.admin_view(self.read_view)
        return [path("<path:object_id>/read/", read, name="memory_memorystate_read"), *super().get_urls()]

    @admin.display(description="Files", ordering="files")
    def files_column(self, obj: MemoryState) -> int:
        return getattr(obj, "files", 0)

    @admin.display(description="Characters", ordering="characters")
    def characters_column(self, obj: MemoryState) -> str:
        return f"{getattr(obj, 'characters', 0):,}"

    @admin.display(description="Last change", ordering="last_change")
    def last_change_column(self, obj: MemoryState) -> Any:
        return getattr(obj, "last_change", None) or "none yet"

    @admin.display(description="Files and their text")
    def read_link(self, obj: MemoryState) -> str:
        return format_html('<a href="{}">Read (audited)</a>', reverse("admin:memory_memorystate_read", args=[obj.pk]))

    @admin.display(description="Latest changes")
    def changes_list(self, obj: MemoryState) -> str:
        """The owner's last changes, without paths or text (MEM-4's history as staff see it)."""
        changes = memory_changes(owner=MemoryOwner(space_id=obj.space_id, agent_id=obj.agent_id,
                                                   user_id=obj.user_id), limit=20)
        if not changes:
            return "None."
        return format_html('<ul class="memory-changes">{}</ul>', format_html_join(
            "", "<li>{}: {}</li>", ((f"{change.created_at:%Y-%m-%d %H:%M}", change_words(change))
                                    for change in changes)))

    def read_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The owner's files with their text: audited first, unless the reader is the owner."""
        state: MemoryState = object_or_404(self, request, object_id, MemoryFile)
        owner = MemoryOwner(space_id=state.space_id, agent_id=state.agent_id, user_id=state.user_id)
        detail = {"agent": state.agent_id, "agent_name": state.agent.name, "person": state.user_id,
                  "space": state.space_id}
        with read_audited(user=request.user, audited=state.user_id != request.user.pk, what="memory", session=None,
                          detail=detail):
            overview = memory_overview(owner=owner)
        context = {"overview": overview, "owner_row": state, "audited": state.user_id != request.user.pk}
        return render_page(self, request, "memory/read.html", state, "Memory", context)


def change_words(change: MemoryChange) -> str:
    """One change as the console lists it: by whom, what kind, how big — no path, no text."""
    who = "the agent" if change.by == MemoryChange.By.AGENT else "the person"
    where = f"in session {change.session_id}" if change.session_id else "from the memory panel or the API"
    size = (f"{change.chars_before:,} → {change.chars_after:,} characters"
            if change.chars_before or change.chars_after else "")
    return " · ".join(part for part in (f"{who} {COMMAND_WORDS.get(change.command, change.command)}", where, size)
                      if part)


@admin.register(MemoryChange)
class MemoryChangeAdmin(ConsoleListMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Every change of people's memory (MEM-4): who, when, where, what kind and how big —
    never the path or the text, which are the person's."""

    list_display = ["created_at", "user", "agent", "space", "by", "command", "session_link", "chars_before",
                    "chars_after"]
    list_display_links = ["created_at"]
    list_select_related = ["user", "agent", "space"]
    list_filter = ["by", "command", ("space", admin.RelatedOnlyFieldListFilter),
                   ("agent", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["user__username", "=session__id", "=run_id"]
    date_hierarchy = "created_at"
    # One tuple for both: a list would be typed as `fields` only (django-stubs).
    fields = readonly_fields = ("created_at", "user", "agent", "space", "by", "command", "session_link", "run_id",
                                "chars_before", "chars_after")

    def get_queryset(self, request):
        return super().get_queryset(request).defer("path", "new_path")

    @admin.display(description="Session", ordering="session_id")
    def session_link(self, obj: MemoryChange) -> str:
        if obj.session_id is None:
            return "memory log (the panel or the API)"
        return format_html('<a href="{}">Session {}</a>',
                           reverse("admin:agent_sessions_session_change", args=[obj.session_id]), obj.session_id)
