"""CTX-11, step 3 of ``context.anthropic``: a list that passed CTX-10 in Anthropic mode as
native turns — ``system`` top-level; user and assistant turns only, consecutive same-role
messages merged; every ``tool_result`` in the user turn after its ``tool_use``; images as
``base64`` or ``url`` blocks; signed thinking blocks back verbatim when the same model
continues; tools as ``{name, description, input_schema}``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

from context.anthropic_validate import IMAGE_MEDIA_TYPES, is_signed_thinking
from context.compaction.view import is_continuation_message
from context.records import is_image_part, is_text_part
from context.surrogates import json_loads_clean

IMAGE_UNREADABLE_NOTE = "[image omitted: not an image format the model accepts]"
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
# Set aside on a message before adapting (the adapter removes ``reasoning``): never sent.
THINKING_KEY = "_anthropic_thinking"
_DATA_URL = re.compile(r"^data:(image/[a-z0-9.+-]+);base64,(.+)$", re.IGNORECASE | re.DOTALL)


def _image_block(part: Mapping[str, Any]) -> dict[str, Any]:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, Mapping) else image
    url = url.strip() if isinstance(url, str) else ""
    match = _DATA_URL.match(url)
    if match:
        media_type = match.group(1).lower().replace("image/jpg", "image/jpeg")
        data = re.sub(r"\s+", "", match.group(2))
        if media_type in IMAGE_MEDIA_TYPES and data and re.fullmatch(r"[A-Za-z0-9+/]+=*", data):
            return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    elif url.lower().startswith(("https://", "http://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    return {"type": "text", "text": IMAGE_UNREADABLE_NOTE}


def _content_blocks(content: Any) -> list[dict[str, Any]]:
    """Text and image parts (already free of blank text) as native blocks."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    blocks: list[dict[str, Any]] = []
    for part in content or ():
        if is_text_part(part) and part["text"].strip():
            blocks.append({"type": "text", "text": part["text"]})
        elif is_image_part(part):
            blocks.append(_image_block(part))
    return blocks


def _assistant_blocks(message: Mapping[str, Any], keep_thinking: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    thinking = message.get(THINKING_KEY)
    if keep_thinking and isinstance(thinking, list) and thinking and all(is_signed_thinking(b) for b in thinking):
        blocks.extend(copy.deepcopy(thinking))  # verbatim: the signature covers them
    blocks.extend(_content_blocks(message.get("content")))
    for call in message.get("tool_calls") or ():
        function = call["function"]
        blocks.append({"type": "tool_use", "id": call["id"], "name": function["name"],
                       # Stored text from before lone surrogates were replaced may escape one.
                       "input": json_loads_clean(function["arguments"] or "{}")})
    return blocks


def _result_block(message: Mapping[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    body: str | list[dict[str, Any]] = content if isinstance(content, str) else _content_blocks(content)
    return {"type": "tool_result", "tool_use_id": message["tool_call_id"], "content": body}


def native_turns(
    adapted: Sequence[Mapping[str, Any]], *, keep_thinking: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], tuple[int, int] | None]:
    """Step 3 on a list that passed CTX-10 in Anthropic mode: ``(system blocks, turns,
    summary)`` where ``summary`` locates the latest continuation summary's last block as
    ``(turn, block)``, or is None."""
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    summary: tuple[int, int] | None = None
    for message in adapted:
        role = message["role"]
        if role in ("system", "developer"):
            system.extend(_content_blocks(message.get("content")))
            continue
        native_role = "assistant" if role == "assistant" else "user"
        if role == "assistant":
            blocks = _assistant_blocks(message, keep_thinking)
        elif role == "tool":
            blocks = [_result_block(message)]
        else:
            blocks = _content_blocks(message.get("content"))
        if not blocks:
            continue
        if not turns or turns[-1]["role"] != native_role:
            turns.append({"role": native_role, "content": []})
        turns[-1]["content"].extend(blocks)
        if is_continuation_message(message):
            summary = (len(turns) - 1, len(turns[-1]["content"]) - 1)
    return system, turns, summary


def native_tools(tools: Sequence[Mapping[str, Any]] | None,
                 native_types: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """OpenAI ``{"type": "function", "function": {...}}`` tools as ``{name, description,
    input_schema}``; tools already in the native shape pass through (copied). A tool named
    in ``native_types`` is offered as that Anthropic-defined type (``memory_20250818``):
    its name and type only, the schema being Anthropic's own."""
    out: list[dict[str, Any]] = []
    for tool in tools or ():
        function = tool.get("function")
        spec: Mapping[str, Any] = function if isinstance(function, Mapping) else tool
        if native_types and spec.get("name") in native_types:
            out.append({"type": native_types[spec["name"]], "name": spec["name"]})
            continue
        native: dict[str, Any] = {"name": spec.get("name")}
        description = spec.get("description")
        if isinstance(description, str) and description.strip():
            native["description"] = description
        schema = spec.get("input_schema", spec.get("parameters"))
        native["input_schema"] = copy.deepcopy(dict(schema)) if isinstance(schema, Mapping) else dict(EMPTY_SCHEMA)
        out.append(native)
    return out
