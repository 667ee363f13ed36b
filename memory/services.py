"""Changing a person's memory for one agent (SPEC §7c, MEM-1, MEM-2, MEM-4).

Every change — the agent's ``memory`` tool, the person's panel or the API — comes here,
applies :func:`memory.files.memory_apply` within the bound and writes one
``MemoryChange`` with who, when, where and what, in one transaction with the files.
Changes of one owner's memory are serialized by an UPDATE of its ``MemoryState`` row
taken before the files are read: two tabs, or a run and the panel, never lose a write.
"""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.files import MemoryChange as Change
from memory.files import memory_apply, memory_block
from memory.models import MemoryChange, MemoryFile, MemoryState
from memory.selectors import MemoryOwner, memory_files, memory_limit
from sessions.models import Run


def _lock(owner: MemoryOwner) -> None:
    """Take the owner's lock for the rest of the transaction (made at the first change)."""
    if not MemoryState.objects.filter(**owner.rows()).update(updated_at=timezone.now()):
        MemoryState.objects.get_or_create(space_id=owner.space_id, agent_id=owner.agent_id, user_id=owner.user_id)
        MemoryState.objects.filter(**owner.rows()).update(updated_at=timezone.now())


def _record(owner: MemoryOwner, change: Change, *, by: str, session_id: int | None, run_id: int | None) -> None:
    MemoryChange.objects.create(**owner.rows(), by=by, session_id=session_id, run_id=run_id, command=change.command,
                                path=change.path, new_path=change.new_path, chars_before=change.chars_before,
                                chars_after=change.chars_after)


def _save(owner: MemoryOwner, before: dict[str, str], after: dict[str, str]) -> None:
    gone = [path for path in before if path not in after]
    if gone:
        MemoryFile.objects.filter(**owner.rows(), path__in=gone).delete()
    for path, text in after.items():
        if before.get(path) != text:
            MemoryFile.objects.update_or_create(space_id=owner.space_id, agent_id=owner.agent_id,
                                                user_id=owner.user_id, path=path, defaults={"content": text})


def memory_command(*, owner: MemoryOwner, arguments: dict[str, Any], by: str, session_id: int | None = None,
                   run_id: int | None = None) -> str:
    """Run one command of the memory tool on the owner's memory: its result text.
    ``MemoryCommandError`` when it cannot be done (nothing changed)."""
    if arguments.get("command") == "view":
        return memory_apply(memory_files(owner=owner), arguments, limit=memory_limit())[1]
    with transaction.atomic():
        _lock(owner)
        before = memory_files(owner=owner)
        after, result, change = memory_apply(before, arguments, limit=memory_limit())
        _save(owner, before, after)
        if change is not None:
            _record(owner, change, by=by, session_id=session_id, run_id=run_id)
    return result


def memory_file_put(*, owner: MemoryOwner, path: str, content: str, session_id: int | None = None) -> str:
    """The person writes a file whole (the panel's edit, ``PUT``)."""
    return memory_command(owner=owner, arguments={"command": "create", "path": path, "file_text": content},
                          by=MemoryChange.By.PERSON, session_id=session_id)


def memory_file_delete(*, owner: MemoryOwner, path: str, session_id: int | None = None) -> str:
    """The person deletes a file (or a directory of files)."""
    return memory_command(owner=owner, arguments={"command": "delete", "path": path}, by=MemoryChange.By.PERSON,
                          session_id=session_id)


def memory_forget(*, owner: MemoryOwner, session_id: int | None = None) -> int:
    """"Forget everything": every file goes, and so do the copies the owner's runs froze
    (``Run.memory``): each becomes the empty memory, so a run resumed later carries nothing
    of it either (one answering now keeps what it started with until it ends). The record
    says how much went. Returns the files removed."""
    with transaction.atomic():
        _lock(owner)
        before = memory_files(owner=owner)
        MemoryFile.objects.filter(**owner.rows()).delete()
        Run.objects.filter(user_id=owner.user_id, space_id=owner.space_id, version__agent_id=owner.agent_id,
                           memory__isnull=False).update(memory=memory_block({}))
        _record(owner, Change("forget", "/memories", chars_before=sum(map(len, before.values()))),
                by=MemoryChange.By.PERSON, session_id=session_id, run_id=None)
    return len(before)


def memory_use_set(*, owner: MemoryOwner, use: bool, session_id: int | None = None) -> None:
    """"Don't use memory for me" (``use`` False), or use it again; recorded when it changes."""
    with transaction.atomic():
        _lock(owner)
        state = MemoryState.objects.select_for_update().get(**owner.rows())
        if state.use_memory == use:
            return
        MemoryState.objects.filter(pk=state.pk).update(use_memory=use)
        _record(owner, Change("memory_on" if use else "memory_off", ""), by=MemoryChange.By.PERSON,
                session_id=session_id, run_id=None)
