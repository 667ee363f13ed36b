"""How the chat speaks of memory (SPEC §7c, MEM-4): a memory tool step in words, a change
in the panel's history and in the session's notes, and the panel's own sentences. One
table each, read by the server's templates and handed to the chat's script
(``config.memoryWords``), so a step or a change reads the same live and after a reload.
Plain text, escaped wherever it is shown."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from core.api.parsers import json_loads_bounded
from memory.models import MemoryChange
from tools.memory import NAME as TOOL_NAME

# A memory tool call on its step, instead of its JSON arguments.
STEP_WORDS: dict[str, str] = {
    "view": "Looked in memory: {path}",
    "create": "Saved to memory: {path}",
    "str_replace": "Edited in memory: {path}",
    "insert": "Added to memory: {path}",
    "delete": "Deleted from memory: {path}",
    "rename": "Renamed in memory: {old_path} → {new_path}",
}

# A recorded change, after who made it ("You" or the agent's name).
CHANGE_WORDS: dict[str, str] = {
    "create": "saved {path}",
    "str_replace": "edited {path}",
    "insert": "added to {path}",
    "delete": "deleted {path}",
    "rename": "renamed {path} to {new_path}",
    "forget": "forgot everything in memory",
    "memory_off": "turned memory off (“don't use memory for me”)",
    "memory_on": "turned memory back on",
}

PANEL_WORDS: dict[str, str] = {
    "you": "You",
    "agentOff": "This agent does not keep a memory now, so nothing new is saved. Anything kept from before is "
                "still yours to see and erase here.",
    "nextQuestion": "Changes reach the agent from your next question; an answer being written keeps the memory "
                    "it started with.",
    "empty": "Nothing is kept in this agent's memory of you.",
    "used": "{used} of {max} characters used",
    "forgetConfirm": "Forget everything this agent keeps about you? Every file is erased for good.",
    "noteInSession": "Memory: {words}",
    "saved": "Saved.",
    "deleted": "Deleted {path}.",
    "forgotten": "Everything was forgotten.",
    "useOn": "The agent uses this memory in your new questions.",
    "useOff": "The agent does not use this memory for you: your questions carry none of it.",
}


def memory_step_words(name: str, arguments: Any) -> str:
    """A memory tool call in words ("Saved to memory: /memories/alice.md"); "" for any
    other tool, or arguments that do not say what the call did."""
    if name != TOOL_NAME:
        return ""
    try:
        parsed = arguments if isinstance(arguments, dict) else json_loads_bounded(arguments)
    except (TypeError, ValueError):
        return ""
    if not isinstance(parsed, dict) or parsed.get("command") not in STEP_WORDS:
        return ""
    fields = {key: str(parsed.get(key) or "?") for key in ("path", "old_path", "new_path")}
    return STEP_WORDS[parsed["command"]].format(**fields)


def memory_change_words(change: MemoryChange, *, agent_name: str) -> str:
    """A change as a sentence: who, then what ("You deleted /memories/a.md")."""
    who = PANEL_WORDS["you"] if change.by == MemoryChange.By.PERSON else agent_name
    what = CHANGE_WORDS.get(change.command, change.command).format(path=change.path, new_path=change.new_path)
    return f"{who} {what}"


def memory_notes_by_run(changes: Iterable[MemoryChange], runs: Iterable[Any]) -> Mapping[int, list[str]]:
    """The person's changes from the panel during a session, as notes placed after the
    run they followed (the session's first run for one made before any): run id → notes.
    The agent's own changes are on its tool steps already."""
    ordered = sorted(runs, key=lambda run: run.created_at)
    notes: dict[int, list[str]] = {}
    for change in changes:
        if change.by != MemoryChange.By.PERSON or not ordered:
            continue
        after = [run for run in ordered if run.created_at <= change.created_at]
        run = after[-1] if after else ordered[0]
        notes.setdefault(run.pk, []).append(PANEL_WORDS["noteInSession"].format(
            words=memory_change_words(change, agent_name="")))
    return notes


def memory_words() -> dict[str, Any]:
    """What the chat's script is handed: every table above."""
    return {"tool": TOOL_NAME, "steps": STEP_WORDS, "changes": CHANGE_WORDS, "panel": PANEL_WORDS}
