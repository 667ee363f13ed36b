"""Reading a person's memory for one agent (SPEC §7c). Every read names its owner: a
person, an agent and the agent's space together (MEM-1); nothing here lists another's."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from memory.files import memory_block, memory_size
from memory.models import MemoryChange, MemoryFile, MemoryState


@dataclass(frozen=True)
class MemoryOwner:
    """Whose memory: one person, one agent, the agent's space."""

    space_id: int
    agent_id: int
    user_id: int

    def rows(self) -> dict[str, int]:
        return {"space_id": self.space_id, "agent_id": self.agent_id, "user_id": self.user_id}


def memory_limit() -> int:
    return settings.AGENTLOOM_MEMORY_MAX_CHARS


def memory_files(*, owner: MemoryOwner) -> dict[str, str]:
    """Every file of the owner's memory, by path."""
    return dict(MemoryFile.objects.filter(**owner.rows()).order_by("path").values_list("path", "content"))


def memory_in_use(*, owner: MemoryOwner) -> bool:
    """Whether the person lets the agent use their memory ("don't use memory for me", MEM-4)."""
    chosen = MemoryState.objects.filter(**owner.rows()).values_list("use_memory", flat=True).first()
    return True if chosen is None else chosen


def memory_for_run(*, version: Any, user_id: int | None, space_id: int | None) -> str | None:
    """What a new run of ``version`` for this person carries (MEM-3): the memory block,
    frozen with the run; None when the version has no memory or the person turned it off
    (then the run has no ``memory`` tool either)."""
    if not getattr(version, "memory", False) or user_id is None or space_id is None:
        return None
    owner = MemoryOwner(space_id=space_id, agent_id=version.agent_id, user_id=user_id)
    if not memory_in_use(owner=owner):
        return None
    return memory_block(memory_files(owner=owner))


def memory_overview(*, owner: MemoryOwner) -> dict[str, Any]:
    """The panel's and the API's view: files with sizes and times, the bound, the choice."""
    rows = list(MemoryFile.objects.filter(**owner.rows()).order_by("path").values("path", "content", "updated_at"))
    files = {row["path"]: row["content"] for row in rows}
    return {"use_memory": memory_in_use(owner=owner), "used_chars": memory_size(files),
            "max_chars": memory_limit(),
            "files": [{"path": row["path"], "content": row["content"], "chars": len(row["content"]),
                       "updated_at": row["updated_at"]} for row in rows]}


def memory_changes(*, owner: MemoryOwner, limit: int = 50) -> list[MemoryChange]:
    """The owner's latest changes, newest first (MEM-4's history)."""
    return list(MemoryChange.objects.filter(**owner.rows()).order_by("-id")[:limit])


def memory_changes_in_session(*, session_id: int) -> list[MemoryChange]:
    """The memory changes made in one session, oldest first (the session shows them)."""
    return list(MemoryChange.objects.filter(session_id=session_id).order_by("id"))
