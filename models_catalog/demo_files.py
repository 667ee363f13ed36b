"""What the offline demo model reads of the files attached to a question. Pure: no Django.

A question's files reach the model as labelled blocks after its text
(``context.attachments``): ``[File notes.txt · id 12 · text/plain · 1.2 KB · utf-8]``, the
text, ``[end of notes.txt]``; an image as ``[Image …]`` (and, for a model without image
input, the note that replaces it). The demo splits a question into its own words and these
files, and summarizes each file by its counts and first lines — honest about being a demo.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_FILE = re.compile(r"^\[File (?P<facts>[^\n]*)\]\n(?P<body>.*?)\n\[end of (?P<name>[^\n]*)\]$",
                   re.DOTALL | re.MULTILINE)
_IMAGE = re.compile(r"^\[Image (?P<facts>[^\n]*)\]$", re.MULTILINE)
_MIDDLE = re.compile(r"^\[\.\.\. (?P<count>[\d,]+) characters of .*? are not shown here .*?\.\.\.\]$",
                     re.DOTALL | re.MULTILINE)
_START = re.compile(r"^\[(?:File|Image) ", re.MULTILINE)
FIRST_LINES = 2
LINE_CHARS = 100
SHOWN_FILES = 5


@dataclass(frozen=True)
class Attached:
    """One file of a question as the demo reads it."""

    name: str
    facts: tuple[str, ...]  # what the label says besides the name: id, type, size, pages…
    text: str | None  # None for an image
    left_out: int = 0  # characters of a long file not shown (its middle)

    def summary(self) -> str:
        about = ", ".join(f for f in self.facts if not f.startswith("id ") and "does not take images" not in f)
        head = f"**{self.name}**" + (f" ({about})" if about else "")
        if self.text is None:
            return f"{head}: an image; I cannot see images, a model that takes them can describe it."
        lines = [line.strip() for line in self.text.splitlines()]
        filled = [line for line in lines if line]
        count = len(self.text.split())
        figures = f"{len(lines):,} line{'s' if len(lines) != 1 else ''}, {count:,} word{'s' if count != 1 else ''}"
        if self.left_out:
            figures += f" shown (its middle, {self.left_out:,} characters, is left out: read_file reads it)"
        if not filled:
            return f"{head}: {figures}; it has no text."
        first = " / ".join(_short(line) for line in filled[:FIRST_LINES])
        return f"{head}: {figures}; it begins “{first}”."


def _short(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS - 1] + "…"


def split_question(text: str) -> tuple[str, list[Attached]]:
    """``text`` (a user message's text) as the person's own words and the files after them."""
    start = _START.search(text or "")
    own = (text[:start.start()] if start else text or "").strip()
    files: list[tuple[int, Attached]] = []
    for match in _FILE.finditer(text or ""):
        facts = [f.strip() for f in match.group("facts").split("·")]
        body = match.group("body")
        middle = _MIDDLE.search(body)
        left_out = int(middle.group("count").replace(",", "")) if middle else 0
        if middle:
            body = body[:middle.start()] + body[middle.end():]
        name = match.group("name") or (facts[0] if facts else "a file")
        files.append((match.start(), Attached(name=name, facts=tuple(facts[1:]), text=body, left_out=left_out)))
    for match in _IMAGE.finditer(text or ""):
        facts = [f.strip() for f in match.group("facts").split("·")]
        last = facts[-1].split(" — ")[0] if facts else ""
        facts = [*facts[:-1], last] if facts else facts
        files.append((match.start(), Attached(name=facts[0] if facts else "an image", facts=tuple(facts[1:]),
                                              text=None)))
    return own, [attached for _, attached in sorted(files, key=lambda pair: pair[0])]


def files_summary(files: Sequence[Attached], *, earlier: bool = False) -> str:
    """The demo's answer about ``files``: a line per file, then what it is."""
    where = "earlier in this conversation" if earlier else "with your question"
    count = len(files)
    lines = [f"You attached {count} file{'s' if count != 1 else ''} {where}. Here is what I can tell:", ""]
    lines += [f"- {attached.summary()}" for attached in files[:SHOWN_FILES]]
    if count > SHOWN_FILES:
        lines.append(f"- … and {count - SHOWN_FILES} more.")
    lines += ["", "I am the built-in offline demo: I count and quote, I do not understand. Connect a real model "
              "in the admin console for a real summary."]
    return "\n".join(lines)
