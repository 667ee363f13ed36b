"""Agents and versions in the admin console (SPEC §10): drafts with the CTX-20 policy as
separate validated inputs, the budget they imply, a Publish action; versions read-only."""
from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Max

from agentloom.agents.forms import AgentAdminForm, POLICY_FIELDS
from agentloom.agents.models import Agent, AgentVersion
from agentloom.agents.selectors import agent_budget, version_budget
from agentloom.agents.services import agent_draft_create, agent_publish, agent_update
from agentloom.errors import DomainError


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
class AgentAdmin(admin.ModelAdmin):
    form = AgentAdminForm
    list_display = ["name", "space", "model_connection", "latest_version", "budget_figures", "updated_at"]
    list_select_related = ["space", "model_connection"]
    search_fields = ["name"]
    list_filter = ["space"]
    actions = ["publish"]
    readonly_fields = ["budget_figures", "created_by", "created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["space", "name", "instructions", "model_connection", "tools"]}),
        ("Context policy (CTX-20)", {"fields": [*POLICY_FIELDS, "budget_figures"]}),
        ("Run limits", {"fields": ["limits", "verify_before_complete"]}),
        ("Storage", {"fields": ["call_log_retention_days"]}),
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
        js = ["agentloom/admin/agent_budget.js"]

    @admin.display(description="Budget (CTX-21)")
    def budget_figures(self, obj: Agent) -> str:
        """What the draft's policy means in tokens with its connection's figures; the
        script recomputes it live as the connection or the ratios change."""
        from django.utils.html import format_html, json_script

        from models_catalog.models import ModelConnection

        figures = {str(c.pk): {"id": c.pk, "context_window": c.effective_context_window(),
                               "max_output_tokens": c.max_output_tokens,
                               "safety_margin_tokens": c.safety_margin_tokens}
                   for c in ModelConnection.objects.only("id", "context_window", "server_context_window",
                                                         "max_output_tokens", "safety_margin_tokens")}
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


@admin.register(AgentVersion)
class AgentVersionAdmin(admin.ModelAdmin):
    """Published versions are read-only: they are frozen by design (RUN-4)."""

    list_display = ["name", "version", "agent", "model", "context_window", "budget_figures", "published_at"]
    readonly_fields = ["budget_figures"]
    list_select_related = ["agent"]
    list_filter = ["agent__space"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="Budget (frozen)")
    def budget_figures(self, obj: AgentVersion) -> str:
        return _budget_text(version_budget(version=obj))
