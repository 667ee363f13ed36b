"""CTX-10 for a native Anthropic Messages API body: the rules the API enforces.

``anthropic_body_problems(body)`` returns every problem it finds as
:class:`~context.validate.Problem` (index = message index, None for the body itself);
empty means the body may be sent. ``context.anthropic.build_anthropic_body`` runs it on
every body it builds. The rules (each a stable slug, see docs/context-engine.md):

* only the Messages API's own fields (``max_completion_tokens``, ``stream_options``,
  ``response_format``… are OpenAI's: ``unknown-field``); ``model`` and a positive
  ``max_tokens`` present;
* ``system`` a string or text blocks; tools ``{name, description?, input_schema}`` with
  an object schema and unique names;
* messages of role ``user`` or ``assistant`` only, the first from the user, roles
  alternating, the last from the user (a request never ends on an assistant turn);
* no empty content and no blank text block; images as ``base64`` (jpeg, png, gif,
  webp) or ``url`` sources;
* ``tool_use`` only in assistant turns, ids matching ``^[a-zA-Z0-9_-]+$`` and unique,
  ``input`` an object; the next turn is the user's and starts with one ``tool_result``
  per call, nothing before them; a ``tool_result`` answers a call of the turn right
  before it, once;
* ``thinking`` / ``redacted_thinking`` blocks only in assistant turns, complete (signed)
  and before the other blocks of their turn;
* ``cache_control`` only ``{"type": "ephemeral"}`` (an optional ``ttl``), never on a
  thinking block, at most four in the whole body.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from context.validate import Problem

ANTHROPIC_ID_RE = re.compile(r"^[a-zA-Z0-9_-]+$")
TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
IMAGE_MEDIA_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
MAX_CACHE_BREAKPOINTS = 4
# Tools Anthropic defines and the client runs, offered by type and name only (MEM-2: the
# memory tool, with its beta header, ``models_catalog.providers.anthropic``).
MEMORY_TOOL_TYPE = "memory_20250818"
CLIENT_TOOL_TYPES = frozenset({MEMORY_TOOL_TYPE})
BODY_FIELDS = frozenset({
    "model", "messages", "max_tokens", "system", "tools", "tool_choice", "stream", "metadata",
    "stop_sequences", "temperature", "top_k", "top_p", "thinking", "service_tier",
})
_BLOCK_FIELDS: dict[object, set[str]] = {  # looked up by whatever "type" a block holds
    "text": {"type", "text", "cache_control", "citations"},
    "image": {"type", "source", "cache_control"},
    "tool_use": {"type", "id", "name", "input", "cache_control"},
    "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control"},
    "thinking": {"type", "thinking", "signature"},
    "redacted_thinking": {"type", "data"},
}
_THINKING_TYPES = ("thinking", "redacted_thinking")


def is_signed_thinking(block: Any) -> bool:
    """True for a complete thinking block as the API returned it: ``thinking`` with its
    text and a signature, or ``redacted_thinking`` with its data, and nothing else."""
    if not isinstance(block, Mapping) or set(block) != _BLOCK_FIELDS.get(block.get("type"), ()):
        return False
    if block["type"] == "thinking":
        return isinstance(block["thinking"], str) and isinstance(block["signature"], str) and bool(block["signature"])
    return isinstance(block["data"], str) and bool(block["data"])


def _blank(value: Any) -> bool:
    return not isinstance(value, str) or not value.strip()


class _Checker:
    """One pass over a body; ``out`` collects the problems, ``breakpoints`` the marks."""

    def __init__(self) -> None:
        self.out: list[Problem] = []
        self.breakpoints = 0
        self.tool_ids: set[str] = set()

    def add(self, index: int | None, rule: str, message: str) -> None:
        self.out.append(Problem(index, rule, message))

    def cache_mark(self, index: int | None, block: Mapping[str, Any]) -> None:
        mark = block.get("cache_control")
        if mark is None:
            return
        self.breakpoints += 1
        if not isinstance(mark, Mapping) or mark.get("type") != "ephemeral" or set(mark) - {"type", "ttl"}:
            self.add(index, "cache-control-shape", "cache_control must be {\"type\": \"ephemeral\"}")

    def text_block(self, index: int | None, block: Mapping[str, Any]) -> None:
        if _blank(block.get("text")):
            self.add(index, "blank-text-block", "text blocks must contain non-whitespace text")

    def image_block(self, index: int, block: Mapping[str, Any]) -> None:
        raw = block.get("source")
        source: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        kind = source.get("type")
        if kind == "base64":
            if source.get("media_type") not in IMAGE_MEDIA_TYPES or _blank(source.get("data")):
                self.add(index, "image-source", "a base64 image needs a jpeg, png, gif or webp media_type and data")
        elif kind != "url" or _blank(source.get("url")):
            self.add(index, "image-source", "an image source is base64 data or a url")

    def block(self, index: int, role: str, block: Any) -> str | None:
        """Check one content block; return its type when it is a known one."""
        kind: str | None = block.get("type") if isinstance(block, Mapping) else None  # a str once known
        if kind not in _BLOCK_FIELDS:
            self.add(index, "block-type", f"unknown content block {kind!r:.40}")
            return None
        extra = set(block) - _BLOCK_FIELDS[kind]
        if extra:
            self.add(index, "unknown-field", f"{kind} block has fields the API refuses: {sorted(extra)}")
        if kind in _THINKING_TYPES:
            if role != "assistant" or not is_signed_thinking(block):
                self.add(index, "thinking-block", "thinking blocks come back complete and signed, from the assistant")
            return kind
        self.cache_mark(index, block)
        if kind == "text":
            self.text_block(index, block)
        elif kind == "image":
            self.image_block(index, block)
        elif kind == "tool_use":
            self.tool_use(index, role, block)
        elif kind == "tool_result":
            self.tool_result_shape(index, role, block)
        return kind

    def tool_use(self, index: int, role: str, block: Mapping[str, Any]) -> None:
        call_id = block.get("id")
        if role != "assistant":
            self.add(index, "tool-use-role", "tool_use blocks belong to assistant turns")
        if not isinstance(call_id, str) or not ANTHROPIC_ID_RE.fullmatch(call_id):
            self.add(index, "call-id-format", f"tool_use id {call_id!r:.60} does not match ^[a-zA-Z0-9_-]+$")
        elif call_id in self.tool_ids:
            self.add(index, "duplicate-call-id", f"tool_use id {call_id!r} is used more than once")
        else:
            self.tool_ids.add(call_id)
        if _blank(block.get("name")):
            self.add(index, "call-shape", "a tool_use block needs a name")
        if not isinstance(block.get("input"), Mapping):
            self.add(index, "call-arguments", f"input of tool_use {call_id!r:.60} is not an object")

    def tool_result_shape(self, index: int, role: str, block: Mapping[str, Any]) -> None:
        if role != "user":
            self.add(index, "tool-result-role", "tool_result blocks belong to user turns")
        content = block.get("content")
        if isinstance(content, list):
            for part in content:
                kind = part.get("type") if isinstance(part, Mapping) else None
                if kind == "text":
                    self.text_block(index, part)
                elif kind == "image":
                    self.image_block(index, part)
                else:
                    self.add(index, "block-type", f"tool_result content may hold text and images, not {kind!r:.40}")
        elif content is not None and not isinstance(content, str):
            self.add(index, "message-shape", "tool_result content is a string or a list of blocks")
        elif isinstance(content, str) and not content.strip():
            self.add(index, "blank-text-block", "tool_result text must contain non-whitespace text")


def _check_top(body: Mapping[str, Any], c: _Checker) -> None:
    unknown = sorted(set(body) - BODY_FIELDS)
    for field in unknown:
        c.add(None, "unknown-field", f"{field}: not a Messages API field")
    if _blank(body.get("model")):
        c.add(None, "model-missing", "model is required")
    limit = body.get("max_tokens")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        c.add(None, "max-tokens", "max_tokens is required and must be a positive integer")
    system = body.get("system")
    if isinstance(system, list):
        for block in system:
            if not isinstance(block, Mapping) or block.get("type") != "text" or set(block) - _BLOCK_FIELDS["text"]:
                c.add(None, "system-shape", "system blocks must be text blocks")
                continue
            c.text_block(None, block)
            c.cache_mark(None, block)
    elif system is not None and _blank(system):
        c.add(None, "system-shape", "system must be non-blank text or a list of text blocks")
    tools = body.get("tools")
    if tools is not None:
        names: set[object] = set()
        for tool in tools if isinstance(tools, list) else [None]:
            name = tool.get("name") if isinstance(tool, Mapping) else None
            schema = tool.get("input_schema") if isinstance(tool, Mapping) else None
            typed = tool.get("type") if isinstance(tool, Mapping) else None
            if not isinstance(name, str) or not TOOL_NAME_RE.fullmatch(name) or name in names:
                c.add(None, "tool-shape", f"tool name {name!r:.60} is missing, malformed or repeated")
            if typed in CLIENT_TOOL_TYPES and isinstance(tool, Mapping):
                names.add(name)
                if set(tool) - {"type", "name", "cache_control"}:
                    c.add(None, "unknown-field", f"tool {name!r:.60} of type {typed} has fields the API refuses")
                c.cache_mark(None, tool)
                continue
            if typed not in (None, "custom"):
                c.add(None, "tool-shape", f"tool {name!r:.60} has a type the platform does not send")
            if not isinstance(schema, Mapping) or schema.get("type") != "object":
                c.add(None, "tool-shape", f"tool {name!r:.60} needs an input_schema of type object")
            if isinstance(tool, Mapping):
                names.add(name)
                if set(tool) - {"name", "description", "input_schema", "cache_control", "type"}:
                    c.add(None, "unknown-field", f"tool {name!r:.60} has fields the API refuses")
                c.cache_mark(None, tool)


def _check_pairing(i: int, kinds: list[str | None], content: list[Any], open_calls: list[str], c: _Checker) -> None:
    """The results of the previous turn's calls come first here, one per call, and only those."""
    results = [b.get("tool_use_id") for b, k in zip(content, kinds, strict=True) if k == "tool_result"]
    leading = 0
    while leading < len(kinds) and kinds[leading] == "tool_result":
        leading += 1
    if leading != len(results):
        c.add(i, "result-not-first", "tool_result blocks must come before any other content of the turn")
    missing = [call for call in open_calls if call not in results]
    if missing:
        c.add(i - 1, "unanswered-call", f"tool_use ids without a tool_result in the next turn: {missing}")
    seen: set[Any] = set()
    for call_id in results:
        if call_id not in open_calls:
            c.add(i, "tool-without-call", f"tool_result {call_id!r:.60} answers no tool_use of the previous turn")
        elif call_id in seen:
            c.add(i, "duplicate-tool-result", f"tool_use {call_id!r} is answered twice")
        seen.add(call_id)


