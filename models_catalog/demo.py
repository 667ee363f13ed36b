"""The offline demo model (provider ``demo``): a chat that works with no key and no network.

It is deterministic and clearly labelled in every answer. It plugs into the same
registry and yields the same events as the HTTP client, so the run loop, the events and
the tool flow can be shown (and tested) end to end:

* the last user message asks arithmetic ("what is 17*23") and a ``calculator`` tool is
  offered → it calls ``calculator`` first, then answers with the tool's result; with
  ``update_plan`` offered too, it writes a two-step plan first and marks it done before
  it answers, so the plan shows in the chat;
* it asks the time and ``current_time`` is offered → it calls ``current_time``;
* otherwise it replies with a short summary of the question and how many messages it
  received.

Answers stream in several deltas and end with usage figures (a rough 4-bytes-per-token
count, labelled as such by the model id being the demo's).
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from context.records import content_text
from context.surrogates import replace_lone_surrogate_escapes, replace_lone_surrogates
from models_catalog.providers.events import ChatStream, StreamEnd, TextDelta, ToolCall, ToolCallDelta, Usage, as_dict

DEMO_MODEL_ID = "agentloom-demo"
DEMO_BASE_URL = "demo://offline"
LABEL = "(Offline demo model)"

_ARITH_CANDIDATE = re.compile(r"[\d\s+\-*/×÷^().%]+")
_ARITH_SHAPE = re.compile(r"\d\s*[-+*/×÷^%]\s*\(?\s*-?\d")
_TIMES_X = re.compile(r"(?<=\d)\s*[xX]\s*(?=\d)")
_TIME_QUESTION = re.compile(
    r"\b(what time|current time|time is it|the time now|what's the time|time now|today's date|date today|what day is)\b"
)


class DemoChatClient:
    """The demo model behind the chat-client interface (``stream_chat``)."""

    provider = "demo"

    def __init__(self, **_: Any) -> None:
        # Accepts (and ignores) base_url, api_key, transport…: the factory signature is shared.
        pass

    def __repr__(self) -> str:
        return "DemoChatClient()"

    def __enter__(self) -> DemoChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        pass

    def stream_chat(self, request_body: Mapping[str, Any]) -> ChatStream:
        """Answer ``request_body`` (an OpenAI chat-completions body) as events."""
        messages = [m for m in request_body.get("messages") or [] if isinstance(m, dict)]
        tools = _offered_tools(request_body.get("tools"))
        text, call = plan_reply(messages, tools)
        # It echoes the question and the tool results: its answer is text from outside too.
        text = replace_lone_surrogates(text)
        for piece in _pieces(text):
            yield TextDelta(piece)
        calls: tuple[ToolCall, ...] = ()
        if call is not None:
            name, arguments = call[0], replace_lone_surrogate_escapes(call[1])
            call_id = f"demo_{len(messages)}_0"
            half = max(1, len(arguments) // 2)
            yield ToolCallDelta(index=0, id=call_id, name=name, arguments=arguments[:half])
            yield ToolCallDelta(index=0, id=call_id, name=name, arguments=arguments[half:])
            calls = (ToolCall(id=call_id, name=name, arguments=arguments, index=0),)
        prompt_tokens = max(1, len(json.dumps(messages, ensure_ascii=False).encode("utf-8", "surrogatepass")) // 4)
        completion_tokens = max(1, (len(text) + sum(len(c.arguments) for c in calls)) // 4)
        yield StreamEnd(
            finish_reason="tool_calls" if calls else "stop",
            usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                        total_tokens=prompt_tokens + completion_tokens),
            cut=False,
            text=text,
            tool_calls=calls,
            model=DEMO_MODEL_ID,
        )


def _plan(expression: str, *, done: bool) -> str:
    first, second = ("done", "done") if done else ("in_progress", "pending")
    return json.dumps({"steps": [{"step": f"Compute {expression} with the calculator", "status": first},
                                 {"step": "Give the answer", "status": second}]})


def _calls_since_question(messages: list[dict[str, Any]]) -> list[str]:
    """The names of the tools called since the last user message, in order."""
    names: list[str] = []
    for message in reversed(messages):
        if message.get("role") == "user" and not str(message.get("content", "")).startswith("Images returned"):
            break
        for call in reversed(message.get("tool_calls") or []):
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                names.insert(0, str(call["function"].get("name", "")))
    return names


def _planned_reply(messages: list[dict[str, Any]], expression: str) -> tuple[str, tuple[str, str] | None]:
    """With ``update_plan`` and ``calculator`` offered: plan, compute, mark done, answer."""
    called = _calls_since_question(messages)
    if not called:
        return f"{LABEL} First, a plan.", ("update_plan", _plan(expression, done=False))
    if called == ["update_plan"]:
        return f"{LABEL} Let me compute {expression} with the calculator.", ("calculator",
                                                                             json.dumps({"expression": expression}))
    if called == ["update_plan", "calculator"]:
        return f"{LABEL} Marking the plan done.", ("update_plan", _plan(expression, done=True))
    answers = [content for name, content in _results_since_question(messages) if name == "calculator"]
    return f"{LABEL} " + _describe_result("calculator", answers[-1] if answers else "(no result)"), None


def plan_reply(messages: list[dict[str, Any]], tools: dict[str, dict[str, Any]]) -> tuple[str, tuple[str, str] | None]:
    """The demo's answer: its text and, optionally, one tool call ``(name, arguments)``."""
    question = _last_user_text(messages)
    expression = find_arithmetic(question)
    if expression and "calculator" in tools and "update_plan" in tools:
        return _planned_reply(messages, expression)
    results = _trailing_tool_results(messages)
    if results:
        lines = [_describe_result(name, content) for name, content in results]
        return f"{LABEL} " + " ".join(lines), None
    if expression and "calculator" in tools:
        arg = _string_parameter(tools["calculator"], preferred=("expression", "expr", "input", "query"))
        call = ("calculator", json.dumps({arg: expression}))
        return f"{LABEL} Let me compute {expression} with the calculator.", call
    if _TIME_QUESTION.search(question.lower()) and "current_time" in tools:
        return f"{LABEL} Let me check the clock.", ("current_time", json.dumps(_time_arguments(tools["current_time"])))
    summary = " ".join(question.split())
    if len(summary) > 120:
        summary = summary[:117] + "…"
    hint = " Enable the calculator tool and I will compute it." if expression else ""
    return (
        f"{LABEL} You asked: “{summary or '(nothing)'}”. I received {len(messages)} "
        f"message{'s' if len(messages) != 1 else ''}.{hint} I am the built-in offline demo: I need no API "
        "key and cannot really reason. Connect a real provider in the admin console for real answers."
    ), None


