"""The offline demo model (provider ``demo``): a chat that works with no key and no network.

It is deterministic and clearly labelled in every answer. It plugs into the same
registry and yields the same events as the HTTP client, so the run loop, the events and
the tool flow can be shown (and tested) end to end. It reads the last question — its own
words apart from the files attached to it — and:

* after tool results, answers from them (the calls it made and what each returned);
* the question holds arithmetic ("what is 17*23") and a ``calculator`` tool is offered →
  it calls ``calculator`` first; with ``update_plan`` offered too, it writes a two-step
  plan first and marks it done before it answers, so the plan shows in the chat. Only
  arithmetic calls the calculator: a date or prose never does;
* files are attached (or the question asks about the files attached earlier) → it
  answers with a short summary of each: its lines, words and first lines (an image, that
  it cannot see it);
* "Remember that …" or "What do you remember about me?" with memory on → it saves to
  memory or answers from it (``demo_memory``);
* the question asks for an offered tool — any tool, a tool server's too — → it calls it
  with arguments built from the tool's JSON Schema (``demo_tools``);
* otherwise it replies with a short summary of the question, how many messages it
  received and the tools it could call.

A run stopped mid-answer and resumed goes on where it stopped. Answers stream word by word,
``pace`` seconds apart (``AGENTLOOM_DEMO_WORD_SECONDS`` in the product, so a person can
press Stop; none in tests), and end with usage figures (a rough 4-bytes-per-token count,
labelled as such by the model id being the demo's).
"""
from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from context.adapters import CONTINUE_NOTE, HISTORY_START_NOTE
from context.compaction.prompt import CACHED_SUMMARY_HEADER
from context.records import INTERRUPTED_SUFFIX, content_text
from context.surrogates import replace_lone_surrogate_escapes, replace_lone_surrogates
from models_catalog.demo_arguments import tool_arguments
from models_catalog.demo_files import files_summary, split_question
from models_catalog.demo_memory import memory_reply
from models_catalog.demo_tools import choose_tool
from models_catalog.providers.events import ChatStream, StreamEnd, TextDelta, ToolCall, ToolCallDelta, Usage, as_dict

DEMO_MODEL_ID = "agentloom-demo"
DEMO_BASE_URL = "demo://offline"
LABEL = "(Offline demo model)"
MAX_PIECES = 60  # a long answer streams in groups of words: at most this many pauses

_ARITH_CANDIDATE = re.compile(r"[\d\s+\-*/×÷^().%]+")
_ARITH_SHAPE = re.compile(r"\d\s*[-+*/×÷^%]\s*\(?\s*-?\d")
_TIMES_X = re.compile(r"(?<=\d)\s*[xX]\s*(?=\d)")
# Dates and clock times look like arithmetic ("2026-12-07", "07/12/2026", "14:30"): never sums.
_NOT_ARITHMETIC = re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}\b|\b\d{1,2}:\d{2}\b")
# How the request shows a result that is not "ok" (context/reader.py): "[tool status: denied]\n…".
_STATUS_LINE = re.compile(r"^\[tool status: (\w+)\]\n")
_ABOUT_FILES = re.compile(r"\b(files?|attach\w*|documents?|summar\w*|uploads?)\b", re.IGNORECASE)
_IMAGES_RETURNED = "Images returned"
_HELPERS = frozenset({"update_plan", "read_record", "read_file"})  # offered for the model's own use, not asked for


class DemoChatClient:
    """The demo model behind the chat-client interface (``stream_chat``).

    ``pace``: seconds between two words of an answer (0: all at once), so that a person can
    press Stop while it streams; ``sleep`` waits them (a test may pass its own)."""

    provider = "demo"

    def __init__(self, *, pace: float = 0.0, sleep: Callable[[float], None] = time.sleep, **_: Any) -> None:
        # Accepts (and ignores) base_url, api_key, transport…: the factory signature is shared.
        self.pace = max(0.0, float(pace))
        self._sleep = sleep

    def __repr__(self) -> str:
        return "DemoChatClient()"

    def __enter__(self) -> DemoChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        pass

    def _wait(self) -> None:
        if self.pace:
            self._sleep(self.pace)

    def stream_chat(self, request_body: Mapping[str, Any]) -> ChatStream:
        """Answer ``request_body`` (an OpenAI chat-completions body) as events."""
        messages = [m for m in request_body.get("messages") or [] if isinstance(m, dict)]
        tools = _offered_tools(request_body.get("tools"))
        text, call = plan_reply(messages, tools)
        # It echoes the question and the tool results: its answer is text from outside too.
        text = replace_lone_surrogates(text)
        for number, piece in enumerate(_pieces(text)):
            if number:
                self._wait()
            yield TextDelta(piece)
        calls: tuple[ToolCall, ...] = ()
        if call is not None:
            self._wait()
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
    """The demo's answer: its text and, optionally, one tool call ``(name, arguments)``.

    After an answer cut by Stop (resumed), what it would have said goes on from where the
    cut answer ended."""
    kept, partial = _without_interrupted_answer(messages)
    text, call = _reply(kept, tools)
    said = partial.rstrip()
    if said and text.startswith(said):
        return text[len(said):], call
    return text, call


