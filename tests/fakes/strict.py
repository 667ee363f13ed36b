"""A strict front for the fake provider: it refuses what real providers refuse.

Independent of our own validator on purpose — a second opinion on every request the
loop sends: 401 for a wrong key, 400 for a missing output-limit field, for a tool
message that does not answer the previous assistant's calls, for unanswered calls,
for empty messages and duplicate call ids, and for function names OpenAI refuses.
``rejections`` lists every refusal so a test can assert the platform never sent an
invalid request.
"""
from __future__ import annotations

import re
from typing import Any

from tests.fakes.responses import Handler, RecordedRequest, ResponseSpec, error

FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")


def tool_problems(tools: Any) -> list[str]:
    """OpenAI's refusals of function definitions, in its words."""
    problems = []
    for k, tool in enumerate(tools if isinstance(tools, list) else []):
        name = (tool.get("function") or {}).get("name") if isinstance(tool, dict) else None
        if not isinstance(name, str) or not FUNCTION_NAME.fullmatch(name):
            problems.append(f"Invalid 'tools[{k}].function.name': string does not match pattern. Expected a string "
                            "that matches the pattern '^[a-zA-Z0-9_-]+$'.")
        elif len(name) > 64:
            problems.append(f"Invalid 'tools[{k}].function.name': string too long. Expected a string with maximum "
                            f"length 64, but got a string with length {len(name)} instead.")
    return problems


def protocol_problems(body: Any) -> list[str]:
    if not isinstance(body, dict):
        return ["body is not an object"]
    problems = tool_problems(body.get("tools"))
    if "max_tokens" not in body and "max_completion_tokens" not in body:
        problems.append("missing max_tokens / max_completion_tokens")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return problems + ["messages missing"]
    open_calls: list[str] = []
    seen_ids: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_calls:
                problems.append(f"message {index}: tool result {call_id!r} answers no pending call")
            else:
                open_calls.remove(call_id)
            continue
        if open_calls:
            problems.append(f"message {index}: calls {open_calls} have no result")
            open_calls = []
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                if call.get("id") in seen_ids:
                    problems.append(f"message {index}: duplicate call id {call.get('id')!r}")
                seen_ids.add(call.get("id"))
                open_calls.append(call.get("id"))
            if not message.get("content") and not message.get("tool_calls"):
                problems.append(f"message {index}: empty assistant message")
        elif role in {"user", "system"} and not message.get("content"):
            problems.append(f"message {index}: empty {role} message")
    if open_calls:
        problems.append(f"calls {open_calls} have no result")
    if messages[-1].get("role") == "assistant":
        problems.append("request ends on an assistant turn")
    return problems


class StrictProvider:
    """Wraps a handler; chat requests are checked before the handler sees them."""

    def __init__(self, handler: Handler, *, api_key: str | None = None) -> None:
        self.handler = handler
        self.api_key = api_key
        self.rejections: list[tuple[int, list[str]]] = []

    def __call__(self, request: RecordedRequest) -> ResponseSpec:
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            self.rejections.append((401, ["wrong key"]))
            return error(401, "Incorrect API key provided", code="invalid_api_key")
        if request.path.endswith("/chat/completions"):
            problems = protocol_problems(request.json)
            if problems:
                self.rejections.append((400, problems))
                return error(400, "; ".join(problems), code="invalid_request_error")
        return self.handler(request)
