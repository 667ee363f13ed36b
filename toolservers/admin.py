"""Tool servers in the admin console (SPEC §10, TOOL-1, TOOL-2, TOOL-6).

A space's servers are added with their headers masked; each server's page lists its tools
with their descriptions and annotations, so an admin reads what a tool says it does before
adding it to an agent; "Refresh" lists again and says what changed. The operator's servers
(``AGENTLOOM_MCP_SERVERS``) are shown read-only: nothing here starts or changes a command.
Deleting, from a server's page or the bulk action, follows the API's rule
(``toolserver_delete_check``): a server whose tools an agent uses stays, and the message
names the agents and what to do.
"""
from __future__ import annotations

import json

from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected as django_delete_selected
from django.db import transaction
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.utils.html import format_html, format_html_join
from django.views.decorators.debug import sensitive_post_parameters

from core.accounts.selectors import user_is_operator
from core.console_lists import ConsoleListMixin
from core.errors import DomainError
from toolservers.forms import ToolServerAdminForm
from toolservers.listing import changes_text
from toolservers.models import ToolServer
from toolservers.selectors import operator_servers
from toolservers.services import (
    toolserver_delete,
    toolserver_delete_check,
    toolserver_in_use_by,
    toolserver_refresh,
)

ANNOTATION_LABELS = {"readOnlyHint": "read-only", "destructiveHint": "destructive", "idempotentHint": "idempotent",
                     "openWorldHint": "open world"}


def annotations_text(annotations: dict) -> str:
    """Annotations in words: what the server says of a tool (it is a claim, not a guarantee)."""
    words = [label if annotations.get(key) else f"not {label}" for key, label in ANNOTATION_LABELS.items()
             if key in annotations]
    return ", ".join(words) or "no annotations (treated as having side effects)"


def tools_table(tools: list[dict]) -> str:
    if not tools:
        return "No tools listed."
    rows = format_html_join("", "<tr><td><code>{}</code></td><td>{}</td><td>{}</td>"
                                "<td><details><summary>schema</summary><pre>{}</pre></details></td></tr>",
                            ((t["name"], t["description"] or "—", annotations_text(t["annotations"]),
                              json.dumps(t["input_schema"], indent=2, ensure_ascii=False)) for t in tools))
    return format_html('<table class="server-tools"><thead><tr><th>Tool</th><th>Description</th>'
                       "<th>Annotations</th><th>Input</th></tr></thead><tbody>{}</tbody></table>", rows)


