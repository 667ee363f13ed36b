"""A Hypothesis strategy for messy session histories, and what each one must keep.

An event is a kind plus a seed; the builder turns the seed into that event's details. This
keeps generation cheap (the main property runs 500 times in CI) while shrinking still
removes and simplifies events one at a time.

Markers make the properties checkable by search: ``Q<n>``/``SUP<n>`` are real user texts,
``RES<n>`` stored results, ``META<n>`` text that must never reach the model.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from hypothesis import strategies as st

EVENTS = ("question", "question", "assistant", "assistant", "assistant", "result", "result", "result",
          "cancel", "supplement", "metadata", "command", "checkpoint", "user_again")
METADATA = ("run_status", "model_change", "label", "extension_state", "context", "compaction_summary",
            "future_kind")
ID_POOL = ("a", "b", "dup", "call.1", "ns:x", "with space", "x" * 80, "toolu_01A")
TOOLS = ("browser_use", "browser_use", "run", "plot")
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}  # the PNG signature


def histories(max_events: int = 40) -> st.SearchStrategy[list[tuple[str, int]]]:
    """Lists of (event kind, seed)."""
    return st.lists(st.tuples(st.sampled_from(EVENTS), st.integers(0, 2**16)), max_size=max_events)


@dataclass
class History:
    """Records plus what the projection must keep."""

    records: list[dict] = field(default_factory=list)
    user_texts: list[tuple[int, str]] = field(default_factory=list)  # (seq, text)
    last_checkpoint: int = 0


class _Builder:
    def __init__(self) -> None:
        self.history = History()
        self.seq = 0
        self.runs = ["r1"]
        self.ids: list[str] = []
        self.n = 0

    def _add(self, kind: str, message, run: str | None = None, **extra) -> int:
        self.seq += 1
        self.history.records.append({"seq": self.seq, "run": run or self.runs[-1], "instance": "main",
                                     "kind": kind, "message": message, **extra})
        return self.seq

    def _marker(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def _user(self, rng: random.Random, kind: str, prefix: str) -> None:
        words = self._marker(prefix)
        content = [{"type": "text", "text": words}, IMAGE] if rng.random() < 0.2 else words
        extra = {"display": False} if rng.random() < 0.1 else {}
        message = {"role": "user", "content": content}
        if kind == "user" and rng.random() < 0.25:
            message["attachments"] = [self._attachment(rng) for _ in range(rng.randint(1, 3))]
        seq = self._add(kind, message, **extra)
        self.history.user_texts.append((seq, words))

    def _attachment(self, rng: random.Random) -> dict:
        """A file of a question (RUN-13): short or long text, a PDF, an image, or a broken one."""
        self.n += 1
        shape = rng.random()
        base = {"id": self.n, "name": rng.choice(["app.log", "notes.md", "", "a b·c.txt"]),
                "size": rng.randint(0, 10**7)}
        if shape < 0.3:
            return {**base, "kind": "text", "content_type": "text/plain", "encoding": "utf-8",
                    "text": rng.choice(["", "short text", "line\n" * rng.randint(1, 8_000), "e\u0301" * 13_000])}
        if shape < 0.45:
            return {**base, "kind": "pdf", "content_type": "application/pdf", "pages": 3, "pages_read": 2,
                    "text": "page text " * rng.randint(1, 4_000)}
        if shape < 0.85:
            media, data = rng.choice([("image/png", "iVBORw0KGgo="), ("image/gif", "R0lGODlh")])  # as sniffed
            return {**base, "kind": "image", "content_type": media, "width": 8, "height": 8, "data": data}
        return {**base, "kind": "image", "content_type": rng.choice(["image/svg+xml", None]),
                "data": rng.choice(["", None])}

    def question(self, rng: random.Random) -> None:
        self.runs.append(f"r{len(self.runs) + 1}")
        self._user(rng, "user", "Q")

    def user_again(self, rng: random.Random) -> None:
        self._user(rng, "user", "Q")

    def supplement(self, rng: random.Random) -> None:
        self._user(rng, "supplement", "SUP")

    def assistant(self, rng: random.Random) -> None:
        partial = rng.random() < 0.15
        calls = []
        for _ in range(rng.randint(0, 3)):
            call_id = rng.choice(ID_POOL + (f"id{self.n}", f"id{self.n}")) if rng.random() < 0.9 else None
            arguments = rng.choice(['{"k": 1}', "{}", '{"path": "src/ma' if partial else "{oops", "[1]"])
            calls.append({"id": call_id, "type": "function",
                          "function": {"name": rng.choice(TOOLS), "arguments": arguments}})
            if call_id:
                self.ids.append(call_id)
        content = rng.choice([None, "", self._marker("ASST"), [{"type": "text", "text": self._marker("ASST")}]])
        message = {"role": "assistant", "content": content, "partial": partial,
                   "reasoning": rng.choice([None, "thinking", [{"type": "thinking", "thinking": "t"}]])}
        if calls or rng.random() < 0.3:
            message["tool_calls"] = calls
        self._add("assistant", message)

    def result(self, rng: random.Random) -> None:
        # Mostly answer a recent call (so pairs form), sometimes anything at all.
        if self.ids and rng.random() < 0.7:
            call_id = rng.choice(self.ids[-3:])
        else:
            call_id = rng.choice(self.ids + list(ID_POOL)) if rng.random() < 0.9 else None
        words = self._marker("RES")
        shape = rng.random()
        if shape < 0.25:
            content = [{"type": "text", "text": words}, IMAGE, IMAGE]
        elif shape < 0.3:
            content = words + " " + "log line\n" * 3500  # past the CTX-7 limit
        elif shape < 0.35:
            content = [{"type": "text", "text": words}, {"type": "text", "text": "y" * 25_000}]
        else:
            content = words
        run = rng.choice(self.runs) if rng.random() < 0.2 else self.runs[-1]
        message = {"role": "tool", "tool_call_id": call_id, "content": content,
                   "status": rng.choice(["ok", "ok", "error", "cancelled", "timeout", "unknown"])}
        self._add(rng.choice(["tool_result", "tool_result", "delegation_result"]), message, run=run)

    def cancel(self, rng: random.Random) -> None:
        # A run ends, or is resumed (reopened), now and then an older one.
        status = rng.choice(["cancelled", "interrupted", "failed", "completed", "resumed"])
        run = rng.choice(self.runs) if status == "resumed" and rng.random() < 0.3 else None
        self._add("run_status", {"status": status, "reason": self._marker("META")}, run=run)

    def metadata(self, rng: random.Random) -> None:
        marker = self._marker("META")
        self._add(rng.choice(METADATA), {"role": "user", "content": marker, "text": marker})

    def command(self, rng: random.Random) -> None:
        exclude = rng.random() < 0.5
        self._add("command", {"command": "ls", "exit_code": rng.choice([0, 1]), "exclude": exclude,
                              "output": self._marker("META" if exclude else "CMD")})

    def checkpoint(self, rng: random.Random) -> None:
        words = self._marker("CKPT")
        messages = [{"role": "user", "content": words}]
        if rng.random() < 0.5:
            messages += [{"role": "assistant", "content": None, "tool_calls": [
                {"id": "k1", "type": "function", "function": {"name": "run", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "k1", "content": self._marker("RES")}]
        if rng.random() < 0.3:
            messages.append({"role": "assistant", "content": self._marker("ASST")})
        covered = self.seq  # covers everything before it
        flaw = rng.random()
        if flaw < 0.15:
            messages.append({"role": "narrator", "content": self._marker("META")})
        elif flaw < 0.25:
            covered = self.seq + 5
        elif flaw < 0.3:
            messages = self._marker("META")
        seq = self._add("compaction", {"messages": messages, "covered_seq": covered, "summary": "s"})
        if flaw >= 0.3:
            self.history.last_checkpoint = seq


def build(events: list[tuple[str, int]]) -> History:
    """Turn generated events into records and the facts the properties check."""
    builder = _Builder()
    for kind, seed in events:
        getattr(builder, kind)(random.Random(seed))
    return builder.history
