"""A person's memory for one agent (SPEC §7c): its files, what changed them, and whether
the person lets the agent use it. Contents are encrypted; what is filtered on stays plain.

Memory belongs to one person and one agent in one space (MEM-1): every row names all
three, and every read and write goes through ``memory.selectors`` / ``memory.services``
with a ``MemoryOwner`` built from them.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models

from core.crypto import encrypt


class MemoryFile(models.Model):
    space = models.ForeignKey("spaces.Space", on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="+", db_index=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    path = models.CharField(max_length=200)
    content = encrypt(models.TextField(blank=True, default=""))
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["agent_id", "user_id", "path"]
        constraints = [models.UniqueConstraint(fields=["agent", "user", "path"], name="memoryfile_unique_path")]

    def __str__(self) -> str:
        return self.path


class MemoryState(models.Model):
    """One row per person and agent once either touched memory: the person's choice
    (``use_memory``, MEM-4) and the lock every change of their memory takes first, so two
    writers (two tabs, a run and the panel) apply one after the other."""

    space = models.ForeignKey("spaces.Space", on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="+", db_index=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    use_memory = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "user"], name="memorystate_unique_owner")]

    def __str__(self) -> str:
        return f"memory of user {self.user_id} with agent {self.agent_id}"


class MemoryChange(models.Model):
    """The record of one change (MEM-4): who made it, when, in which session (none: the
    memory log, a change from the panel or the API) and what — the command, the paths and
    the sizes, never the text (forgetting must forget; an agent's text is in its session's
    tool call)."""

    class By(models.TextChoices):
        AGENT = "agent", "The agent"
        PERSON = "person", "The person"

    space = models.ForeignKey("spaces.Space", on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="+", db_index=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False)
    by = models.CharField(max_length=8, choices=By.choices)
    session = models.ForeignKey("agent_sessions.Session", on_delete=models.SET_NULL, null=True, blank=True,
                                related_name="+", db_index=False)
    run_id = models.BigIntegerField(null=True, blank=True)
    command = models.CharField(max_length=16)  # a tool command, or forget / use_memory
    path = models.CharField(max_length=200, blank=True)
    new_path = models.CharField(max_length=200, blank=True)
    chars_before = models.PositiveIntegerField(default=0)
    chars_after = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["agent", "user", "-id"], name="memorychange_owner_latest"),
                   models.Index(fields=["session", "id"], name="memorychange_session")]
