"""Model connections in the admin console (SPEC §10): a Discover models page and panel,
a write-only key, and every save going through the catalog services."""
from __future__ import annotations

import difflib
from decimal import Decimal
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.decorators import method_decorator
from django.utils.html import format_html
from django.views.decorators.debug import sensitive_post_parameters

from context import Calibration
from core.accounts.selectors import user_is_operator
from core.console_lists import ConsoleListMixin
from core.errors import DomainError
from models_catalog.admin_layout import ConnectionFormLayout
from models_catalog.discovery import server_context_label
from models_catalog.forms import (
    ConnectionTestForm,
    DiscoverForm,
    ModelConnectionAdminForm,
    ModelPriceAdminForm,
    amount_text,
)
from models_catalog.http import HttpLimits
from models_catalog.learning import connection_input_tokens
from models_catalog.maxima import maxima_of
from models_catalog.models import ConcurrencySource, FigureSource, ModelConnection, ModelPrice
from models_catalog.providers import find_provider, provider_label
from models_catalog.selectors import connection_stored_key_for_discovery
from models_catalog.serializers import discovery_data
from models_catalog.services import connection_create, connection_update, models_discover

DISCOVER_RESULTS_TEMPLATE = "admin/models_catalog/modelconnection/discover_results.html"
DISCOVER_PAGE_TEMPLATE = "admin/models_catalog/modelconnection/discover.html"
TEST_RESULT_TEMPLATE = "admin/models_catalog/modelconnection/test_result.html"
# Test connection waits for an answer while the admin watches: a short bound, not discovery's.
CONNECTION_TEST_LIMITS = HttpLimits(connect_timeout=3.0, read_timeout=8.0, write_timeout=5.0, pool_timeout=3.0,
                                    total_timeout=10.0, max_response_bytes=8 * 1024 * 1024)


@admin.display(description="Provider", ordering="provider")
def provider_column(obj: ModelConnection | ModelPrice) -> str:
    """The provider's label from the registry (the column stores only its name)."""
    return provider_label(obj.provider)


class ProviderFilter(admin.SimpleListFilter):
    """Filter by provider, each offered by its label (the column stores only its name)."""

    title = "provider"
    parameter_name = "provider"

    def lookups(self, request, model_admin):
        used = set(model_admin.get_queryset(request).values_list("provider", flat=True))
        return sorted(((name, provider_label(name)) for name in used), key=lambda choice: choice[1])

    def queryset(self, request, queryset):
        return queryset.filter(provider=self.value()) if self.value() else queryset


