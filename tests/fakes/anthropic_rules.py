"""What Anthropic's Messages API refuses, and its prompt cache, for the strict fake.

Independent of ``context.anthropic_validate`` on purpose: a second opinion on every body
the platform builds. :func:`refusal` returns the first refusal as the API words it
(``(status, error_type, message)``) or None; the messages are the API's own texts.
One rule is the platform's, not the API's, and says so: a request never ends on an
assistant turn (the API would read it as a prefill).

:class:`PromptCache` simulates the cache: a request's prefix (tools → system → messages,
``cache_control`` marks ignored) is read from the cache up to the furthest position,
at most 20 blocks back from one of its breakpoints, where an earlier request wrote an
entry; entries are written at every breakpoint past that. Usage follows:
``cache_read_input_tokens`` (the prefix read), ``cache_creation_input_tokens`` (read
point → last breakpoint), ``input_tokens`` (the rest). A block costs a token per four
bytes of its JSON.

Thinking blocks are signed by the fake (:func:`sign_thinking`) for the model that wrote
them; a block coming back altered, unsigned or for another model is refused.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from tests.fakes.image_rules import (
    ANTHROPIC_IMAGE_BASE64,
    ANTHROPIC_IMAGES,
    ANTHROPIC_MANY,
    ANTHROPIC_MANY_SIDE,
    ANTHROPIC_REQUEST_BYTES,
    ANTHROPIC_SIDE,
    decoded,
    dimensions,
    sniffed,
)

_SECRET = b"anthropic-fake-signing-key"
ID_PATTERN = re.compile(r"^[a-zA-Z0-9_-]+$")
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
TOP_LEVEL = {"model", "messages", "max_tokens", "system", "tools", "tool_choice", "stream", "metadata",
             "stop_sequences", "temperature", "top_k", "top_p", "thinking", "service_tier"}
BLOCK_FIELDS = {
    "text": {"type", "text", "cache_control", "citations"},
    "image": {"type", "source", "cache_control"},
    "tool_use": {"type", "id", "name", "input", "cache_control"},
    "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control"},
    "thinking": {"type", "thinking", "signature"},
    "redacted_thinking": {"type", "data"},
}
LOOKBACK_BLOCKS = 20
MAX_BREAKPOINTS = 4

Refusal = tuple[int, str, str]


def _mac(*parts: str) -> str:
    return hmac.new(_SECRET, "\x00".join(parts).encode(), hashlib.sha256).hexdigest()[:40]


def sign_thinking(model: str, thinking: str) -> str:
    return "fakesig" + _mac("thinking", model, thinking)


def redacted_data(model: str, n: int) -> str:
    return f"redacted{n}x" + _mac("redacted", model, str(n))


def _thinking_refusal(where: str, model: str, block: Mapping[str, Any]) -> str | None:
    if block["type"] == "thinking":
        if not isinstance(block.get("signature"), str):
            return f"{where}.thinking.signature: Field required"
        if block["signature"] != sign_thinking(model, str(block.get("thinking"))):
            return f"{where}: Invalid `signature` in `thinking` block"
        return None
    data = block.get("data")
    match = re.fullmatch(r"redacted(\d+)x([0-9a-f]+)", data) if isinstance(data, str) else None
    if match is None or data != redacted_data(model, int(match.group(1))):
        return f"{where}: Invalid `data` in `redacted_thinking` block"
    return None


def _text_refusal(text: Any) -> str | None:
    if not isinstance(text, str) or text == "":
        return "messages: text content blocks must be non-empty"
    if not text.strip():
        return "messages: text content blocks must contain non-whitespace text"
    return None


def _image_refusal(where: str, block: Mapping[str, Any], many: bool = False) -> str | None:
    source = block.get("source")
    if not isinstance(source, Mapping) or source.get("type") not in ("base64", "url"):
        return f"{where}.image.source: Input tag does not match any of the expected tags: 'base64', 'url'"
    if source["type"] == "base64" and source.get("media_type") not in MEDIA_TYPES:
        return f"{where}.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', " \
               "'image/gif' or 'image/webp'"
    if source["type"] == "base64" and not isinstance(source.get("data"), str):
        return f"{where}.image.source.base64.data: Field required"
    if source["type"] == "base64":
        extra = sorted(set(source) - {"type", "media_type", "data"})
        if extra:
            return f"{where}.image.source.base64.{extra[0]}: Extra inputs are not permitted"
        if source["data"] == "":
            return f"{where}.image.source.base64: image cannot be empty"
        if len(source["data"]) > ANTHROPIC_IMAGE_BASE64:
            return f"{where}.image.source.base64: image exceeds 5 MB maximum: {len(source['data'])} bytes > " \
                   f"{ANTHROPIC_IMAGE_BASE64} bytes"
        raw = decoded(source["data"])
        if raw is None or sniffed(raw) != source["media_type"]:
            return f"{where}.image.source.base64.data: Image does not match the provided media type " \
                   f"{source['media_type']}"
        side = max(dimensions(raw) or (0, 0))
        if side > (ANTHROPIC_MANY_SIDE if many else ANTHROPIC_SIDE):
            kind = " for many-image requests" if many else ""
            return f"{where}.image.source.base64.data: At least one of the image dimensions exceed max allowed " \
                   f"size{kind}: {ANTHROPIC_MANY_SIDE if many else ANTHROPIC_SIDE} pixels"
    elif not isinstance(source.get("url"), str):
        return f"{where}.image.source.url.url: Field required"
    return None


def _block_refusal(where: str, role: str, block: Any, model: str, seen_ids: set[str],
                   many: bool = False) -> str | None:
    kind = block.get("type") if isinstance(block, Mapping) else None
    if kind not in BLOCK_FIELDS:
        return f"{where}.type: Input tag '{kind}' found using 'type' does not match any of the expected tags"
    extra = sorted(set(block) - BLOCK_FIELDS[kind])
    if extra:
        return f"{where}.{kind}.{extra[0]}: Extra inputs are not permitted"
    if kind in ("thinking", "redacted_thinking"):
        if role != "assistant":
            return f"{where}: `{kind}` blocks are only allowed in assistant messages"
        return _thinking_refusal(where, model, block)
    if kind == "text":
        return _text_refusal(block.get("text"))
    if kind == "image":
        return _image_refusal(where, block, many)
    if kind == "tool_use":
        if role != "assistant":
            return f"{where}: `tool_use` blocks are only allowed in assistant messages"
        if not isinstance(block.get("id"), str) or not ID_PATTERN.fullmatch(block["id"]):
            return f"{where}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
        if block["id"] in seen_ids:
            return f"{where}: `tool_use` ids must be unique"
        seen_ids.add(block["id"])
        if not isinstance(block.get("input"), dict):
            return f"{where}.tool_use.input: Input should be a valid dictionary"
        return None
    if role != "user":
        return f"{where}: `tool_result` blocks are only allowed in user messages"
    content = block.get("content")
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
    for k, part in enumerate(parts if isinstance(parts, list) else []):
        kind = part.get("type") if isinstance(part, Mapping) else None
        problem = _text_refusal(part.get("text")) if kind == "text" else (
            _image_refusal(f"{where}.content.{k}", part, many) if kind == "image" else f"{where}.content.{k}.type: "
            "Input tag found using 'type' does not match any of the expected tags: 'text', 'image'")
        if problem:
            return problem
    return None


def _pairing_refusal(i: int, content: list[Any], open_ids: list[str]) -> str | None:
    kinds = [b.get("type") for b in content]
    leading = 0
    while leading < len(kinds) and kinds[leading] == "tool_result":
        leading += 1
    answered = [b.get("tool_use_id") for b in content[:leading]]
    missing = [call for call in open_ids if call not in answered]
    if missing:
        return (f"messages.{i - 1}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block "
                "in the next message.")
    for j, block in enumerate(content):
        if block.get("type") == "tool_result" and (block.get("tool_use_id") not in open_ids
                                                   or answered.count(block.get("tool_use_id")) > 1):
            return (f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                    f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding `tool_use` "
                    "block in the previous message.")
    return None


# Anthropic-defined tools the client runs, by type: only with their beta header, on the
# models that have them (the memory tool: Claude 4 and later, ``context-management-2025-06-27``).
CLIENT_TOOLS = {"memory_20250818": ("memory", "context-management-2025-06-27")}
CUSTOM_TAGS = "'custom', 'bash_20250124', 'text_editor_20250124', 'web_search_20250305'"


def _tools_refusal(tools: Any, betas: frozenset[str] = frozenset(), model: str = "") -> str | None:
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    for k, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            return f"tools.{k}: Input should be a valid dictionary"
        kind = tool.get("type")
        if kind in CLIENT_TOOLS:
            name, beta = CLIENT_TOOLS[kind]
            if beta not in betas:
                return (f"tools.{k}: Input tag '{kind}' found using 'type' does not match any of the expected "
                        f"tags: {CUSTOM_TAGS}")
            if model.startswith(("claude-3", "claude-2")):
                return f"tools.{k}: '{kind}' is not supported on this model"
            extra = sorted(set(tool) - {"type", "name", "cache_control"})
            if extra:
                return f"tools.{k}.{kind}.{extra[0]}: Extra inputs are not permitted"
            if tool.get("name") != name:
                return f"tools.{k}.{kind}.name: Input should be '{name}'"
            continue
        extra = sorted(set(tool) - {"name", "description", "input_schema", "cache_control", "type"})
        if extra:
            return f"tools.{k}.custom.{extra[0]}: Extra inputs are not permitted"
        if kind not in (None, "custom"):
            return (f"tools.{k}: Input tag '{kind}' found using 'type' does not match any of the expected tags: "
                    f"{CUSTOM_TAGS}")
        if not isinstance(tool.get("name"), str) or not TOOL_NAME.fullmatch(tool["name"]):
            return f"tools.{k}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
        schema = tool.get("input_schema")
        if not isinstance(schema, Mapping):
            return f"tools.{k}.custom.input_schema: Field required"
        if schema.get("type") != "object":
            return f"tools.{k}.custom.input_schema.type: Input should be 'object'"
    names = [tool["name"] for tool in tools]
    if len(set(names)) != len(names):
        return "tools: Tool names must be unique."
    return None


def _count_breakpoints(body: Mapping[str, Any]) -> int:
    blocks = [*(body.get("tools") or []), *(body["system"] if isinstance(body.get("system"), list) else [])]
    for message in body["messages"]:
        if isinstance(message.get("content"), list):
            blocks.extend(message["content"])
    return sum(1 for b in blocks if isinstance(b, Mapping) and "cache_control" in b)


def count_images(messages: Any) -> int:
    """The image blocks of a request's messages, in tool results too."""
    found = 0
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, Mapping) else None
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, Mapping):
                continue
            found += block.get("type") == "image"
            inner = block.get("content") if block.get("type") == "tool_result" else None
            found += sum(1 for p in inner if isinstance(p, Mapping) and p.get("type") == "image") if isinstance(
                inner, list) else 0
    return found


