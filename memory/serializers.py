"""Input and output shapes of the memory API (SPEC §7c, MEM-4)."""
from __future__ import annotations

from rest_framework import serializers

from core.api.fields import MAX_ID, StrictCharField
from memory.files import MAX_PATH_CHARS
from memory.models import MemoryChange
from models_catalog.serializers import RejectUnknownFields

SESSION_HELP = ("Optional: the caller's own session of this agent in which the change is made (the session then "
                "shows it); without it the change is in the memory log only.")


class StrictBooleanField(serializers.BooleanField):
    """true or false only: "yes", 1 or "off" are refused rather than guessed."""

    default_error_messages = {"invalid": "Must be true or false."}

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class MemoryUseIn(RejectUnknownFields):
    use_memory = StrictBooleanField(help_text='false: "don\'t use memory for me" — new runs of this agent for you '
                                              "carry no memory and have no memory tool; true: use it again.")
    session = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_ID,
                                       help_text=SESSION_HELP)


class MemoryFileIn(RejectUnknownFields):
    # The bound on the whole memory is the service's (AGENTLOOM_MEMORY_MAX_CHARS); this one
    # only keeps a body far past any bound from being held and compared.
    content = StrictCharField(allow_blank=True, trim_whitespace=False, max_length=1_000_000,
                              help_text="The file's whole text; the memory's bound counts every path and text.")
    session = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_ID,
                                       help_text=SESSION_HELP)


class MemoryFileOut(serializers.Serializer):
    path = serializers.CharField(help_text=f"Under /memories, at most {MAX_PATH_CHARS} characters.")
    content = serializers.CharField()
    chars = serializers.IntegerField()
    updated_at = serializers.DateTimeField()


class MemoryChangeOut(serializers.Serializer):
    by = serializers.ChoiceField(choices=MemoryChange.By.choices, help_text="agent (its memory tool) or person.")
    command = serializers.CharField(help_text="create, str_replace, insert, delete, rename; forget (everything); "
                                              "memory_off / memory_on (don't use memory for me, or use it again).")
    path = serializers.CharField()
    new_path = serializers.CharField(help_text="rename: where the file went; else empty.")
    chars_before = serializers.IntegerField()
    chars_after = serializers.IntegerField()
    session = serializers.IntegerField(source="session_id", allow_null=True,
                                       help_text="The session where it happened; null: the memory log.")
    created_at = serializers.DateTimeField()


class MemoryOut(serializers.Serializer):
    use_memory = serializers.BooleanField(help_text='false: the person chose "don\'t use memory for me".')
    used_chars = serializers.IntegerField(help_text="What the bound counts: every file's path and text.")
    max_chars = serializers.IntegerField(help_text="AGENTLOOM_MEMORY_MAX_CHARS.")
    agent_memory = serializers.BooleanField(help_text="Whether the agent's latest published version keeps memory.")
    files = MemoryFileOut(many=True)
    changes = MemoryChangeOut(many=True, help_text="The latest 50, newest first; never the text.")
