from __future__ import annotations

from django.urls import path

from models_catalog import api

urlpatterns = [
    path("model-connections", api.connections_collection, name="model-connections"),
    path("model-connections/<int:connection_id>", api.connection_detail, name="model-connection-detail"),
]