def size_refusal(raw: bytes) -> Refusal | None:
    """413 for a body past the standard endpoints' 32 MB, before anything is read."""
    if len(raw) > ANTHROPIC_REQUEST_BYTES:
        return 413, "request_too_large", "Request exceeds the maximum size"
    return None


def text_refusal(raw: bytes) -> Refusal | None:
    """400 for a body that is not UTF-8, or whose JSON holds a lone surrogate (a strict
    parser refuses the unpaired escape): no valid text."""
    try:
        json.dumps(json.loads(raw.decode("utf-8")), ensure_ascii=False).encode("utf-8")
    except ValueError:  # UnicodeError is one, and so is JSONDecodeError
        return 400, "invalid_request_error", "There was an issue with the format of the request body: invalid JSON"
    return None


def header_refusal(headers: Mapping[str, str], api_key: str | None) -> Refusal | None:
    """401 / 400 for the headers every request needs (``x-api-key``, ``anthropic-version``)."""
    if api_key is not None:
        if "x-api-key" not in headers:
            return 401, "authentication_error", "x-api-key header is required"
        if headers["x-api-key"] != api_key:
            return 401, "authentication_error", "invalid x-api-key"
    version = headers.get("anthropic-version")
    if version is None:
        return 400, "invalid_request_error", "anthropic-version: header is required"
    if version != "2023-06-01":
        return 400, "invalid_request_error", f"anthropic-version: invalid version {version!r}"
    return None


