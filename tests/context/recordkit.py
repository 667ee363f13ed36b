"""Tiny builders for SPEC §3 records, so each test reads as its history."""

from __future__ import annotations

from typing import Any


def record(seq: int, kind: str, message: Any, run: str = "r1", instance: str = "main", **extra: Any) -> dict:
    """A record dict with the usual envelope."""
    return {"seq": seq, "run": run, "instance": instance, "kind": kind, "message": message, **extra}


def user(seq: int, content: Any, run: str = "r1", **extra: Any) -> dict:
    """A real user question."""
    return record(seq, "user", {"role": "user", "content": content}, run, **extra)


def call(call_id: Any, name: str = "run_tests", arguments: Any = "{}") -> dict:
    """One tool call block."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def assistant(seq: int, content: Any = None, calls: list | None = None, run: str = "r1",
              partial: bool = False, reasoning: Any = None) -> dict:
    """An assistant message record, with optional calls."""
    message: dict = {"role": "assistant", "content": content, "reasoning": reasoning, "partial": partial}
    if calls is not None:
        message["tool_calls"] = calls
    return record(seq, "assistant", message, run)


def result(seq: int, call_id: Any, content: Any = "ok", run: str = "r1", status: str = "ok",
           name: str = "run_tests", **extra: Any) -> dict:
    """A tool result record."""
    message = {"role": "tool", "tool_call_id": call_id, "name": name, "content": content, "status": status, **extra}
    return record(seq, "tool_result", message, run)


def run_status(seq: int, run: str = "r1", status: str = "cancelled") -> dict:
    """A run's terminal state."""
    return record(seq, "run_status", {"status": status, "reason": "stopped by user"}, run)


def tool_call_msg(call_id: str, name: str = "run_tests", arguments: str = "{}") -> dict:
    """A projected call block (the expected side of a test)."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def image(url: str = "data:image/png;base64,AAAA") -> dict:
    """An image content part."""
    return {"type": "image_url", "image_url": {"url": url}}


def text(value: str) -> dict:
    """A text content part."""
    return {"type": "text", "text": value}
