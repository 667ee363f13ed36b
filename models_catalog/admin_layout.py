"""How the model connection form is laid out for a newcomer (SPEC §10): a new connection's
key section is the key input alone (there is no stored key to show or remove), and
Discover models and Test connection sit right under the model field they fill in and try.
Mixed into ``ModelConnectionAdmin`` (``models_catalog.admin``) before ``admin.ModelAdmin``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.template.loader import render_to_string

from models_catalog.models import ModelConnection

MODEL_TOOLS_TEMPLATE = "admin/models_catalog/modelconnection/model_tools.html"

if TYPE_CHECKING:
    _AdminBase = admin.ModelAdmin[Any]
else:
    _AdminBase = object


class ConnectionFormLayout(_AdminBase):
    def get_fieldsets(self, request, obj=None):
        """A new connection has no stored key to show or remove: its key section is the input alone."""
        fieldsets = super().get_fieldsets(request, obj)
        if obj is not None:
            return fieldsets
        return [(name, {**options, "fields": ["api_key"]}) if name == "API key" else (name, options)
                for name, options in fieldsets]

    @admin.display(description="Find or try the model")
    def model_tools(self, obj: ModelConnection) -> str:
        """Discover models and Test connection, under the model field (discover.js drives them)."""
        return render_to_string(MODEL_TOOLS_TEMPLATE, {"connection": "" if obj.pk is None else obj.pk})
