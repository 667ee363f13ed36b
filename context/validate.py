"""CTX-10: check a request against the provider's protocol before it leaves.

The validator reads OpenAI-shaped message lists -- the projector's output, or the
``messages`` of a body built by an adapter -- and reports every problem it finds. An empty
list means the request may be sent. A non-empty list is a bug in whatever built the
request: the caller logs the problems and fails the run; it never sends the request.

Dialects (a provider's ``ProviderSpec.dialect`` names the one it speaks):
  openai     OpenAI chat completions and OpenAI-compatible servers.
  anthropic  Anthropic-style rules, for Claude models behind an OpenAI-compatible
             endpoint: system text only at the start, the first turn from the user, tool
             results first in the user turn that follows the calls, never two assistant
             turns in a row, no blank text blocks.
  deepseek   DeepSeek: no two user or two assistant messages in a row, text only, and in
             thinking mode every assistant message with tool calls carries
             ``reasoning_content``.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from context.ids import is_portable_id
from context.records import is_image_part, is_role, is_text_part

DIALECTS = ("openai", "anthropic", "deepseek")


@dataclass(frozen=True)
class Problem:
    """One protocol violation: where (message index, None for the whole request), which
    rule (a stable slug, see docs/context-engine.md), and what is wrong, in words."""

    index: int | None
    rule: str
    message: str


def check_dialect(dialect: str) -> str:
    """Return ``dialect`` when the engine knows its rules; ValueError otherwise."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}; expected one of {list(DIALECTS)}")
    return dialect


def _text_blank(content: Any) -> bool:
    if content is None:
        return True
    if isinstance(content, str):
        return not content.strip()
    if isinstance(content, list):
        return not any(is_image_part(p) or (is_text_part(p) and p["text"].strip()) for p in content)
    return True


_DATA_URL = re.compile(r"^data:image/[a-zA-Z0-9.+-]+;base64,[A-Za-z0-9+/]+={0,2}$")


def image_part_problem(part: Mapping[str, Any]) -> str | None:
    """What is wrong with an ``image_url`` part, or None: ``{"type": "image_url",
    "image_url": {"url": <an http(s) link or a base64 data URL of an image>,
    "detail"?: auto|low|high}}`` and nothing else (the shape the providers accept; which
    image types a provider reads is its adapter's business)."""
    image = part.get("image_url")
    if not isinstance(image, Mapping) or set(part) - {"type", "image_url"}:
        return "an image part is {\"type\": \"image_url\", \"image_url\": {\"url\": ...}}"
    url = image.get("url")
    if set(image) - {"url", "detail"} or image.get("detail", "auto") not in ("auto", "low", "high"):
        return "image_url may hold a url and a detail (auto, low or high) only"
    if not isinstance(url, str) or not (url.startswith(("https://", "http://")) or _DATA_URL.match(url)):
        return "an image url is an http(s) link or a base64 data URL of an image"
    return None


def _check_content(i: int, message: Mapping[str, Any], mode: str, out: list[Problem]) -> None:
    role = message["role"]
    content = message.get("content")
    if content is not None and not isinstance(content, (str, list)):
        out.append(Problem(i, "message-shape", "content must be a string, a list of parts or null"))
        return
    if role == "assistant":
        if _text_blank(content) and not message.get("tool_calls"):
            out.append(Problem(i, "empty-message", "assistant message has neither text nor tool calls"))
    elif _text_blank(content):
        out.append(Problem(i, "empty-message", f"{role} message is empty"))
    if not isinstance(content, list):
        if mode == "anthropic" and isinstance(content, str) and content and not content.strip():
            out.append(Problem(i, "blank-text-block", "whitespace-only text is rejected"))
        return
    for part in content:
        if is_text_part(part):
            if mode == "anthropic" and not part["text"].strip():
                out.append(Problem(i, "blank-text-block", "whitespace-only text part is rejected"))
        elif is_image_part(part):
            if role != "user":
                out.append(Problem(i, "content-part", f"{role} messages may carry text parts only"))
            elif mode == "deepseek":
                out.append(Problem(i, "image-unsupported", "DeepSeek models read text only"))
            elif (problem := image_part_problem(part)) is not None:
                out.append(Problem(i, "image-part", problem))
        else:
            out.append(Problem(i, "content-part", f"unknown content part {part!r:.60}"))


def _check_calls(i: int, calls: Any, seen_ids: set[str], out: list[Problem]) -> list[str]:
    if not isinstance(calls, list) or not calls:
        out.append(Problem(i, "call-shape", "tool_calls must be a non-empty list"))
        return []
    ids: list[str] = []
    for call in calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or call.get("type") != "function":
            out.append(Problem(i, "call-shape", "a tool call must be {id, type: function, function}"))
            continue
        name, arguments, call_id = function.get("name"), function.get("arguments"), call.get("id")
        if not isinstance(name, str) or not name:
            out.append(Problem(i, "call-shape", "a tool call has no function name"))
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else None
        except (ValueError, RecursionError):  # nested past the decoder's depth: not an object we can send
            parsed = None
        if not isinstance(parsed, dict):
            out.append(Problem(i, "call-arguments", f"arguments of call {call_id!r} are not a JSON object string"))
        if not is_portable_id(call_id):
            out.append(Problem(i, "call-id-format", f"call id {call_id!r:.60} does not match ^[a-zA-Z0-9_-]{{1,40}}$"))
            if not isinstance(call_id, str):
                continue  # cannot be answered at all; the tool message will say so
        if call_id in seen_ids:
            out.append(Problem(i, "duplicate-call-id", f"call id {call_id!r} is used more than once"))
        seen_ids.add(call_id)
        ids.append(call_id)
    return ids