def refusal(body: Any, headers: Mapping[str, str] | None = None) -> Refusal | None:
    """The first thing the Messages API would refuse in ``body`` (sent with ``headers``:
    the betas it asks for), or None."""
    def bad(message: str) -> Refusal:
        return 400, "invalid_request_error", message

    if not isinstance(body, dict):
        return bad("There was an issue with the format of the request body: it is not a JSON object")
    extra = sorted(set(body) - TOP_LEVEL)
    if extra:
        return bad(f"{extra[0]}: Extra inputs are not permitted")
    for field in ("model", "max_tokens", "messages"):
        if field not in body:
            return bad(f"{field}: Field required")
    if isinstance(body["max_tokens"], bool) or not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
        return bad("max_tokens: Input should be greater than or equal to 1")
    system = body.get("system")
    if isinstance(system, list):
        for block in system:
            problem = _text_refusal(block.get("text")) if isinstance(block, Mapping) else "system: invalid block"
            if problem:
                return bad(problem)
    betas = frozenset(part.strip() for part in (headers or {}).get("anthropic-beta", "").split(",") if part.strip())
    if "tools" in body and (problem := _tools_refusal(body["tools"], betas, str(body["model"]))):
        return bad(problem)
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        return bad("messages: at least one message is required")
    images = count_images(messages)
    if images > ANTHROPIC_IMAGES:
        return bad(f"Too much media: 0 document pages + {images} images > {ANTHROPIC_IMAGES}")
    many = images > ANTHROPIC_MANY
    seen_ids: set[str] = set()
    open_ids: list[str] = []
    previous = None
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            return bad(f"messages.{i}: Input should be a valid dictionary")
        role = message.get("role")
        if role == "system":
            return bad('messages: Unexpected role "system". The Messages API accepts a top-level `system` '
                       'parameter, not "system" as an input message role.')
        if role not in ("user", "assistant"):
            return bad(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        extra = sorted(set(message) - {"role", "content"})
        if extra:
            return bad(f"messages.{i}.{extra[0]}: Extra inputs are not permitted")
        if i == 0 and role != "user":
            return bad('messages: first message must use the "user" role')
        if role == previous:
            return bad(f'messages: roles must alternate between "user" and "assistant", but found multiple '
                       f'"{role}" roles in a row')
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list) or not content:
            return bad(f"messages.{i}: all messages must have non-empty content except for the optional final "
                       "assistant message")
        for j, block in enumerate(content):
            problem = _block_refusal(f"messages.{i}.content.{j}", role, block, str(body["model"]), seen_ids, many)
            if problem:
                return bad(problem)
        if role == "user":
            if problem := _pairing_refusal(i, content, open_ids):
                return bad(problem)
            open_ids = []
        else:
            if open_ids:
                return bad(_pairing_refusal(i, [], open_ids) or "")
            open_ids = [b["id"] for b in content if b.get("type") == "tool_use"]
        previous = role
    if previous == "assistant":
        return bad("messages: the request ends on an assistant turn (a prefill); AgentLoom never sends one "
                   "(platform rule checked by this fake)")
    found = _count_breakpoints(body)
    if found > MAX_BREAKPOINTS:
        return bad(f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {found}.")
    return None


def _tokens(value: Any) -> int:
    return max(1, math.ceil(len(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()) / 4))


class PromptCache:
    """Entries are prefix hashes per model; see the module docstring for the rules."""

    def __init__(self, *, min_tokens: int = 0) -> None:
        self.entries: set[tuple[str, str]] = set()
        self.min_tokens = min_tokens

    @staticmethod
    def linearize(body: Mapping[str, Any]) -> list[tuple[str, dict[str, Any], bool]]:
        """``(role, block without cache_control, marked)`` in prompt order."""
        out: list[tuple[str, dict[str, Any], bool]] = []
        system = body.get("system")
        system_blocks = system if isinstance(system, list) else ([{"type": "text", "text": system}] if system else [])
        parts = [("tools", body.get("tools") or []), ("system", system_blocks)]
        for m in body["messages"]:
            content = m["content"]
            parts.append((m["role"], content if isinstance(content, list) else [{"type": "text", "text": content}]))
        for role, blocks in parts:
            for block in blocks:
                out.append((role, {k: v for k, v in block.items() if k != "cache_control"}, "cache_control" in block))
        return out

    def use(self, body: Mapping[str, Any]) -> dict[str, int]:
        """Read and write the cache for ``body``; its input usage figures."""
        blocks = self.linearize(body)
        model = str(body["model"])
        hashes, tokens, running, total = [], [], hashlib.sha256(model.encode()), 0
        for role, block, _ in blocks:
            running.update(json.dumps([role, block], sort_keys=True).encode())
            hashes.append(running.hexdigest())
            total += _tokens(block)
            tokens.append(total)
        marks = [i for i, (_, _, marked) in enumerate(blocks) if marked]
        hit = -1
        for mark in marks:
            for position in range(mark, max(-1, mark - LOOKBACK_BLOCKS), -1):
                if (model, hashes[position]) in self.entries:
                    hit = max(hit, position)
                    break
        read = tokens[hit] if hit >= 0 else 0
        last = max(marks) if marks else -1
        for mark in marks:
            if mark > hit and tokens[mark] >= self.min_tokens:
                self.entries.add((model, hashes[mark]))
        written = tokens[last] - read if last > hit and tokens[last] >= self.min_tokens else 0
        return {"input_tokens": total - read - written, "cache_creation_input_tokens": written,
                "cache_read_input_tokens": read}