@admin.register(ModelConnection)
class ModelConnectionAdmin(ConsoleListMixin, ConnectionFormLayout, admin.ModelAdmin):
    form = ModelConnectionAdminForm
    list_display = ["name", "space", provider_column, "model", "window_column", "output_column", "stored_key"]
    list_select_related = ["space"]
    list_filter = [ProviderFilter, "context_window_source", "max_output_tokens_source"]
    search_fields = ["name", "model"]
    # The key column is encrypted and write-only: never listed, never shown. The form's
    # own api_key input replaces the model field, so the form never writes it directly.
    exclude = ["api_key"]
    readonly_fields = ["stored_key", "model_tools", "window_source", "output_source", "manifest_version",
                       "server_context", "learned_window", "effective_input", "calibration", "concurrency_from",
                       "created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["space", "name", "provider", "base_url"]}),
        ("API key", {"fields": ["api_key", "stored_key", "clear_api_key"]}),
        ("Model and window figures", {"fields": [
            # Discover and Test right under the model they fill in and try; each figure
            # beside its own source and the model's maximum (CAT-2, CAT-3).
            "model", "model_tools", ("context_window", "window_source"), ("max_output_tokens", "output_source"),
            "safety_margin_tokens", "supports_images", "manifest_version", "server_context", "learned_window",
            "effective_input", "calibration", "discovery_token",
        ]}),
        ("Model server", {"fields": [("concurrency", "concurrency_from")]}),
        ("Record", {"fields": ["created_at", "updated_at"], "classes": ["collapse"]}),
    ]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("api_key")

    def get_readonly_fields(self, request, obj=None):
        # Moving a connection between spaces would move its key with it: not an edit.
        return [*self.readonly_fields, "space"] if obj is not None else self.readonly_fields

    @admin.display(description="Stored key", ordering="api_key_hint")
    def stored_key(self, obj: ModelConnection) -> str:
        """The masked hint, never the key (CAT-6)."""
        if obj.api_key_hint:
            return format_html("<code>{}</code> (only its start and end are shown)", obj.api_key_hint)
        return "None stored."

    @admin.display(description="Effective input")
    def effective_input(self, obj: ModelConnection) -> str:
        if obj.pk is None or not _figures_typed(obj):
            # A form shown again after an error: a blank figure is decided only when saved.
            return "Shown once saved (a figure left blank is decided when the connection is saved)."
        return f"{connection_input_tokens(obj):,} tokens"  # as runs use it (CAT-9)

    # Each figure with its own source under it (CAT-2), in one column so the list stays narrow.
    @admin.display(description="Context window", ordering="context_window")
    def window_column(self, obj: ModelConnection) -> str:
        return format_html("{}<br><small>{}</small>", f"{obj.context_window:,}",
                           obj.get_context_window_source_display())

    @admin.display(description="Max output", ordering="max_output_tokens")
    def output_column(self, obj: ModelConnection) -> str:
        return format_html("{}<br><small>{}</small>", f"{obj.max_output_tokens:,}",
                           obj.get_max_output_tokens_source_display())

    @admin.display(description="Source")
    def window_source(self, obj: ModelConnection) -> str:
        return figure_provenance(obj, "context_window")

    @admin.display(description="Source")
    def output_source(self, obj: ModelConnection) -> str:
        return figure_provenance(obj, "max_output_tokens")

    @admin.display(description="Window learned from a refusal")
    def learned_window(self, obj: ModelConnection) -> str:
        """A window learned from the provider's own refusal (provenance: provider_refusal)."""
        if not obj.learned_context_window:
            return "No refusal seen: the configured window is used."
        when = obj.learned_window_at.strftime("%Y-%m-%d %H:%M UTC") if obj.learned_window_at else "?"
        # CAT-9, CAT-10: a refusal, or a prompt the server cut; the note says which.
        how = "a prompt the server cut" if obj.learned_window_note.startswith("truncated_prompt") else \
            "the provider's refusal"
        return (f"{obj.learned_context_window:,} tokens — learned from {how} on {when} "
                f"({obj.learned_window_note}). Every version and run of this connection uses it at once, with the "
                "margin and output limit you did not set following it. Saving a new context window forgets it.")

    @admin.display(description="Calibration")
    def calibration(self, obj: ModelConnection) -> str:
        """What the provider counted against our estimates for this model (CTX-25)."""
        rows = list(obj.calibrations.filter(model=obj.model).order_by("-updated_at")) if obj.pk else []
        if not rows:
            return "No provider counts yet: estimates carry a safety factor until the first answer."
        return "; ".join(f"{row.estimator_id}: the provider counts ×{Calibration(ratios=tuple(row.ratios)).ratio:.2f} "
                         f"of our estimate ({row.samples} answers)" for row in rows)

    @admin.display(description="Known from")
    def concurrency_from(self, obj: ModelConnection) -> str:
        """Where the figure of requests at once came from (CAT-11)."""
        if not obj.concurrency:
            return "Unknown: no bound (calls are sent as they come)."
        return dict(ConcurrencySource.choices).get(obj.concurrency_source, obj.concurrency_source or "—")

    @admin.display(description="Server keeps")
    def server_context(self, obj: ModelConnection) -> str:
        """What the server keeps per request, and a warning when the window is set above it."""
        if not obj.server_context_window:
            return "Not published by the server (or not discovered)."
        text = format_html("{} tokens per request ({})", f"{obj.server_context_window:,}",
                           server_context_label(obj.server_context_source))
        if _figures_typed(obj) and obj.exceeds_server_context:
            return format_html('{}<p class="errornote server-context-warning" role="alert">{}</p>', text,
                               exceeds_warning(obj))
        return text

    def response_change(self, request, obj: ModelConnection):
        self._warn_if_exceeding(request, obj)
        return super().response_change(request, obj)

    def response_add(self, request, obj: ModelConnection, post_url_continue=None):
        self._warn_if_exceeding(request, obj)
        return super().response_add(request, obj, post_url_continue)

    @staticmethod
    def _warn_if_exceeding(request: HttpRequest, obj: ModelConnection) -> None:
        if obj.exceeds_server_context:
            messages.warning(request, exceeds_warning(obj))

    @method_decorator(sensitive_post_parameters("api_key"))
    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        return super().changeform_view(request, object_id, form_url, extra_context)

    def save_model(self, request, obj: ModelConnection, form: ModelConnectionAdminForm, change: bool) -> None:
        """Save through the services (key, figures' source); then refresh the admin's copy."""
        data = form.service_data()
        if change:
            # Saved inside the console's transaction: no network here (CAT-8's server window
            # is shown before saving by Discover and Test connection).
            saved = connection_update(connection=ModelConnection.objects.get(pk=obj.pk), data=data, ask_server=False)
        else:
            saved = connection_create(space=form.cleaned_data["space"], data=data, ask_server=False)
        obj.pk = saved.pk
        obj.refresh_from_db()

    # --- Discover models -------------------------------------------------------------

    connection_test_limits = CONNECTION_TEST_LIMITS

    def get_urls(self):
        view = self.admin_site.admin_view(self.discover_view)
        test = self.admin_site.admin_view(self.test_connection_view)
        return [path("discover/", view, name="models_catalog_modelconnection_discover"),
                path("test-connection/", test, name="models_catalog_modelconnection_test"), *super().get_urls()]

    @method_decorator(sensitive_post_parameters("api_key"))
    def discover_view(self, request: HttpRequest) -> HttpResponse:
        """List a provider's models for the form (CAT-1): figures, source badges, the
        manifest version and warnings. Asked by the form's panel (a fragment) or opened
        as a page. Runs no database transaction while the provider is called."""
        if not (self.has_add_permission(request) or self.has_change_permission(request)):
            raise PermissionDenied
        form = DiscoverForm(request.POST or None, initial=request.GET.dict())
        context: dict[str, Any] = {"form": form, "result": None, "error": None}
        if request.method == "POST" and form.is_valid():
            context.update(self._discover(form, by=request.user, detailed=user_is_operator(user=request.user)))
        if request.headers.get("X-Requested-With") == "XMLHttpRequest":
            return TemplateResponse(request, DISCOVER_RESULTS_TEMPLATE, context)
        context.update(
            self.admin_site.each_context(request),
            opts=self.model._meta,
            title="Discover models",
            add_url_name=f"admin:{self.model._meta.app_label}_{self.model._meta.model_name}_add",
        )
        return TemplateResponse(request, DISCOVER_PAGE_TEMPLATE, context)

    @staticmethod
    def _key_for(values: dict[str, Any]) -> tuple[str, str]:
        """The key to try (typed, else the stored one under CAT-1's rule) and where it came from."""
        if values.get("api_key"):
            return values["api_key"], "the key entered"
        if values.get("connection"):
            connection = get_object_or_404(ModelConnection.objects.defer("api_key"), pk=values["connection"])
            key = connection_stored_key_for_discovery(connection=connection, provider=values["provider"],
                                                      base_url=values.get("base_url") or "")
            return key, "the stored key" if key else "no key"
        return "", "no key"

    def _discover(self, form: DiscoverForm, *, by, detailed: bool) -> dict[str, Any]:
        values = form.cleaned_data
        provider, base_url = values["provider"], values.get("base_url") or ""
        try:
            key, _ = self._key_for(values)
            result = models_discover(provider=provider, base_url=base_url, api_key=key, by=by, detailed=detailed)
        except DomainError as exc:
            return {"error": exc.message, "error_fields": exc.fields}
        data = discovery_data(result)
        sources = dict(FigureSource.choices)
        for item in data["models"]:
            item["server_context_label"] = server_context_label(item["server_context_source"])
            for figure in ("context_window", "max_output_tokens"):
                source = item[f"{figure}_source"]
                item[f"{figure}_source_label"] = sources.get(source, source)
        return {"result": data, "provider": provider}


    # --- Test connection --------------------------------------------------------------

    @method_decorator(sensitive_post_parameters("api_key"))
    def test_connection_view(self, request: HttpRequest) -> HttpResponse:
        """Try what the form holds right now against the provider, saving nothing: one model
        list call through the guarded client (the private-endpoint switch and address rules
        of every call), bounded by a short time-out, answered in words. Never the key."""
        if not (self.has_add_permission(request) or self.has_change_permission(request)):
            raise PermissionDenied
        if request.method != "POST":
            return HttpResponse(status=405, headers={"Allow": "POST"})
        form = ConnectionTestForm(request.POST)
        outcome = self._test(form.cleaned_data, by=request.user,
                             detailed=user_is_operator(user=request.user)) if form.is_valid() else {
            "ok": False,
            "message": "; ".join(f"{name}: {' '.join(map(str, errors))}" for name, errors in form.errors.items())}
        return TemplateResponse(request, TEST_RESULT_TEMPLATE, outcome)

    def _test(self, values: dict[str, Any], *, by, detailed: bool) -> dict[str, Any]:
        provider, model = values["provider"], (values.get("model") or "").strip()
        spec = find_provider(provider)
        if spec is not None and spec.offline:
            return {"ok": True, "message": f"{spec.label} runs inside AgentLoom: there is nothing to connect to."}
        try:
            key, key_used = self._key_for(values)
            result = models_discover(provider=provider, base_url=values.get("base_url") or "", api_key=key,
                                     limits=self.connection_test_limits, by=by, detailed=detailed,
                                     probe_model=model or None, probe_limits=self.connection_test_limits)
        except DomainError as exc:
            return {"ok": False, "message": f"The connection does not work yet. {exc.message}"}
        label, ids = provider_label(provider), [item.id for item in result.models]
        listed = f"{len(ids)} model{'s' * (len(ids) != 1)}"
        reached = f"{label} answered at {result.base_url} with {key_used} and lists {listed}"
        if not model:
            return {"ok": True, "message": f"{reached}. Enter a model id, or pick one with Discover models."}
        if model in ids:
            slots = next((item.concurrency for item in result.models if item.id == model), None)
            at_once = (f" It answers {'one request' if slots == 1 else f'{slots} requests'} at a time: "
                       "further calls wait their turn." if slots else "")
            return {"ok": True, "message": f"{reached}, {model} among them.{_window_said(result, model)}{at_once} "
                                           "Save to keep these settings."}
        close = difflib.get_close_matches(model, ids, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else " Discover models shows the ids it lists."
        return {"ok": False, "message": f"{reached}, but not {model}.{hint}"}


def _window_said(result: Any, model: str) -> str:
    """CAT-8: the window the server said for ``model``, in words, before anything is saved."""
    found = next((m for m in result.models if m.id == model), None)
    if found is None or found.context_window_source != FigureSource.SERVER:
        return ""
    return (f" Its server keeps a window of {found.context_window:,} tokens "
            f"({server_context_label(found.server_context_source)}): use it with Discover models, "
            "or type it into the context window.")


def _figures_typed(obj: ModelConnection) -> bool:
    """Whether the figures are numbers: a form shown again after an error holds what was
    typed, and a field left blank (its default, decided when saved) is None there."""
    return all(isinstance(getattr(obj, name), int)
               for name in ("context_window", "max_output_tokens", "safety_margin_tokens"))


def figure_provenance(connection: ModelConnection, figure: str) -> str:
    """Where ``figure`` came from and what the model allows, in the admin's words; marked up
    for figure_sources.js, which says "Manual" as soon as the figure is typed over (the
    save then records it so), or which discovery result a *Use* filled in."""
    if connection.pk is None:
        text = "Set when saved: the discovery result you use, else manual or the platform default."
        saved = ""
    else:
        source = getattr(connection, f"get_{figure}_source_display")()
        maximum = maxima_of(connection).get(figure)
        if maximum is None:
            text = f"{source}. No maximum is known for this model (discover its models to learn it)."
        else:
            text = f"{source}. The model allows at most {maximum.value:,} ({maximum.where})."
        saved = str(getattr(connection, figure))
    return format_html('<span class="figure-source" data-figure="{}" data-saved="{}" aria-live="polite">{}</span>',
                       figure, saved, text)


def exceeds_warning(connection: ModelConnection) -> str:
    return (
        f"The configured window ({connection.context_window:,} tokens) exceeds what the server keeps "
        f"({connection.server_context_window:,}): requests use {connection.effective_context_window():,}, because "
        "the server refuses a longer prompt or, like Ollama, silently drops its start. To use more, raise the "
        "server's context (Ollama: num_ctx or OLLAMA_CONTEXT_LENGTH; llama.cpp: --ctx-size) and discover again."
    )


@admin.register(ModelPrice)
class ModelPriceAdmin(ConsoleListMixin, admin.ModelAdmin):
    """Prices per million tokens: with one, the usage page of an agent version shows cost."""

    form = ModelPriceAdminForm
    list_display = ["model", provider_column, "input_price", "cached_input_price", "cache_write_price",
                    "output_price", "updated_at"]
    list_filter = [ProviderFilter, "currency"]
    search_fields = ["model"]
    fieldsets = [
        (None, {"fields": ["provider", "model"]}),
        ("Price per million tokens", {"fields": ["input_per_million", "cached_input_per_million",
                                                 "cache_write_per_million", "output_per_million", "currency"]}),
    ]

    @admin.display(description="Input", ordering="input_per_million")
    def input_price(self, obj: ModelPrice) -> str:
        return price_text(obj.input_per_million, obj.currency)

    @admin.display(description="Cached input", ordering="cached_input_per_million")
    def cached_input_price(self, obj: ModelPrice) -> str:
        return price_text(obj.cached_input_per_million, obj.currency)

    @admin.display(description="Cache write", ordering="cache_write_per_million")
    def cache_write_price(self, obj: ModelPrice) -> str:
        return price_text(obj.cache_write_per_million, obj.currency)

    @admin.display(description="Output", ordering="output_per_million")
    def output_price(self, obj: ModelPrice) -> str:
        return price_text(obj.output_per_million, obj.currency)


def price_text(value: Decimal | None, currency: str) -> str:
    """A price per million tokens as a person writes it, with its currency: "2.00 USD",
    "0.075 USD"; an empty cache price costs the input price."""
    if value is None:
        return "as input"
    return f"{amount_text(value)} {currency}"
