"""Sessions, runs and what they made, in the admin console (SPEC §10, STYLE 15).

System-made rows (runs, instances, records, snapshots, views, events, model calls, the
access audit) are read-only; lists never decrypt (encrypted columns deferred, related rows
selected in the same query). Decrypted content is shown only on the console pages in
``sessions.admin.pages``, each of which writes an access-audit row. Actions call services.
"""
from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from agents.admin import VERSION_PAGES, VersionPage
from core.console_lists import ConsoleListMixin
from core.errors import DomainError
from core.readonly_admin import ReadOnlyAdminMixin
from sessions.admin import files, pages, undo, usage
from sessions.admin.display import call_figures, compaction_figures
from sessions.admin.questions import run_questions
from sessions.admin.waits import wait_figures
from sessions.models import (
    AccessAudit,
    CompactionSnapshot,
    Instance,
    ModelCall,
    Run,
    RunEvent,
    Session,
    SessionMessage,
    SessionView,
)
from sessions.services.dispatch import compaction_dispatch_on_commit
from sessions.services.manual_compaction import compaction_request
from sessions.services.run_controls import run_cancel, run_resume

# An agent version's usage page and its CSV, served at the version's own admin URLs.
VERSION_PAGES.extend([VersionPage(suffix="usage", name="usage", label="Usage and cost", view=usage.usage_view),
                      VersionPage(suffix="usage/csv", name="usage_csv", label="Usage CSV", view=usage.usage_csv_view,
                                  linked=False)])


def _links(*pairs: tuple[str, str]) -> str:
    return format_html_join(" · ", '<a href="{}">{}</a>', pairs)


def _change_link(model: str, pk: int | None, text: object) -> str:
    if pk is None:
        return "-"
    return format_html('<a href="{}">{}</a>', reverse(f"admin:agent_sessions_{model}_change", args=[pk]), text)


