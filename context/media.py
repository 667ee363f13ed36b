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


def trim_screenshots(messages: list[dict[str, Any]], imaged: list[int], screen_positions: Iterable[int]) -> list[int]:
    """Strip images from every screen observation but the newest one that has images.

    ``imaged`` lists, in order, positions of ``messages`` already known to be screen
    observations that had images; all but its last were stripped before.
    ``screen_positions`` are the newer screen observations, in order. ``imaged`` is
    extended in place; every position whose images are (or were) stripped is returned.
    A stripped message is replaced by a new dict, never changed in place: the list may
    share earlier messages with an output already handed out.
    """
    first = len(imaged) - 1 if imaged else 0
    imaged.extend(i for i in screen_positions if count_images(messages[i].get("content")))
    for i in imaged[first:-1]:
        if count_images(messages[i].get("content")):
            messages[i] = {**messages[i], "content": strip_images(messages[i]["content"])}
    return imaged[:-1]
