from __future__ import annotations

from django.urls import path

from agents import api

urlpatterns = [
    path("agents", api.agents_collection, name="agents"),
    path("agents/<int:agent_id>", api.agent_detail, name="agent-detail"),
    path("agents/<int:agent_id>/publish", api.agent_publish_view, name="agent-publish"),
    path("agents/<int:agent_id>/versions", api.agent_versions, name="agent-versions"),
]
