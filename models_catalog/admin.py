from __future__ import annotations

from django.contrib import admin

from models_catalog.models import ModelConnection


@admin.register(ModelConnection)
class ModelConnectionAdmin(admin.ModelAdmin):
    list_display = ["name", "space", "provider", "model", "context_window", "max_output_tokens", "figures_source"]
    list_select_related = ["space"]
    list_filter = ["provider", "figures_source"]
    search_fields = ["name", "model"]
    # The key column is encrypted and write-only: never listed, never shown.
    exclude = ["api_key"]
    readonly_fields = ["api_key_hint", "manifest_version", "created_at", "updated_at"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("api_key")