def find_arithmetic(text: str) -> str | None:
    """The arithmetic expression in ``text`` ("what is 17 x 23?" → "17*23"), if any."""
    text = _TIMES_X.sub("*", text or "")
    best = None
    for match in _ARITH_CANDIDATE.finditer(text):
        candidate = match.group().strip().rstrip(".").strip()
        if _ARITH_SHAPE.search(candidate) and (best is None or len(candidate) > len(best)):
            best = candidate
    if best is None:
        return None
    return best.replace("×", "*").replace("÷", "/").replace(" ", "")


def _offered_tools(tools: Any) -> dict[str, dict[str, Any]]:
    offered: dict[str, dict[str, Any]] = {}
    for tool in tools or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            offered[function["name"]] = function
    return offered


def _string_parameter(function: dict[str, Any], *, preferred: tuple[str, ...]) -> str:
    """The argument name to use: a preferred name, else the first string property."""
    params = as_dict(function.get("parameters"))
    props = as_dict(params.get("properties"))
    for name in preferred:
        if name in props:
            return name
    for name, schema in props.items():
        if isinstance(schema, dict) and schema.get("type") == "string":
            return name
    return preferred[0]


def _time_arguments(function: dict[str, Any]) -> dict[str, Any]:
    params = as_dict(function.get("parameters"))
    required = params.get("required")
    return {name: "UTC" for name in required if isinstance(name, str)} if isinstance(required, list) else {}


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return _words(message.get("content"))
    return ""


def _trailing_tool_results(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The tool results at the end of the conversation, with the names of their calls."""
    tail: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        tail.insert(0, message)
    if not tail:
        return []
    names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                names[str(call.get("id"))] = str(call["function"].get("name", "tool"))
    return [(message.get("name") or names.get(str(message.get("tool_call_id")), "tool"),
             _words(message.get("content")).strip()) for message in tail]


def _results_since_question(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(tool name, result text) of every result since the last user message."""
    names: dict[str, str] = {}
    results: list[tuple[str, str]] = []
    for message in messages:
        if message.get("role") == "user" and not str(message.get("content", "")).startswith("Images returned"):
            results = []
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                names[str(call.get("id"))] = str(call["function"].get("name", "tool"))
        if message.get("role") == "tool":
            results.append((names.get(str(message.get("tool_call_id")), "tool"),
                            _words(message.get("content")).strip()))
    return results


def _describe_result(name: str, content: str) -> str:
    short = content if len(content) <= 200 else content[:197] + "…"
    if name == "calculator":
        return f"The calculator says the answer is {short}."
    if name == "current_time":
        return f"The current time is {short}."
    return f"The {name} tool returned: {short}"


def _pieces(text: str, count: int = 5) -> list[str]:
    """``text`` in about ``count`` deltas, split at word boundaries, losslessly."""
    words = re.findall(r"\S+\s*|\s+", text)
    if not words:
        return []
    size = max(1, -(-len(words) // count))
    return ["".join(words[i:i + size]) for i in range(0, len(words), size)]


def _words(content: Any) -> str:
    """What the demo reads of a message: its text, images left out."""
    return content_text(content, image="", separator=" ")