def anthropic_body_problems(body: Any) -> list[Problem]:
    """Every problem of ``body`` as a Messages API request; empty when it may be sent."""
    if not isinstance(body, Mapping):
        return [Problem(None, "message-shape", "the body is not an object")]
    turns = TurnChecker()
    messages = body.get("messages")
    turns.feed(messages if isinstance(messages, list) else [])
    return turns.problems(body)


class TurnChecker:
    """The checks of ``anthropic_body_problems``, read turn by turn and resumable: a body
    whose turns extend those of one already checked is checked on its new turns only
    (LOOP-1). ``copy`` keeps a state to resume from."""

    def __init__(self) -> None:
        self._c = _Checker()
        self.count = 0
        self._open_calls: list[str] = []
        self._previous: str | None = None

    def copy(self) -> TurnChecker:
        """An independent checker in the same state."""
        other = TurnChecker()
        other._c.out, other._c.breakpoints, other._c.tool_ids = (list(self._c.out), self._c.breakpoints,
                                                                  set(self._c.tool_ids))
        other.count, other._open_calls, other._previous = self.count, list(self._open_calls), self._previous
        return other

    def feed(self, messages: list[Any]) -> None:
        """Check the next turns of the body."""
        c = self._c
        for i, message in enumerate(messages, start=self.count):
            role = message.get("role") if isinstance(message, Mapping) else None
            if role not in ("user", "assistant"):
                c.add(i, "message-shape", f"role {role!r:.40} is not user or assistant")
                continue
            if set(message) - {"role", "content"}:
                c.add(i, "unknown-field",
                      f"message fields the API refuses: {sorted(set(message) - {'role', 'content'})}")
            if i == 0 and role != "user":
                c.add(i, "first-turn-not-user", "the first message must use the user role")
            if role == self._previous:
                c.add(i, "consecutive-same-role", f"two {role} turns in a row")
            content = message.get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            if not isinstance(content, list) or not content:
                c.add(i, "empty-message", f"{role} message has no content")
                content = []
            kinds = [c.block(i, role, block) for block in content]
            if role == "user":
                _check_pairing(i, kinds, content, self._open_calls, c)
                self._open_calls = []
            else:
                if self._open_calls:
                    c.add(i - 1, "unanswered-call",
                          f"tool_use ids without a tool_result in the next turn: {self._open_calls}")
                thinking_done = False
                for kind in kinds:
                    if kind in _THINKING_TYPES and thinking_done:
                        c.add(i, "thinking-block", "thinking blocks must come before the other blocks of the turn")
                    thinking_done = thinking_done or kind not in _THINKING_TYPES
                self._open_calls = [b["id"] for b, k in zip(content, kinds, strict=True) if k == "tool_use"
                                    and isinstance(b.get("id"), str)]
            self._previous = role
        self.count += len(messages)

    def problems(self, body: Mapping[str, Any], *, marks: Sequence[Mapping[str, Any]] | None = None) -> list[Problem]:
        """Every problem of ``body`` whose turns are the ones read so far (the checker is
        left as it was). ``marks``: when the turns were read before their cache marks were
        placed, the blocks that carry one, checked and counted here instead."""
        c = _Checker()
        _check_top(body, c)  # the body's own fields first, then the turns, as the API reads them
        c.out += self._c.out
        c.breakpoints += self._c.breakpoints
        if not self.count:
            c.add(None, "request-empty", "the request has no messages")
        for block in marks or ():
            c.cache_mark(None, block)
        if self._previous == "assistant":
            c.add(self.count - 1, "ends-on-assistant", "the request must not end on an assistant turn")
            if self._open_calls:
                c.add(self.count - 1, "unanswered-call", f"tool_use ids without a tool_result: {self._open_calls}")
        if c.breakpoints > MAX_CACHE_BREAKPOINTS:
            c.add(None, "too-many-breakpoints",
                  f"at most {MAX_CACHE_BREAKPOINTS} blocks may carry cache_control; found {c.breakpoints}")
        return c.out
