"""CTX-8: old screenshots give way to the newest one.

A browser agent takes a screenshot at every step; by the fifth step the first four show
pages that no longer exist yet still cost thousands of tokens each. Only the newest
screen observation that has images keeps them. Earlier ones keep their text (what was
observed along the way) and get a short note where the images were. User uploads and
other tools' images are never touched: they are evidence, not a stale view of a screen.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from context.records import is_image_part

DEFAULT_SCREEN_TOOLS = frozenset({"browser_use"})


def omission_note(count: int) -> dict[str, str]:
    """The text part that replaces the images of an older screen observation."""
    if count == 1:
        text = "[earlier screenshot omitted: a newer screen observation supersedes it]"
    else:
        text = f"[{count} earlier screenshots omitted: a newer screen observation supersedes them]"
    return {"type": "text", "text": text}


def count_images(content: Any) -> int:
    """Number of image parts in a message's content."""
    if not isinstance(content, list):
        return 0
    return sum(1 for part in content if is_image_part(part))


def strip_images(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return ``content`` with its images replaced by one omission note, text kept in order."""
    count = count_images(content)
    out: list[dict[str, Any]] = []
    noted = False
    for part in content:
        if is_image_part(part):
            if not noted:
                out.append(omission_note(count))
                noted = True
        else:
            out.append(part)
    return out


def trim_screenshots(messages: list[dict[str, Any]], screen_positions: Iterable[int]) -> list[int]:
    """Strip images from every screen observation but the newest one that has images.

    ``screen_positions`` lists, in order, the indexes of ``messages`` that hold the result
    of a screen-observing tool. ``messages`` is the projector's own fresh output, so it is
    changed in place.
    """
    with_images = [i for i in screen_positions if count_images(messages[i].get("content"))]
    for i in with_images[:-1]:
        messages[i]["content"] = strip_images(messages[i]["content"])
    return with_images[:-1]
