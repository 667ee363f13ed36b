"""Tool servers (SPEC §7a): a space's remote MCP servers and the operator's local ones.

A *remote* server belongs to a space: a URL, the transport it was found to speak, and the
headers an admin entered (encrypted, write-only: only ``header_hints`` is ever shown).
An *operator* server is one of ``AGENTLOOM_MCP_SERVERS``: its row holds only what a worker
listed (the command stays in the operator's file, so nothing in the database can name a
command to start). Either way the row keeps the last listing of its tools, in the order
and spelling the server gave (``tools_json`` is text: JSON columns may reorder keys, and
published versions freeze these definitions byte for byte, TOOL-3).
"""
from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.crypto import encrypt

NAME_PATTERN = r"^[a-z][a-z0-9_]{0,30}$"
DEFAULT_TIMEOUT_SECONDS = 60


class ToolServer(models.Model):
    class Kind(models.TextChoices):
        REMOTE = "remote", "Remote (a space's server)"
        OPERATOR = "operator", "Operator's (local, over stdio)"

    space = models.ForeignKey("spaces.Space", on_delete=models.CASCADE, related_name="tool_servers", null=True,
                              blank=True, help_text="Empty for the operator's servers.")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.REMOTE)
    name = models.CharField(max_length=31)
    url = models.CharField(max_length=500, blank=True, default="")
    transport = models.CharField(max_length=32, blank=True, default="")  # streamable_http | sse | stdio
    # A JSON object of header name → value. Sent only to ``url`` (CAT-6), never shown.
    headers = encrypt(models.TextField(blank=True, default=""))
    header_hints = models.JSONField(default=dict, blank=True)
    timeout_seconds = models.PositiveIntegerField(default=DEFAULT_TIMEOUT_SECONDS)
    protocol_version = models.CharField(max_length=32, blank=True, default="")
    server_info = models.JSONField(default=dict, blank=True)
    tools_json = models.TextField(default="[]")
    skipped = models.JSONField(default=list, blank=True)  # listed tools we cannot offer, with why
    listed_at = models.DateTimeField(null=True, blank=True)
    list_error = models.CharField(max_length=300, blank=True, default="")  # operator's: the last listing's failure
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(fields=["space", "name"], condition=Q(space__isnull=False),
                                    name="toolserver_unique_name_per_space"),
            models.UniqueConstraint(fields=["name"], condition=Q(space__isnull=True),
                                    name="toolserver_unique_operator_name"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The last listing: ``[{name, description, input_schema, annotations}]`` in server order."""
        return json.loads(self.tools_json or "[]")

    def tool(self, name: str) -> dict[str, Any] | None:
        return next((tool for tool in self.tools if tool["name"] == name), None)

    def header_values(self) -> dict[str, str]:
        """The stored headers (decrypted): only for sending them to ``url``."""
        return json.loads(self.headers) if self.headers else {}
