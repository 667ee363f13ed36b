from __future__ import annotations

from django.urls import path

from toolservers import api

urlpatterns = [
    path("tool-servers", api.toolservers_collection, name="tool-servers"),
    path("tool-servers/<int:server_id>", api.toolserver_detail, name="tool-server-detail"),
    path("tool-servers/<int:server_id>/refresh", api.toolserver_refresh_view, name="tool-server-refresh"),
]
