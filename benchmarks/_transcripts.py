"""The corpus transcripts as conversations of SPEC §3 records, for the estimation benchmark.

tau-bench and the pi session go through the loaders the tests use (tests/context/corpus.py);
Claude Code sessions, SWE-agent trajectories and ToolBench answers get small loaders here,
mapped the same way: a run per real user turn, an assistant record per provider response,
a tool_result record per tool output. OpenHands event streams are left out (four short
replays whose requests are mostly one message).
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.context.corpus import load_pi, load_tau, pi_records, tau_records

CLAUDE_CODE = "claude-code-spotter/test/fixtures/transcripts"
SWE_AGENT = "swe-agent"
TOOLBENCH = "toolbench/data_example/answer"


@dataclass
class Conversation:
    """One conversation: where it comes from, the agent's instructions, records, tools."""

    source: str
    name: str
    system: str
    records: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)


class _Builder:
    """Numbers records and starts a new run at each real user turn."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.run = 0

    def add(self, kind: str, message: dict[str, Any]) -> dict[str, Any]:
        if kind == "user":
            self.run += 1
        record = {"seq": len(self.records) + 1, "run": f"r{self.run}", "instance": "main", "kind": kind,
                  "message": message}
        self.records.append(record)
        return record


def _text_parts(content: Any) -> Any:
    """Anthropic-style content blocks as OpenAI text parts (the corpus has no images)."""
    if isinstance(content, str) or content is None:
        return content or ""
    return [{"type": "text", "text": block.get("text", "")} for block in content if block.get("type") == "text"]


def _claude_code_segments(path: Path) -> list[_Builder]:
    """One builder per context a Claude Code session had: a compaction boundary starts a
    new one (the summary is its first user message). Lines of one API response (same
    ``message.id``) become one assistant record."""
    segments, builder, responses = [], _Builder(), {}
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line) if line.strip() else {}
        if entry.get("isSidechain") and "subagents" not in str(path):
            continue
        if entry.get("type") == "system" and entry.get("subtype") == "compact_boundary":
            segments.append(builder)
            builder, responses = _Builder(), {}
            continue
        message = entry.get("message") or {}
        if entry.get("type") == "assistant":
            body = responses.get(message.get("id"))
            if body is None:
                body = {"role": "assistant", "content": [], "partial": False}
                responses[message.get("id")] = body
                builder.add("assistant", body)
            for block in message.get("content") or []:
                if block.get("type") == "text":
                    body["content"].append({"type": "text", "text": block["text"]})
                elif block.get("type") == "thinking":
                    body["reasoning"] = (body.get("reasoning") or "") + block.get("thinking", "")
                elif block.get("type") == "tool_use":
                    body.setdefault("tool_calls", []).append({
                        "id": block["id"], "type": "function",
                        "function": {"name": block["name"], "arguments": json.dumps(block.get("input") or {})}})
        elif entry.get("type") == "user":
            content = message.get("content")
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
            for block in blocks:
                if block.get("type") == "tool_result":
                    builder.add("tool_result", {
                        "role": "tool", "tool_call_id": block["tool_use_id"],
                        "content": _text_parts(block.get("content")),
                        "status": "error" if block.get("is_error") else "ok"})
            texts = [b for b in blocks if b.get("type") == "text" and b.get("text")]
            if texts:
                builder.add("user", {"role": "user", "content": _text_parts(texts)})
    segments.append(builder)
    for segment in segments:
        for record in segment.records:
            if record["kind"] == "assistant" and not record["message"]["content"]:
                record["message"]["content"] = None
    return [s for s in segments if s.records]


def _chat_records(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(system prompt, records) from an OpenAI-style message list: SWE-agent's (calls in
    ``tool_calls``, results naming ``tool_call_ids``) or ToolBench's legacy one (a
    ``function_call`` per assistant message, answered by the next ``function`` message)."""
    builder, system, last_call = _Builder(), "", None
    for message in messages:
        role = message["role"]
        if role == "system":
            system = message["content"]
        elif role == "user":
            builder.add("user", {"role": "user", "content": message["content"]})
        elif role == "assistant":
            body = {"role": "assistant", "content": message.get("content") or None, "partial": False}
            calls = [{"id": c["id"], "type": "function", "function": c["function"]}
                     for c in message.get("tool_calls") or []]
            if message.get("function_call"):
                last_call = f"call_{len(builder.records)}"
                calls.append({"id": last_call, "type": "function", "function": message["function_call"]})
            if calls:
                body["tool_calls"] = calls
            builder.add("assistant", body)
        elif role in ("tool", "function"):
            ids = message.get("tool_call_ids") or ([last_call] if role == "function" and last_call else [])
            for call_id in ids:
                result = {"role": "tool", "tool_call_id": call_id, "content": message["content"], "status": "ok"}
                if message.get("name"):
                    result["name"] = message["name"]
                builder.add("tool_result", result)
    return system, builder.records


def _swe_agent(path: Path) -> Conversation:
    system, records = _chat_records(json.loads(path.read_text(encoding="utf-8"))["history"])
    return Conversation("swe-agent", path.name, system, records)


def _toolbench(path: Path) -> Conversation:
    answer = json.loads(path.read_text(encoding="utf-8"))["answer_generation"]
    system, records = _chat_records(answer["train_messages"][-1])
    tools = [{"type": "function", "function": f} for f in answer.get("function") or []]
    return Conversation("toolbench", path.parent.name + "/" + path.name, system, records, tools)


def conversations(corpus_dir: Path) -> Iterator[Conversation]:
    """Every conversation of the corpus this benchmark reads, source by source."""
    for number, entry in enumerate(load_tau(corpus_dir)):
        system, records = tau_records(entry["traj"])
        yield Conversation("tau-bench", f"airline #{number}", system, records)
    yield Conversation("pi-mono", "large-session", "", pi_records(load_pi(corpus_dir)))
    for path in sorted((corpus_dir / CLAUDE_CODE).rglob("*.jsonl")):
        for number, segment in enumerate(_claude_code_segments(path)):
            yield Conversation("claude-code", f"{path.name[:12]}…/{number}", "", segment.records)
    for path in sorted((corpus_dir / SWE_AGENT).rglob("*.traj")):
        yield _swe_agent(path)
    for path in sorted((corpus_dir / TOOLBENCH).rglob("*.json")):
        yield _toolbench(path)
