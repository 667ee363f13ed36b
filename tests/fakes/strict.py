"""A strict front for the fake provider: it refuses what real providers refuse.

Independent of our own validator on purpose — a second opinion on every request the
loop sends: 401 for a wrong key, 400 for a missing output-limit field, for a tool
message that does not answer the previous assistant's calls, for unanswered calls,
for empty messages and duplicate call ids, and for function names OpenAI refuses.
``rejections`` lists every refusal so a test can assert the platform never sent an
invalid request. A body that is not UTF-8, or whose JSON holds a lone surrogate (a
``\\ud800`` escape without its pair), is refused as OpenAI's parser refuses it.
"""
from __future__ import annotations

import json
import re
from typing import Any

from tests.fakes.image_rules import (
    OPENAI_IMAGE_BYTES,
    OPENAI_IMAGES,
    OPENAI_REQUEST_IMAGE_BYTES,
    decoded,
    sniffed,
)
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


_DATA_URL = re.compile(r"^data:(image/[a-zA-Z0-9.+-]+);base64,(.*)$", re.DOTALL)
_UNSUPPORTED_IMAGE = ("You uploaded an unsupported image. Please make sure your image is below 20 MB in size and "
                      "is of one the following formats: ['png', 'jpeg', 'gif', 'webp'].")


def image_problems(index: int, role: Any, content: Any, sizes: list[int] | None = None) -> list[str]:
    """OpenAI's refusals of image parts, in its words: images only in user messages, an
    ``image_url`` object with a ``url`` (an http(s) link or a base64 data URL of an image
    type) and an optional ``detail``, and bytes it can read as an image, at most 20 MB.
    ``sizes`` (when a list) receives the bytes of each image (0 for a link)."""
    problems: list[str] = []
    for k, part in enumerate(content if isinstance(content, list) else []):
        if not isinstance(part, dict) or part.get("type") != "image_url":
            continue
        where = f"messages[{index}].content[{k}]"
        if role != "user":
            problems.append(f"Invalid 'messages[{index}]'. Image URLs are only allowed for messages with role "
                            f"'user', but this message with role '{role}' contains an image URL.")
            continue
        image = part.get("image_url")
        extra = sorted(set(part) - {"type", "image_url"}) + sorted(set(image) - {"url", "detail"} if isinstance(
            image, dict) else ())
        if not isinstance(image, dict):
            problems.append(f"Invalid type for '{where}.image_url': expected an object, but got "
                            f"{type(image).__name__} instead.")
            continue
        if extra:
            problems.append(f"Unrecognized request argument supplied: {extra[0]}")
            continue
        url = image.get("url")
        if sizes is not None:
            sizes.append(0)
        if not isinstance(url, str):
            problems.append(f"Missing required parameter: '{where}.image_url.url'.")
            continue
        if image.get("detail", "auto") not in ("auto", "low", "high"):
            problems.append(f"Invalid value: '{image.get('detail')}'. Supported values are: 'auto', 'low', and "
                            "'high'.")
        if url.startswith(("https://", "http://")):
            continue
        found = _DATA_URL.match(url)
        if found is None:
            problems.append(f"Invalid image URL: '{where}.image_url.url'. Expected a base64-encoded data URL with an "
                            "image MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got a value "
                            "without the 'data:' prefix." if not url.startswith("data:") else
                            f"Invalid image URL: '{where}.image_url.url'. Expected a base64-encoded data URL with an "
                            "image MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU=').")
            continue
        raw = decoded(found.group(2))
        if raw is None or sniffed(raw) is None or len(raw) > OPENAI_IMAGE_BYTES:
            problems.append(_UNSUPPORTED_IMAGE)
        elif sizes is not None:
            sizes[-1] = len(raw)
    return problems


def request_image_problems(sizes: list[int]) -> list[str]:
    """What one request may carry of images: 500, and 50 MB of image bytes (OpenAI's
    documented limits; the wording is the one its API answers with)."""
    problems = []
    if len(sizes) > OPENAI_IMAGES:
        problems.append(f"Too many images in request. Max is {OPENAI_IMAGES}.")
    if sum(sizes) > OPENAI_REQUEST_IMAGE_BYTES:
        problems.append(f"Total image size is {sum(sizes) / (1024 * 1024):.1f}MB, which exceeds the allowed limit "
                        f"of {OPENAI_REQUEST_IMAGE_BYTES / (1024 * 1024):.1f}MB.")
    return problems


def body_text_problems(raw: bytes) -> list[str]:
    """OpenAI's refusal of a body its JSON parser cannot read as text: not UTF-8, or a
    string holding a lone surrogate (strict parsers refuse the unpaired escape)."""
    try:
        json.dumps(json.loads(raw.decode("utf-8")), ensure_ascii=False).encode("utf-8")
    except ValueError:  # UnicodeError is one, and so is JSONDecodeError
        return ["We could not parse the JSON body of your request."]
    return []


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
    sizes: list[int] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        problems.extend(image_problems(index, role, message.get("content"), sizes))
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
    problems.extend(request_image_problems(sizes))
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
            problems = body_text_problems(request.body) or protocol_problems(request.json)
            if problems:
                self.rejections.append((400, problems))
                return error(400, "; ".join(problems), code="invalid_request_error")
        return self.handler(request)