def _reply(messages: list[dict[str, Any]], tools: dict[str, dict[str, Any]]) -> tuple[str, tuple[str, str] | None]:
    question, files = split_question(_question_text(messages))
    if question.startswith(CACHED_SUMMARY_HEADER):  # the platform asks for a summary, tools offered: none is called
        tools, files = {}, []
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
    if files:
        return f"{LABEL} " + files_summary(files), None
    if _ABOUT_FILES.search(question) and not question.startswith(CACHED_SUMMARY_HEADER):
        earlier = _earlier_files(messages)
        if earlier:
            return f"{LABEL} " + files_summary(earlier, earlier=True), None
    remembered = memory_reply(question, _system_text(messages), tools)
    if remembered is not None:
        return f"{LABEL} {remembered[0]}", remembered[1]
    chosen = choose_tool(question, tools)
    if chosen is not None:
        arguments = tool_arguments(as_dict(tools[chosen].get("parameters")), question)
        shown = ", ".join(f"{key} {json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items())
        return (f"{LABEL} Your question asks for {_tool_label(chosen)}: let me call it"
                f"{' with ' + shown if shown else ''}."), (chosen, json.dumps(arguments, ensure_ascii=False))
    summary = " ".join(question.split())
    if len(summary) > 120:
        summary = summary[:117] + "…"
    hint = " Enable the calculator tool and I will compute it." if expression else ""
    offered = [name for name in tools if name not in _HELPERS and name != "calculator"]
    can = (f" I can call {_listed([_tool_label(name) for name in offered])}: ask for what "
           f"{'it does' if len(offered) == 1 else 'one of them does'}, in the words of its name, and I will."
           if offered else "")
    if "calculator" in tools and not expression:
        can += " Give me arithmetic (17*23) and I will use the calculator."
    return (
        f"{LABEL} You asked: “{summary or '(nothing)'}”. I received {len(messages)} "
        f"message{'s' if len(messages) != 1 else ''}.{hint}{can} I am the built-in offline demo: I need no API "
        "key and cannot really reason. Connect a real provider in the admin console for real answers."
    ), None


def _system_text(messages: list[dict[str, Any]]) -> str:
    first = messages[0] if messages else {}
    return content_text(first.get("content")) if first.get("role") == "system" else ""


def _tool_label(name: str) -> str:
    """A tool as a person reads it: ``time__get_current_time`` → ``time · get_current_time``."""
    server, _, tool = name.partition("__")
    return f"`{server} · {tool}`" if tool else f"`{name}`"


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"


def _is_question(message: dict[str, Any]) -> bool:
    """A person's message: not the platform's note asking to go on, nor images a tool returned."""
    if message.get("role") != "user":
        return False
    text = _words(message.get("content"))
    return not text.startswith(_IMAGES_RETURNED) and text not in (CONTINUE_NOTE, HISTORY_START_NOTE)


def _question_text(messages: list[dict[str, Any]]) -> str:
    """The last question's text, its files' blocks included (each part on its own)."""
    for message in reversed(messages):
        if _is_question(message):
            return content_text(message.get("content"), image="", separator="\n\n")
    return ""


def _earlier_files(messages: list[dict[str, Any]]) -> list[Any]:
    """The files of the latest earlier question that had some."""
    for message in reversed(messages):
        if _is_question(message):
            _, files = split_question(content_text(message.get("content"), image="", separator="\n\n"))
            if files:
                return files
    return []


def _without_interrupted_answer(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """The conversation without an answer Stop cut after the last question, and that answer's text."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if _is_question(message):
            break
        content = message.get("content")
        if (message.get("role") == "assistant" and not message.get("tool_calls") and isinstance(content, str)
                and content.endswith(INTERRUPTED_SUFFIX)):
            return messages[:index], content[:-len(INTERRUPTED_SUFFIX)]
    return messages, ""


def find_arithmetic(text: str) -> str | None:
    """The arithmetic expression in ``text`` ("what is 17 x 23?" → "17*23"), if any."""
    text = _TIMES_X.sub("*", _NOT_ARITHMETIC.sub(" ", text or ""))
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
    status = _STATUS_LINE.match(content)
    if status:  # no result: an error, or a call a person denied (TOOL-9) — never "the answer is"
        return f"{_tool_label(name)} gave no result ({status.group(1)}): {_readable(content[status.end():])}"
    short = content if len(content) <= 200 else content[:197] + "…"
    if name == "calculator":
        return f"The calculator says the answer is {short}."
    if name == "current_time":
        return f"The current time is {short}."
    return f"{_tool_label(name)} returned: {_readable(content)}"


def _readable(content: str, limit: int = 300) -> str:
    """A tool's result in a sentence: a JSON object as its fields, other text as it is (shortened)."""
    try:
        parsed = json.loads(content)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and parsed:
        fields = [f"{key} {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}"
                  for key, value in parsed.items()]
        content = "; ".join(fields) + "."
    content = " ".join(content.split())
    return content if len(content) <= limit else content[:limit - 1] + "…"


def _pieces(text: str, count: int = MAX_PIECES) -> list[str]:
    """``text`` word by word, or in at most ``count`` groups of words; lossless."""
    words = re.findall(r"\S+\s*|\s+", text)
    if not words:
        return []
    size = max(1, -(-len(words) // count))
    return ["".join(words[i:i + size]) for i in range(0, len(words), size)]


def _words(content: Any) -> str:
    """What the demo reads of a message: its text, images left out."""
    return content_text(content, image="", separator=" ")
