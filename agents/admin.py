"""Agents and versions in the admin console (SPEC §10): drafts with the CTX-20 policy and
the run limits as separate validated inputs, the budget they imply, a Publish action;
versions read-only, with the console pages other apps add to them (the usage page)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Max
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from agents.forms import LIMIT_FIELDS, POLICY_FIELDS, AgentAdminForm
from agents.models import Agent, AgentVersion
from agents.selectors import agent_budget, version_budget
from agents.server_tools import version_tool_drift
from agents.services import agent_draft_changes, agent_draft_create, agent_publish, agent_update
from agents.tool_approvals import APPROVAL_LABELS, version_approvals
from core.console_lists import ConsoleListMixin
from core.errors import DomainError
from core.readonly_admin import ReadOnlyAdminMixin
from models_catalog.providers import provider_label
from toolservers.admin import annotations_text


def _budget_text(summary: dict) -> str:
    parts = [f"effective input {summary['effective_input_tokens']:,} tokens"]
    if summary["trigger_tokens"] is not None:
        parts.append(f"compaction at {summary['trigger_tokens']:,}, target {summary['target_tokens']:,}")
    elif summary["legacy_policy"]:
        parts.append("legacy character-threshold policy")
    if summary.get("calibration_ratio") is not None:
        parts.append(f"the provider counts ×{summary['calibration_ratio']:.2f} of our estimate "
                     f"({summary['calibration_samples']} answers)")
    return " · ".join(parts)


@admin.register(Agent)
class AgentAdmin(ConsoleListMixin, admin.ModelAdmin):
    form = AgentAdminForm
    list_display = ["name", "space", "model_connection", "latest_version", "budget_figures", "updated_at"]
    list_select_related = ["space", "model_connection"]
    search_fields = ["name"]
    list_filter = ["space"]
    actions = ["publish"]
    readonly_fields = ["publish_panel", "budget_figures", "versions_pages", "created_by", "created_at", "updated_at"]
    fieldsets = [
        ("Publish", {"fields": ["publish_panel"]}),
        (None, {"fields": ["space", "name", "instructions", "model_connection", "tools", "tool_overrides"]}),
        ("Context policy", {"fields": [*POLICY_FIELDS, "budget_figures"]}),
        ("Run limits", {"fields": [*LIMIT_FIELDS, "verify_before_complete"]}),
        ("Memory", {"fields": ["memory", "memory_approval"]}),
        ("Storage", {"fields": ["call_log_retention_days"]}),
        ("Published versions", {"fields": ["versions_pages"]}),
        ("Record", {"fields": ["created_by", "created_at", "updated_at"], "classes": ["collapse"]}),
    ]

    def get_queryset(self, request):
        return (super().get_queryset(request).defer("model_connection__api_key")
                .annotate(latest_version_number=Max("versions__version")))

    def get_readonly_fields(self, request, obj=None):
        return [*self.readonly_fields, "space"] if obj is not None else self.readonly_fields

    @admin.display(description="Latest version", ordering="latest_version_number")
    def latest_version(self, obj: Agent) -> str:
        number = getattr(obj, "latest_version_number", None)
        return f"v{number}" if number else "unpublished"

    class Media:
        js = ["agentloom/admin/agent_budget.js", "agentloom/admin/agent_publish.js", "agentloom/admin/agent_memory.js"]
        css = {"all": ["agentloom/admin/agents.css"]}

    # --- Publish from the agent's own page ----------------------------------------------

    def get_urls(self):
        publish = self.admin_site.admin_view(self.publish_view)
        return [path("<path:object_id>/publish/", publish, name="agents_agent_publish"), *super().get_urls()]

    @admin.display(description="Next version")
    def publish_panel(self, obj: Agent) -> str:
        """What publishing the saved draft would change since the last version, and the
        button that does it (disabled when nothing would; the script disables it as soon
        as the form is edited, the server refuses unsaved changes as well)."""
        if obj.pk is None:
            return "Save the agent first; then publish it here."
        latest, changes = agent_draft_changes(agent=obj)
        if latest is None:
            summary = mark_safe("Not published yet: publishing makes <strong>v1</strong> from the saved draft.")
        elif not changes:
            summary = format_html("Nothing to publish: the saved draft is the same as <strong>v{}</strong>.",
                                  latest.version)
        else:
            rows = format_html_join("", "<tr><th scope=\"row\">{}</th><td>{}</td><td>{}</td></tr>",
                                    ((c.what, c.before or "–", c.after or "–") for c in changes))
            summary = format_html('Changes since <strong>v{}</strong>:<table class="publish-changes"><thead><tr>'
                                  '<th scope="col"></th><th scope="col">v{}</th><th scope="col">Saved draft</th>'
                                  "</tr></thead><tbody>{}</tbody></table>", latest.version, latest.version, rows)
        number = (latest.version if latest else 0) + 1
        ready = latest is None or bool(changes)
        note = ("Publishes the saved draft; unsaved edits on this page are not included: save them first."
                if ready else "Change the draft and save it to publish a new version.")
        return format_html(
            # A plain button that agent_publish.js submits to the publish URL: a submit button
            # here would be the form's default, and Enter in any field would publish.
            '<div class="publish-panel">{}<p><button type="button" class="button" data-publish '
            'data-publish-url="{}"{}>Publish v{}</button> <span class="help" id="publish-note" aria-live="polite">{}'
            "</span></p></div>", summary, reverse("admin:agents_agent_publish", args=[obj.pk]),
            "" if ready else mark_safe(" disabled"), number, note)

    def publish_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Publish the saved draft from its page. The page's fields come along (the button
        submits the form): any that differ from the saved draft are unsaved edits, and the
        publish is refused rather than freezing something other than what the admin sees."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        agent = get_object_or_404(self.get_queryset(request), pk=object_id)
        if not self.has_change_permission(request, agent):
            raise PermissionDenied
        page = reverse("admin:agents_agent_change", args=[agent.pk])
        form = self.get_form(request, agent, change=True)(request.POST, instance=agent)
        unsaved = [name for name in form.changed_data if not _same_text(form, name)]
        if unsaved:
            labels = ", ".join(str(form.fields[name].label or name) for name in unsaved)
            self.message_user(request, f"Not published: the page had unsaved changes ({labels}). Save them first, "
                                       "then publish.", messages.ERROR)
            return HttpResponseRedirect(page)
        latest, changes = agent_draft_changes(agent=agent)
        if latest is not None and not changes:
            self.message_user(request, f"Nothing to publish: the saved draft is the same as v{latest.version}.",
                              messages.WARNING)
            return HttpResponseRedirect(page)
        try:
            version = agent_publish(agent=agent, published_by=request.user)
        except DomainError as exc:
            self.message_user(request, f"Not published: {exc.message}", messages.ERROR)
        else:
            self.message_user(request, f"Published {agent.name} v{version.version}. New chats with this agent use "
                                       "it; running sessions keep the version they started with.", messages.SUCCESS)
        return HttpResponseRedirect(page)

    @admin.display(description="Published versions")
    def versions_pages(self, obj: Agent) -> str:
        """Each published version with its console pages (usage and cost)."""
        versions = list(obj.versions.only("id", "version", "published_at")) if obj.pk else []
        if not versions:
            return "None yet: publish the agent to make its first version."
        return format_html_join(
            "", '<p class="version-pages"><a href="{}">v{}</a> ({}) · {}</p>',
            ((reverse("admin:agents_agentversion_change", args=[v.pk]), v.version, f"{v.published_at:%Y-%m-%d}",
              version_page_links(v.pk)) for v in versions))

    @admin.display(description="Budget")
    def budget_figures(self, obj: Agent) -> str:
        """What the draft's policy means in tokens with its connection's figures; the
        script recomputes it live as the connection or the ratios change."""
        from django.utils.html import json_script

        from models_catalog.learning import connection_input_tokens
        from models_catalog.models import ModelConnection

        # The effective input comes from the one budget (CAT-9), not a sum in the script.
        figures = {str(c.pk): {"id": c.pk, "effective_input_tokens": connection_input_tokens(c)}
                   for c in ModelConnection.objects.only(
                       "id", "context_window", "server_context_window", "learned_context_window",
                       "max_output_tokens", "max_output_tokens_source", "safety_margin_tokens")}
        text = _budget_text(agent_budget(agent=obj)) if obj.pk is not None else "Pick a model connection."
        return format_html('<span id="live-budget" aria-live="polite">{}</span>{}', text,
                           json_script(figures, "agent-connection-figures"))

    def save_model(self, request, obj: Agent, form: AgentAdminForm, change: bool) -> None:
        """Save through the services (CTX-20 normalisation, tools, limits)."""
        data = form.service_data()
        if change:
            saved = agent_update(agent=Agent.objects.get(pk=obj.pk), data=data)
        else:
            saved = agent_draft_create(space=form.cleaned_data["space"], data=data, created_by=request.user)
        obj.pk = saved.pk
        obj.refresh_from_db()

    @admin.action(description="Publish the selected agents as new versions")
    def publish(self, request, queryset) -> None:
        for agent in queryset:
            try:
                version = agent_publish(agent=agent, published_by=request.user)
            except DomainError as exc:
                self.message_user(request, f"{agent.name}: {exc.message}", messages.ERROR)
            else:
                self.message_user(request, f"Published {agent.name} v{version.version}.", messages.SUCCESS)


def _same_text(form, name: str) -> bool:
    """A textarea comes back with CRLF line ends: the same text as saved is not an edit."""
    if not isinstance(form.fields[name].widget, forms.Textarea):
        return False
    posted = (form.data.get(name) or "").replace("\r\n", "\n").strip()
    return posted == (form.initial.get(name) or "").replace("\r\n", "\n").strip()


@dataclass(frozen=True)
class VersionPage:
    """A console page of a version that another app serves (``view(model_admin, request,
    object_id)``), at ``<version id>/<suffix>/`` named ``agents_agentversion_<name>``."""

    suffix: str
    name: str
    label: str
    view: Callable[..., HttpResponseBase]  # a page, or a streamed download (the usage CSV)
    linked: bool = True  # listed with the version's links (a download beside its page is not)


# Filled by the apps above this one when their admin loads (the sessions console adds the
# usage page): the agents app cannot import them, the import floors point the other way.
VERSION_PAGES: list[VersionPage] = []


def version_page_links(version_id: int) -> str:
    pages = [page for page in VERSION_PAGES if page.linked]
    if not pages:
        return "-"
    return format_html_join(" · ", '<a href="{}">{}</a>', (
        (reverse(f"admin:agents_agentversion_{page.name}", args=[version_id]), page.label) for page in pages))


@admin.register(AgentVersion)
class AgentVersionAdmin(ConsoleListMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Published versions are read-only: they are frozen by design (RUN-4)."""

    list_display = ["name", "version", "agent", "model", "context_window", "budget_figures", "published_at", "pages"]
    readonly_fields = ["provider_name", "tools_list", "approvals_list", "policy_list", "memory_shown", "budget_figures",
                       "frozen_server_tools", "pages"]
    list_select_related = ["agent"]
    list_filter = ["agent__space"]
    # Stored JSON shown as a person reads it, in the place of the field it stands for.
    _SHOWN_AS = {"provider": "provider_name", "tools": "tools_list", "tool_approvals": "approvals_list",
                 "context_policy": "policy_list", "memory": "memory_shown"}

    class Media:
        css = {"all": ["agentloom/admin/agents.css"]}

    def get_urls(self):
        wrap = self.admin_site.admin_view
        pages = [path(f"<path:object_id>/{page.suffix}/", wrap(partial(self._page, page.view)),
                      name=f"agents_agentversion_{page.name}") for page in VERSION_PAGES]
        return [*pages, *super().get_urls()]

    def get_fields(self, request, obj=None):
        # The provider by its label, where the model's own field would show its registry name;
        # the tools and the context policy as lists, not their stored JSON; the frozen server
        # tools as their table only (frozen_server_tools).
        return [self._SHOWN_AS.get(name, name) for name in super().get_fields(request, obj)
                if name not in ("server_tools", *self._SHOWN_AS.values())]

    @admin.display(description="Provider")
    def provider_name(self, obj: AgentVersion) -> str:
        return provider_label(obj.provider)

    def _page(self, view: Callable[..., HttpResponseBase], request: HttpRequest, object_id: str) -> HttpResponseBase:
        return view(self, request, object_id)

    @admin.display(description="Tools")
    def tools_list(self, obj: AgentVersion) -> str:
        names = [name for name in (obj.tools or []) if isinstance(name, str)]
        if not names:
            return "None."
        return format_html_join(", ", "<code>{}</code>", ((name,) for name in names))

    @admin.display(description="Ask before calling")
    def approvals_list(self, obj: AgentVersion) -> str:
        """Each tool's approval policy as frozen (TOOL-7): whether a person says yes before it acts."""
        shown = version_approvals(obj)
        if not shown:
            return "No tools."
        return format_html('<ul class="approval-list">{}</ul>', format_html_join(
            "", "<li><code>{}</code>: {}</li>", ((tool.name, tool.words) for tool in shown)))

    @admin.display(description="Memory across sessions")
    def memory_shown(self, obj: AgentVersion) -> str:
        """MEM-1: whether runs of this version carry each person's memory and its tool."""
        if not obj.memory:
            return "Off: no memory, no memory tool."
        return ("On: each person's runs carry their memory after the instructions and have the memory tool "
                "(unless the person turned memory off for themselves).")

    @admin.display(description="Context policy")
    def policy_list(self, obj: AgentVersion) -> str:
        policy = obj.context_policy if isinstance(obj.context_policy, dict) else {}
        if not policy:
            return "The platform's defaults."
        return format_html('<ul class="policy-list">{}</ul>', format_html_join(
            "", "<li>{}: {}</li>",
            ((name.replace("_", " ").capitalize(), "default" if value is None else value)
             for name, value in policy.items())))

    @admin.display(description="Console")
    def pages(self, obj: AgentVersion) -> str:
        return version_page_links(obj.pk) if obj.pk else "-"

    @admin.display(description="Budget (frozen)")
    def budget_figures(self, obj: AgentVersion) -> str:
        return _budget_text(version_budget(version=obj))

    @admin.display(description="Server tools (frozen)")
    def frozen_server_tools(self, obj: AgentVersion) -> str:
        """Each server tool as published, and how its server's last listing differs (TOOL-3)."""
        entries = version_tool_drift(obj) if obj.pk else []
        if not entries:
            return "None."
        rows = format_html_join("", '<tr class="{}"><td><code>{}</code></td><td><code>{}</code></td><td>{}</td>'
                                    "<td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                                (("drift" if e["drift"] else "as-published", e["ref"], e["function"], e["description"],
                                  annotations_text(e["annotations"]),
                                  "yes" if e["idempotent"] else "no (an unknown outcome on resume)",
                                  APPROVAL_LABELS.get(e["approval"], e["approval"]),
                                  e["drift_text"] + (f" (listed {e['listed_at']:%Y-%m-%d %H:%M})"
                                                     if e["listed_at"] else "")) for e in entries))
        return format_html('<div class="table-scroll"><table class="frozen-tools"><thead><tr><th>Tool</th>'
                           "<th>Function</th><th>Description</th><th>Annotations</th><th>Re-run on resume</th>"
                           "<th>Ask before calling</th>"
                           "<th>On the server now</th></tr></thead>"
                           "<tbody>{}</tbody></table></div>", rows)
