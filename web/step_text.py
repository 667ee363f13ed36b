"""A tool step's words in the chat: its duration, its arguments as shown, the images of its
result. Escaped by the templates, never markup."""
from __future__ import annotations

import json
from typing import Any

from context.records import is_image_part
from core.api.parsers import json_loads_bounded

MAX_STEP_IMAGES = 4
SHOWN_IMAGE_PREFIXES = tuple(f"data:image/{kind};base64," for kind in ("png", "jpeg", "gif", "webp"))


def duration_label(ms: int | None) -> str:
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms} ms"
    return f"{ms / 1000:.1f} s"


def arguments_pretty(arguments: Any) -> str:
    """A tool call's arguments as the chat shows them: JSON indented (as the browser
    does live, chat.js), anything else as it came. Escaped by the template, never markup."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    try:
        parsed = json_loads_bounded(text)  # a model's or an import's "[[[…" is shown as it came
    except (TypeError, ValueError):
        return text
    if not isinstance(parsed, (dict, list)):
        return text
    return json.dumps(parsed, indent=2, ensure_ascii=False)


def result_images(content: Any) -> list[str]:
    """The images of a tool result to show on its step: raster data URLs only (an SVG or a
    link is never rendered inline), at most a few."""
    if not isinstance(content, list):
        return []
    urls = [part["image_url"].get("url", "") for part in content
            if is_image_part(part) and isinstance(part.get("image_url"), dict)]
    return [url for url in urls if isinstance(url, str) and url.startswith(SHOWN_IMAGE_PREFIXES)][:MAX_STEP_IMAGES]
