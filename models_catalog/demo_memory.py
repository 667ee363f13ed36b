"""The offline demo model and memory (MEM-2, MEM-3): enough to show memory end to end
with no key. Pure and deterministic, like the rest of the demo.

* "Remember that …" / "Remember: …" with the ``memory`` tool offered → it saves the words
  as one line of ``/memories/notes.md`` (``create`` the first time, ``insert`` at the end
  after that, reading what the file holds from the memory block of its system text);
* "What do you remember (about me)?" / "What do you know about me?" → it answers from the
  memory block the request carries, file by file, or says it has nothing saved.
"""
from __future__ import annotations

import json
import re
from typing import Any

NOTES = "/memories/notes.md"
_REMEMBER = re.compile(r"^\s*(?:please\s+)?remember(?:\s+that|\s*:)?\s+(?P<fact>.+?)\s*$", re.IGNORECASE | re.DOTALL)
_RECALL = re.compile(r"\bwhat\s+do\s+you\s+(?:remember|know)\b|\bwhat(?:'s|\s+is)\s+in\s+your\s+memory\b",
                     re.IGNORECASE)
_FILE = re.compile(r'<file path="(?P<path>[^"]+)">\n(?P<text>.*?)\n</file>', re.DOTALL)


def memory_files_shown(system_text: str) -> dict[str, str] | None:
    """The files of the memory block in ``system_text``; None when it carries no block."""
    start, end = system_text.find("<memory>"), system_text.rfind("</memory>")
    if start < 0 or end < start:
        return None
    return {found["path"]: found["text"] for found in _FILE.finditer(system_text[start:end])}


def memory_reply(question: str, system_text: str, tools: dict[str, Any]) -> tuple[str, tuple[str, str] | None] | None:
    """The demo's memory answer — text and maybe one ``memory`` call — or None when the
    question is not about memory (or the run has none)."""
    files = memory_files_shown(system_text)
    if files is None or "memory" not in tools:
        return None
    remembered = _REMEMBER.match(question)
    if remembered:
        fact = " ".join(remembered["fact"].split()).rstrip(".") + "."
        if NOTES in files:
            lines = files[NOTES].split("\n")
            arguments = {"command": "insert", "path": NOTES, "insert_line": len(lines), "insert_text": f"- {fact}"}
        else:
            arguments = {"command": "create", "path": NOTES, "file_text": f"- {fact}"}
        return f"I will remember that: {fact} Saving it to {NOTES}.", ("memory", json.dumps(arguments))
    if _RECALL.search(question):
        if not files:
            return "I have nothing saved about you yet. Say “Remember that …” and I will save it.", None
        shown = " ".join(f"{path}: {' '.join(text.split())}" for path, text in sorted(files.items()))
        return f"From my memory of our earlier conversations — {shown}", None
    return None