def validate_request(
    messages: Sequence[Mapping[str, Any]] | Mapping[str, Any],
    dialect: str = "openai",
    *,
    thinking: bool | None = None,
    provider: str | None = None,
) -> list[Problem]:
    """Return the protocol problems of ``messages`` in ``dialect``; empty when valid.

    ``messages`` may also be a request body holding a ``messages`` list. ``dialect`` is
    ``openai``, ``anthropic`` or ``deepseek`` (``provider=`` is SPEC §3's name for the
    same argument). ``thinking`` selects DeepSeek's thinking mode; None infers it from the
    presence of ``reasoning_content`` on any assistant message.
    """
    mode = check_dialect(provider if provider is not None else dialect)
    if isinstance(messages, Mapping):
        messages = messages.get("messages") or []
    if not messages:
        return [Problem(None, "request-empty", "the request has no messages")]
    if thinking is None:
        thinking = any(isinstance(m, Mapping) and "reasoning_content" in m for m in messages)
    validator = RequestValidator(mode, thinking=thinking)
    validator.feed(messages)
    return validator.problems()


class RequestValidator:
    """``validate_request``'s reading, message by message and resumable: a request that
    extends one already checked is checked on its new messages only (LOOP-1)."""

    def __init__(self, mode: str, *, thinking: bool = False) -> None:
        self.mode = check_dialect(mode)
        self.thinking = thinking
        self.count = 0  # messages read
        self.last: Any = None
        self._out: list[Problem] = []
        self._seen_ids: set[str] = set()
        self._pending: dict[str, bool] = {}  # calls of the assistant message the tool run answers
        self._pending_at: int | None = None
        self._previous_role: str | None = None
        self._seen_non_system = False

    def copy(self) -> RequestValidator:
        """An independent validator in the same state (the sets and lists are copied)."""
        other = copy.copy(self)
        other._out, other._seen_ids, other._pending = list(self._out), set(self._seen_ids), dict(self._pending)
        return other

    def _close_group(self) -> None:
        """Report the calls of the group that just ended that no tool message answered."""
        for call_id, answered in self._pending.items():
            if not answered:
                self._out.append(Problem(self._pending_at, "unanswered-call",
                                         f"call {call_id!r} has no tool message right after its assistant message"))
        self._pending, self._pending_at = {}, None

    def feed(self, messages: Sequence[Any]) -> None:
        """Read the next messages of the request."""
        mode, thinking, out = self.mode, self.thinking, self._out
        for i, message in enumerate(messages, start=self.count):
            self.last = message
            if not isinstance(message, Mapping) or not is_role(message.get("role")):
                out.append(Problem(i, "message-shape", "not a chat message with a known role"))
                self._close_group()
                self._previous_role = None
                continue
            role = message["role"]
            if role != "tool":
                self._close_group()
            _check_content(i, message, mode, out)

            if role in ("system", "developer"):
                if mode == "anthropic" and self._seen_non_system:
                    out.append(Problem(i, "system-not-at-start", "system text is allowed only at the start"))
            elif not self._seen_non_system:
                self._seen_non_system = True
                if mode == "anthropic" and role != "user":
                    out.append(Problem(i, "first-turn-not-user", "the first turn must come from the user"))

            if role == "assistant":
                if mode == "anthropic" and self._previous_role == "assistant":
                    out.append(Problem(i, "consecutive-assistant", "two assistant turns in a row"))
                if "tool_calls" in message:
                    self._pending = dict.fromkeys(_check_calls(i, message["tool_calls"], self._seen_ids, out), False)
                    self._pending_at = i
                    if mode == "deepseek" and thinking and not isinstance(message.get("reasoning_content"), str):
                        out.append(Problem(i, "missing-reasoning-content", "in thinking mode an assistant message "
                                           "with tool calls must carry reasoning_content"))
            elif role == "tool":
                call_id = message.get("tool_call_id")
                if not isinstance(call_id, str) or call_id not in self._pending:
                    out.append(Problem(i, "tool-without-call", f"tool message {call_id!r:.60} does not answer "
                                       "a call of the assistant message right before it"))
                elif self._pending[call_id]:
                    out.append(Problem(i, "duplicate-tool-result", f"call {call_id!r} is answered twice"))
                else:
                    self._pending[call_id] = True
            if mode == "deepseek" and role == self._previous_role and role != "tool":
                out.append(Problem(i, "consecutive-same-role", f"two {role} messages in a row"))
            self._previous_role = role
        self.count += len(messages)

    def problems(self) -> list[Problem]:
        """Every problem of the request read so far, as if it ended here (the validator
        itself is left as it was, so it can read on)."""
        if not self.count:
            return [Problem(None, "request-empty", "the request has no messages")]
        end = self.copy()
        end._close_group()
        last = self.last
        if isinstance(last, Mapping) and last.get("role") == "assistant":
            end._out.append(Problem(self.count - 1, "ends-on-assistant",
                                    "the request must not end on an assistant turn"))
        return end._out
