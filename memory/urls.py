from __future__ import annotations

from django.urls import path

from memory import api

urlpatterns = [
    path("agents/<int:agent_id>/memory", api.agent_memory, name="agent-memory"),
    path("agents/<int:agent_id>/memory/<path:path>", api.agent_memory_file, name="agent-memory-file"),
]
