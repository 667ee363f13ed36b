"""Turn the shared corpus's real transcripts into SPEC §3 records for the tests.

Each source has its own shape; these helpers map it as an importer would, keeping every
quirk (reused ids, aborted turns, calls without results, metadata) for the engine to meet.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TAU_AIRLINE = "tau-bench/historical_trajectories/gpt-4o-airline.json"
PI_SESSION = "pi-mono/packages/coding-agent/test/fixtures/large-session.jsonl"


class _Seq:
    def __init__(self) -> None:
        self.value = 0

    def next(self) -> int:
        self.value += 1
        return self.value


def _record(seq: _Seq, run: str, kind: str, message: Any) -> dict:
    return {"seq": seq.next(), "run": run, "instance": "main", "kind": kind, "message": message}


def load_tau(corpus_dir: Path) -> list[dict]:
    """The 200 tau-bench airline conversations (``{task_id, traj, ...}``)."""
    return json.loads((corpus_dir / TAU_AIRLINE).read_text(encoding="utf-8"))


def tau_records(traj: list[dict]) -> tuple[str, list[dict]]:
    """(system prompt, records) for one tau-bench trajectory; each user turn is a new run.

    The system prompt is the agent's instructions, not a record: the platform adds it to
    the request itself.
    """
    seq, run, system, records = _Seq(), "r0", "", []
    for message in traj:
        role = message["role"]
        if role == "system":
            system = message["content"]
        elif role == "user":
            run = f"r{int(run[1:]) + 1}"
            records.append(_record(seq, run, "user", {"role": "user", "content": message["content"]}))
        elif role == "assistant":
            body = {"role": "assistant", "content": message.get("content"), "partial": False}
            if message.get("tool_calls"):
                body["tool_calls"] = message["tool_calls"]
            records.append(_record(seq, run, "assistant", body))
        elif role == "tool":
            records.append(_record(seq, run, "tool_result", {
                "role": "tool", "tool_call_id": message["tool_call_id"], "name": message.get("name"),
                "content": message["content"], "status": "ok"}))
    return system, records


def load_pi(corpus_dir: Path) -> list[dict]:
    """The pi-mono session, one JSON object per line."""
    lines = (corpus_dir / PI_SESSION).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _pi_assistant(message: dict) -> dict:
    texts, calls, thinking = [], [], []
    for block in message.get("content") or []:
        if block["type"] == "text":
            texts.append({"type": "text", "text": block["text"]})
        elif block["type"] == "toolCall":
            calls.append({"id": block["id"], "type": "function",
                          "function": {"name": block["name"], "arguments": json.dumps(block["arguments"])}})
        elif block["type"] == "thinking":
            thinking.append(block.get("thinking", ""))
    body: dict = {"role": "assistant", "content": texts or None, "reasoning": "\n".join(thinking) or None,
                  # An aborted or failed stream was cut: the runtime saved what it had.
                  "partial": message.get("stopReason") in ("aborted", "error")}
    if calls:
        body["tool_calls"] = calls
    return body


def pi_records(lines: list[dict]) -> list[dict]:
    """Records for the pi session: a run per user turn, a run_status after each aborted or
    failed response, model and thinking-level changes as metadata."""
    seq, run, records = _Seq(), "r0", []
    for line in lines:
        kind = line.get("type")
        if kind == "session":
            records.append(_record(seq, run, "context", {"cwd": line.get("cwd"), "model": line.get("modelId")}))
        elif kind == "model_change":
            records.append(_record(seq, run, "model_change", {"provider": line["provider"], "model": line["modelId"]}))
        elif kind == "thinking_level_change":
            records.append(_record(seq, run, "extension_state", {"thinking_level": line["thinkingLevel"]}))
        elif kind == "message":
            message = line["message"]
            role = message["role"]
            if role == "user":
                run = f"r{int(run[1:]) + 1}"
                records.append(_record(seq, run, "user", {"role": "user", "content": message["content"]}))
            elif role == "assistant":
                records.append(_record(seq, run, "assistant", _pi_assistant(message)))
                if message.get("stopReason") in ("aborted", "error"):
                    status = "cancelled" if message["stopReason"] == "aborted" else "failed"
                    records.append(_record(seq, run, "run_status", {"status": status,
                                                                    "reason": message.get("errorMessage")}))
            elif role == "toolResult":
                records.append(_record(seq, run, "tool_result", {
                    "role": "tool", "tool_call_id": message["toolCallId"], "name": message["toolName"],
                    "content": message["content"], "status": "error" if message.get("isError") else "ok"}))
    return records


def user_texts(records: list[dict]) -> list[str]:
    """The text of every real user message, in order."""
    out = []
    for record in records:
        if record["kind"] == "user":
            content = record["message"]["content"]
            out.append(content if isinstance(content, str) else "\n".join(
                p["text"] for p in content if p.get("type") == "text"))
    return out
