"""Agents (editable drafts) and their published, immutable versions (SPEC §2)."""
from __future__ import annotations

from django.conf import settings
from django.db import models


class Agent(models.Model):
    """The draft an admin edits. Runs never read it: they read a published AgentVersion."""

    space = models.ForeignKey("spaces.Space", on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=200)
    instructions = models.TextField(blank=True)
    model_connection = models.ForeignKey(
        "models_catalog.ModelConnection", on_delete=models.PROTECT, related_name="agents"
    )
    # Built-in names (``calculator``) and server tools (``"<server>.<tool>"``, TOOL-3).
    tools = models.JSONField(default=list, blank=True)
    # Per tool, what the admin decided against its annotations and defaults (TOOL-5, TOOL-7):
    # {"<server>.<tool>": {"idempotent": bool, "observes_screen": bool, "approval": ...}},
    # {"<built-in>": {"approval": "never" | "side_effects" | "always"}}. Frozen at publish.
    tool_overrides = models.JSONField(default=dict, blank=True)
    # Always written with every field filled in (CTX-20) by the agent services.
    context_policy = models.JSONField(default=dict, blank=True)
    # Per-run bounds (LOOP-2): max_model_calls, max_tool_calls, max_wall_seconds, max_depth.
    limits = models.JSONField(default=dict, blank=True)
    verify_before_complete = models.BooleanField(default=False)
    # MEM-1: each person's memory for this agent, across their sessions (off by default).
    memory = models.BooleanField(
        default=False, help_text="Each person gets a memory this agent keeps across their conversations: files "
                                 "only they (and the agent) see, which they can read, edit and erase in the chat.")
    # Storage, not behaviour, so not frozen in versions: after this many days the copies of
    # what model calls received are dropped (the records stay). Empty keeps them.
    call_log_retention_days = models.PositiveIntegerField(
        null=True, blank=True, help_text="Drop the context inspector's copies of model calls after this many days "
                                         "(records are kept). Empty: keep them.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name


class ImmutableVersionError(Exception):
    """Raised when code tries to change an AgentVersion after it was published."""


class AgentVersion(models.Model):
    """A frozen copy of an agent: what every run of a session bound to it uses.

    Immutable once saved: a later save that changes any field raises
    ``ImmutableVersionError`` (RUN-4 relies on this: an old run's budget never moves).
    ``context_policy`` is null for versions made before policies existed or imported;
    those run under the legacy character-threshold policy (CTX-40).
    """

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    name = models.CharField(max_length=200)
    instructions = models.TextField(blank=True)
    tools = models.JSONField(default=list, blank=True)
    # The server tools as published (TOOL-3): JSON text, so every request carries the same
    # bytes; read through ``agents.server_tools.frozen_server_tools``.
    server_tools = models.TextField(default="[]", blank=True)
    # TOOL-7: the built-ins' approval policies the admin set ({"http_fetch": "always"});
    # a server tool's is in its frozen entry (``approval``). Absent: the default.
    tool_approvals = models.JSONField(default=dict, blank=True)
    model_connection = models.ForeignKey(
        "models_catalog.ModelConnection",
        on_delete=models.SET_NULL,
        null=True,
        related_name="versions",
        help_text="Where the key is read from; the figures below are frozen copies.",
    )
    provider = models.CharField(max_length=32)
    base_url = models.CharField(max_length=500, blank=True)
    model = models.CharField(max_length=200)
    context_window = models.PositiveIntegerField()
    max_output_tokens = models.PositiveIntegerField()
    safety_margin_tokens = models.PositiveIntegerField()
    context_policy = models.JSONField(null=True, blank=True)
    limits = models.JSONField(default=dict, blank=True)
    verify_before_complete = models.BooleanField(default=False)
    memory = models.BooleanField(default=False)  # MEM-1, frozen: a run of this version has memory
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    published_at = models.DateTimeField(auto_now_add=True)

    FROZEN_FIELDS = (
        "agent_id", "version", "name", "instructions", "tools", "server_tools", "tool_approvals", "provider",
        "base_url", "model",
        "context_window", "max_output_tokens", "safety_margin_tokens", "context_policy",
        "limits", "verify_before_complete", "memory",
    )

    class Meta:
        ordering = ["agent_id", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "version"], name="agentversion_unique_number")
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    def save(self, *args, **kwargs) -> None:
        # The one guard that must sit on the model: no code path, admin form or shell
        # session may rewrite a published version in place.
        if not self._state.adding:
            stored = type(self).objects.filter(pk=self.pk).values(*self.FROZEN_FIELDS).first()
            current = {name: getattr(self, name) for name in self.FROZEN_FIELDS}
            if stored is not None and stored != current:
                raise ImmutableVersionError(f"agent version {self.pk} is published and cannot change")
            if stored is not None:
                return
        super().save(*args, **kwargs)