@admin.register(ToolServer)
class ToolServerAdmin(ConsoleListMixin, admin.ModelAdmin):
    form = ToolServerAdminForm
    list_display = ["name", "kind", "space", "transport", "tool_count", "listed_at", "list_error"]
    list_filter = ["kind", "space"]
    list_select_related = ["space"]
    search_fields = ["name", "url"]
    actions = ["refresh", "delete_selected"]
    readonly_fields = ["kind", "transport", "header_hints", "protocol_version", "server_info_text", "tools_listed",
                       "skipped", "listed_at", "list_error", "operator_config", "used_by", "created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["space", "name", "url", "timeout_seconds", "kind", "transport"]}),
        ("Headers", {"fields": ["header_lines", "clear_headers", "header_hints"]}),
        ("Tools", {"fields": ["server_info_text", "protocol_version", "listed_at", "used_by", "tools_listed",
                              "skipped", "list_error"]}),
        ("Operator's configuration", {"fields": ["operator_config"]}),
        ("Record", {"fields": ["created_at", "updated_at"], "classes": ["collapse"]}),
    ]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("headers")

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change, **kwargs)

        class WithUser(form):  # the services record who registered the server
            def __init__(self, *args, **inner):
                super().__init__(*args, user=request.user, **inner)

        return WithUser

    def get_readonly_fields(self, request, obj=None):
        return [*self.readonly_fields, "space"] if obj is not None else self.readonly_fields

    def get_fieldsets(self, request, obj=None):
        if obj is not None and obj.kind == ToolServer.Kind.OPERATOR:
            return [(None, {"fields": ["name", "kind", "transport", "timeout_seconds"]}), self.fieldsets[2],
                    self.fieldsets[3]]
        return self.fieldsets[:2] if obj is None else self.fieldsets[:3] + self.fieldsets[4:]

    def has_change_permission(self, request, obj=None) -> bool:
        if obj is not None and obj.kind == ToolServer.Kind.OPERATOR:
            return False  # TOOL-2: listed read-only
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        if obj is not None and obj.kind == ToolServer.Kind.OPERATOR:
            return False
        return super().has_delete_permission(request, obj)

    @method_decorator(sensitive_post_parameters("header_lines"))
    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        # Not in the transaction Django's admin opens around a POST: the form connects to the
        # server (STYLE 10, core/slow_work.py), and the services it calls open their own.
        return self._changeform_view(request, object_id, form_url, extra_context)

    def save_model(self, request, obj: ToolServer, form: ToolServerAdminForm, change: bool) -> None:
        """The form's clean() already went through the services (connect, list, save)."""
        assert form.saved is not None
        obj.pk = form.saved.pk
        obj.refresh_from_db()

    def save_related(self, request, form, formsets, change) -> None:
        pass  # no relations; the model form must not save itself again

    # --- Deleting: the services' rule, the API's too (a server agents use stays) ----------

    def _refused(self, request, servers) -> bool:
        """Tell why each server agents use is not deleted; True when any is."""
        refused = False
        for server in servers:
            try:
                toolserver_delete_check(server=server)
            except DomainError as exc:
                self.message_user(request, exc.message, messages.ERROR)
                refused = True
        return refused

    def delete_view(self, request, object_id, extra_context=None):
        server = self.get_object(request, object_id)
        if server is not None and self.has_delete_permission(request, server) and self._refused(request, [server]):
            return HttpResponseRedirect(reverse("admin:toolservers_toolserver_change", args=[server.pk]))
        try:
            return super().delete_view(request, object_id, extra_context)
        except DomainError as exc:  # an agent chose its tools since the page was shown (delete_model)
            self.message_user(request, exc.message, messages.ERROR)
            return HttpResponseRedirect(reverse("admin:toolservers_toolserver_change", args=[object_id]))

    def delete_model(self, request, obj: ToolServer) -> None:
        toolserver_delete(server=obj)  # checks again: an agent may have chosen it since the page was shown

    def delete_queryset(self, request, queryset) -> None:
        with transaction.atomic():  # all of the selection or none of it
            for server in queryset:
                toolserver_delete(server=server)

    # In place of the site's action of this name (its confirmation page posts back to it).
    @admin.action(description="Delete the selected servers (none that agents use)", permissions=["delete"])
    def delete_selected(self, request, queryset):
        """Django's delete, with its confirmation page, only when no selected server is in use:
        otherwise nothing is deleted and each refusal says which agents use the server."""
        if self._refused(request, queryset):
            self.message_user(request, "Nothing was deleted.", messages.WARNING)
            return None
        try:
            return django_delete_selected(self, request, queryset)
        except DomainError as exc:  # chosen by an agent since the confirmation page was shown
            self.message_user(request, f"{exc.message} Nothing was deleted.", messages.ERROR)
            return None

    @admin.display(description="Used by")
    def used_by(self, obj: ToolServer) -> str:
        """The agents whose draft or latest version uses its tools: the ones a delete waits for."""
        users = toolserver_in_use_by(server=obj) if obj.pk else []
        return ", ".join(users) if users else "No agent's draft or latest version uses its tools."

    @admin.display(description="Tools")
    def tool_count(self, obj: ToolServer) -> int:
        return len(obj.tools)

    @admin.display(description="Server")
    def server_info_text(self, obj: ToolServer) -> str:
        info = obj.server_info or {}
        return " ".join(str(info.get(key, "")) for key in ("name", "version")).strip() or "-"

    @admin.display(description="Listed tools")
    def tools_listed(self, obj: ToolServer) -> str:
        return tools_table(obj.tools)

    @admin.display(description="Operator's command")
    def operator_config(self, obj: ToolServer) -> str:
        config = operator_servers().get(obj.name) if obj.space_id is None else None
        if config is None:
            return "Not in AGENTLOOM_MCP_SERVERS on this host." if obj.space_id is None else "-"
        env = ", ".join(sorted(config.env)) or "none"
        spaces = ", ".join(map(str, config.spaces)) if config.spaces is not None else "every space"
        return format_html("<code>{} {}</code><br>environment: {} (values never shown) · spaces: {}",
                           config.command, " ".join(config.args), env, spaces)

    @admin.action(description="Refresh the selected servers (list their tools again)")
    def refresh(self, request, queryset) -> None:
        for server in queryset:
            if server.kind == ToolServer.Kind.OPERATOR:
                self.message_user(request, f"{server.name}: the operator's servers are listed by the workers "
                                           "(manage.py toolservers_sync).", messages.WARNING)
                continue
            try:
                _, changes = toolserver_refresh(server=server, by=request.user,
                                                detailed=user_is_operator(user=request.user))
            except DomainError as exc:
                self.message_user(request, f"{server.name}: {exc.message}", messages.ERROR)
            else:
                self.message_user(request, f"Server {server.name}: {changes_text(changes)}", messages.SUCCESS)