class ReadOnlyAdmin(ConsoleListMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Runs, records, snapshots and events are written by the system only."""


class RunInline(ReadOnlyAdminMixin, admin.TabularInline):
    """A session's runs on its page, each with the opening of the question it answered and
    the way into its timeline and inspector."""

    model = Run
    # One tuple for both: a list would be typed as `fields` only (django-stubs).
    fields = readonly_fields = ("status", "question", "attempt", "created_at", "finished_at", "pages")
    ordering = ["-id"]
    extra = 0
    can_delete = False
    show_change_link = True
    # Set per request by get_formset (the admin makes a new inline for each request).
    questions: dict[int, object] | None = None

    def get_formset(self, request, obj=None, **kwargs):
        """The questions are the person's words, decrypted: read only for staff who may read
        the session's records, after the access audit's row (``what="questions"``)."""
        self.questions = run_questions(user=request.user, session=obj) if obj is not None and obj.pk else None
        return super().get_formset(request, obj, **kwargs)

    @admin.display(description="Question")
    def question(self, obj: Run) -> str:
        """The opening of the question, escaped like any text of the admin; "-" for a run
        that answered none (Continue) or when the records may not be read."""
        if self.questions is None:
            return "- (needs the permission to read the session's records)"
        return str(self.questions.get(obj.pk) or "-")

    @admin.display(description="Pages")
    def pages(self, obj: Run) -> str:
        return _links((pages.admin_url("run_events", obj.pk), "Event timeline"),
                      (pages.admin_url("run_context", obj.pk), "Context inspector"))


@admin.register(Session)
class SessionAdmin(ConsoleListMixin, admin.ModelAdmin):
    # The title is user text, encrypted at rest: it is neither listed, searched nor edited
    # here (the audited records page shows what the person wrote).
    list_display = ["id", "user", "agent", "version", "last_seq", "updated_at", "pages"]
    list_display_links = ["id"]
    list_select_related = ["user", "agent", "version"]
    list_filter = ["space"]
    search_fields = ["=id", "user__username"]
    # One tuple for both: a list would be typed as `fields` only (django-stubs).
    fields = readonly_fields = ("space", "user", "agent", "version", "last_seq", "created_at", "updated_at", "pages")
    inlines = [RunInline]
    actions = ["compact_now"]

    def has_add_permission(self, request) -> bool:
        return False  # sessions start in the chat or through the API (session_create)

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("<path:object_id>/records/", wrap(self.records_view), name="agent_sessions_session_records"),
            path("<path:object_id>/compactions/", wrap(self.compactions_view),
                 name="agent_sessions_session_compactions"),
            path("<path:object_id>/compactions/undo/", wrap(self.compaction_undo_view),
                 name="agent_sessions_session_compaction_undo"),
            path("<path:object_id>/files/<str:file_id>/", wrap(self.file_view), name="agent_sessions_session_file"),
            *super().get_urls(),
        ]

    def records_view(self, request: HttpRequest, object_id: str):
        return pages.records_view(self, request, object_id)

    def compactions_view(self, request: HttpRequest, object_id: str):
        return pages.compactions_view(self, request, object_id)

    def compaction_undo_view(self, request: HttpRequest, object_id: str):
        """CTX-51: undo the newest compaction (POST, audited; ``sessions.admin.undo``)."""
        session = pages.object_or_404(self, request, object_id, CompactionSnapshot)
        return undo.compaction_undo_view(self, request, session, pages.admin_url("session_compactions", session.pk))

    def file_view(self, request: HttpRequest, object_id: str, file_id: str):
        return files.file_download_view(self, request, object_id, file_id)

    @admin.display(description="Console")
    def pages(self, obj: Session) -> str:
        if obj.pk is None:
            return "-"
        return _links((pages.records_url(obj.pk), "Records"),
                      (pages.admin_url("session_compactions", obj.pk), "Compactions"))

    @admin.action(description="Compact now (summarize the earlier history)", permissions=["change"])
    def compact_now(self, request: HttpRequest, queryset: QuerySet[Session]) -> None:
        for session in queryset:
            try:
                outcome, run = compaction_request(session=session)
            except DomainError as exc:
                self.message_user(request, f"{session}: {exc.message}", messages.WARNING)
                continue
            if outcome == "queued":
                compaction_dispatch_on_commit(run.pk)
                self.message_user(request, f"{session}: compaction queued for run {run.pk}.", messages.SUCCESS)
            else:
                self.message_user(request, f"{session}: run {run.pk} will compact at its next step.",
                                  messages.SUCCESS)


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ["id", "session_link", "status", "attempt", "created_at", "finished_at", "pages"]
    list_select_related = ["session"]
    list_filter = ["status"]
    search_fields = ["=id", "=session__id"]
    # One tuple for both: a list would be typed as `fields` only (django-stubs).
    fields = readonly_fields = ("session", "version", "status", "attempt", "cancel_requested", "error", "figures",
                                "budget", "inherited_watermark", "heartbeat_at", "created_at", "started_at",
                                "finished_at", "pages")
    actions = ["stop_runs", "resume_runs"]

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("<path:object_id>/events/", wrap(self.events_view), name="agent_sessions_run_events"),
            path("<path:object_id>/context/", wrap(self.context_view), name="agent_sessions_run_context"),
            *super().get_urls(),
        ]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("session")

    def events_view(self, request: HttpRequest, object_id: str):
        return pages.events_view(self, request, object_id)

    def context_view(self, request: HttpRequest, object_id: str):
        return pages.context_view(self, request, object_id)

    @admin.display(description="Counters")
    def figures(self, obj: Run) -> str:
        """The run's counters; of a completion check only its status — its reason is the
        model's words, shown on the audited pages."""
        counters = dict(obj.counters or {})
        verdict = counters.pop("verification", None)
        if isinstance(verdict, dict):
            counters["verification"] = verdict.get("status")
        return ", ".join(f"{key}: {value}" for key, value in sorted(counters.items())) or "-"

    def has_operate_permission(self, request: HttpRequest) -> bool:
        """Stopping or resuming a run is operating it, not editing its row."""
        return request.user.has_perm("agent_sessions.change_run")

    @admin.display(description="Session", ordering="session_id")
    def session_link(self, obj: Run) -> str:
        return _change_link("session", obj.session_id, obj.session)

    @admin.display(description="Console")
    def pages(self, obj: Run) -> str:
        return _links((pages.admin_url("run_events", obj.pk), "Event timeline"),
                      (pages.admin_url("run_context", obj.pk), "Context inspector"),
                      (pages.records_url(obj.session_id), "Session records"))

    @admin.action(description="Stop the selected runs", permissions=["operate"])
    def stop_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        for run in queryset.filter(status__in=Run.ACTIVE_STATUSES):
            run = run_cancel(run=run)
            self.message_user(request, f"Run {run.pk}: {run.status}"
                              f"{' (stop requested)' if run.cancel_requested else ''}.", messages.SUCCESS)

    @admin.action(description="Resume the selected runs", permissions=["operate"])
    def resume_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        for run in queryset:
            try:
                run_resume(run=run)
            except DomainError as exc:
                self.message_user(request, f"Run {run.pk}: {exc.message}", messages.WARNING)
            else:
                self.message_user(request, f"Run {run.pk} queued again.", messages.SUCCESS)


@admin.register(Instance)
class InstanceAdmin(ReadOnlyAdmin):
    list_display = ["id", "run", "key", "parent", "depth", "user_turns", "model_steps"]
    list_select_related = ["run", "parent"]
    exclude = ["frame"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("frame", "parent__frame")


@admin.register(SessionMessage)
class SessionMessageAdmin(ReadOnlyAdmin):
    list_display = ["session", "seq", "run", "instance", "kind", "created_at", "open_link"]
    list_filter = ["kind"]
    list_select_related = ["session", "run", "instance"]
    # Decrypted content is shown on the session records page, which writes an access row.
    exclude = ["message"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("message", "instance__frame")

    @admin.display(description="Content")
    def open_link(self, obj: SessionMessage) -> str:
        instance = Instance.MAIN if obj.in_main else str(obj.instance_id)
        url = pages.records_url(obj.session_id, after=max(0, obj.seq - 1), instance=instance)
        return format_html('<a href="{}">Open on the records page</a>', url)


@admin.register(CompactionSnapshot)
class CompactionSnapshotAdmin(ReadOnlyAdmin):
    list_display = ["instance", "revision", "trigger", "tokens", "target_reached", "wait", "covered_seq",
                    "estimator_id", "created_at", "session_compactions"]
    list_select_related = ["instance__run"]
    exclude = ["messages"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("messages", "instance__frame")

    @admin.display(description="Trigger")
    def trigger(self, obj: CompactionSnapshot) -> str:
        return compaction_figures(obj.metrics).trigger

    @admin.display(description="Tokens before → after")
    def tokens(self, obj: CompactionSnapshot) -> str:
        figures = compaction_figures(obj.metrics)
        before, after = figures.tokens_before_calibrated, figures.tokens_after_calibrated
        if before is None or after is None:
            return "-"
        return f"{before:,} → {after:,}"

    @admin.display(description="Target reached", boolean=True)
    def target_reached(self, obj: CompactionSnapshot) -> bool | None:
        return compaction_figures(obj.metrics).target_reached

    @admin.display(description="Wait")
    def wait(self, obj: CompactionSnapshot) -> str:
        waits = wait_figures(obj.metrics)
        if waits.stall_ms is None:
            return "-"
        return waits.stall_text if waits.prepared is None else f"{waits.stall_text}, {waits.how}"

    @admin.display(description="Session")
    def session_compactions(self, obj: CompactionSnapshot) -> str:
        session_id = obj.instance.run.session_id
        return format_html('<a href="{}">Compactions of session {}</a>',
                           pages.admin_url("session_compactions", session_id), session_id)


@admin.register(SessionView)
class SessionViewAdmin(ReadOnlyAdmin):
    list_display = ["session", "watermark", "estimator_id", "raw_complete", "source_run", "created_at"]
    list_select_related = ["session", "source_run"]
    exclude = ["messages"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("messages")


@admin.register(RunEvent)
class RunEventAdmin(ReadOnlyAdmin):
    list_display = ["run", "seq", "type", "created_at", "timeline_link"]
    list_filter = ["type"]
    list_select_related = ["run"]
    exclude = ["payload"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("payload")

    @admin.display(description="Payload")
    def timeline_link(self, obj: RunEvent) -> str:
        url = pages.admin_url("run_events", obj.run_id, after=max(0, obj.seq - 1) or None)
        return format_html('<a href="{}">Open on the timeline</a>', url)


@admin.register(ModelCall)
class ModelCallAdmin(ReadOnlyAdmin):
    list_display = ["id", "run", "purpose", "provider", "model", "estimator_id", "estimated_tokens",
                    "prompt_tokens", "ratio", "estimated_output_tokens", "outcome", "created_at", "inspector_link"]
    list_filter = ["purpose", "provider", "outcome"]
    list_select_related = ["run"]
    # What the call received is shown by the context inspector, which writes an access row.
    exclude = ["request"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("request")

    @admin.display(description="Provider prompt tokens")
    def prompt_tokens(self, obj: ModelCall):
        value = call_figures(estimated=obj.estimated_tokens, usage=obj.usage, estimates=()).prompt_tokens
        return "-" if value is None else value

    @admin.display(description="Provider / estimate")
    def ratio(self, obj: ModelCall) -> str:
        ratio = call_figures(estimated=obj.estimated_tokens, usage=obj.usage, estimates=()).ratio
        return "-" if ratio is None else f"{ratio:.2f}×"

    @admin.display(description="Request")
    def inspector_link(self, obj: ModelCall) -> str:
        url = pages.admin_url("run_context", obj.run_id, after=obj.pk - 1 or None) + f"#call-{obj.pk}"
        return format_html('<a href="{}">Open in the inspector</a>', url)


@admin.register(AccessAudit)
class AccessAuditAdmin(ReadOnlyAdmin):
    list_display = ["at", "user", "what", "session", "run", "detail"]
    list_filter = ["what"]
    list_select_related = ["user", "session", "run"]
    search_fields = ["user__username"]
    date_hierarchy = "at"
