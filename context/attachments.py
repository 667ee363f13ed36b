"""RUN-13: the files a person attached to a question, as the model sees them.

A user record may carry ``attachments`` beside its ``content`` (the contract of the
record, SPEC §3 and RUN-13)::

    {"id": 12, "name": "app.log", "content_type": "text/plain", "size": 2097152,
     "kind": "text", "encoding": "utf-8", "text": "..."}
    {"id": 14, "name": "contract.pdf", "kind": "pdf", "pages": 12, "pages_read": 12, "text": "..."}
    {"id": 13, "name": "screen.png", "content_type": "image/png", "kind": "image",
     "width": 800, "height": 600, "data": "<base64>"}

A file is part of its question: the question's text first, then one labelled block per
file. The text of the files shares ``limit`` characters (max-min fairly: short files stay
whole); a longer file shows its head and its tail (CTX-7's cut) with a note naming the
exact ``read_file`` call that reads the middle. An image becomes an image part after its
label; for a model that does not take images the adapters turn the pair into one note
naming the file (``image_note``). Nothing here touches a database: the record carries what
the model sees.

Every image of the history is sent again with every request, so a request keeps only what
the providers take (``ImageBudget``, ``apply_image_budget``): the newest images up to a
count and a total of base64 characters; an older one, and one that alone is past a
provider's per-image limit, becomes a note naming the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, MutableSequence, Sequence
from dataclasses import dataclass
from typing import Any

from context.records import USER, is_image_part, is_text_part, normalize_content
from context.truncation import DEFAULT_TOOL_RESULT_LIMIT, MIN_BLOCK_BUDGET, head_tail

READ_FILE_TOOL = "read_file"
# The most one read_file call returns, in characters (the tool and the note agree on it).
READ_FILE_MAX_CHARS = 20_000
DEFAULT_ATTACHMENT_LIMIT = DEFAULT_TOOL_RESULT_LIMIT
IMAGE_KINDS = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

_IMAGE_LABEL = re.compile(r"^\[Image (?P<body>.+)\]$", re.DOTALL)
IMAGE_NOTE_SUFFIX = " — this model does not take images; the person attached it]"


def human_size(size: Any) -> str:
    """``2097152`` → ``2.0 MB`` (binary units, one decimal), small sizes in bytes."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return "size unknown"
    if size < 1024:
        return f"{size} bytes"
    value = float(size)
    for unit in ("KB", "MB", "GB"):
        value /= 1024
        if value < 1024 or unit == "GB":
            break
    return f"{value:.1f} {unit}"


def _name(attachment: Mapping[str, Any]) -> str:
    name = attachment.get("name")
    return name if isinstance(name, str) and name.strip() else "unnamed file"


def _facts(attachment: Mapping[str, Any]) -> list[str]:
    facts = [_name(attachment), f"id {attachment.get('id', '?')}"]
    if isinstance(attachment.get("content_type"), str):
        facts.append(attachment["content_type"])
    facts.append(human_size(attachment.get("size")))
    return facts


def text_label(attachment: Mapping[str, Any]) -> str:
    """``[File app.log · id 12 · text/plain · 2.0 MB · utf-8]`` (a PDF says its pages)."""
    facts = _facts(attachment)
    if attachment.get("kind") == "pdf":
        pages, read = attachment.get("pages"), attachment.get("pages_read")
        if isinstance(pages, int) and isinstance(read, int) and read < pages:
            facts.append(f"text of the first {read} of {pages} pages")
        elif isinstance(pages, int):
            facts.append(f"{pages} page{'' if pages == 1 else 's'}")
    elif isinstance(attachment.get("encoding"), str):
        facts.append(attachment["encoding"])
    return f"[File {' · '.join(facts)}]"


def image_label(attachment: Mapping[str, Any]) -> str:
    """``[Image screen.png · id 13 · image/png · 12.1 KB · 800×600]``."""
    facts = _facts(attachment)
    width, height = attachment.get("width"), attachment.get("height")
    if isinstance(width, int) and isinstance(height, int):
        facts.append(f"{width}×{height}")
    return f"[Image {' · '.join(facts)}]"


def image_note(label: str) -> str | None:
    """The note that replaces an image label and its image for a model without image
    input, or None when ``label`` is not an image label."""
    found = _IMAGE_LABEL.match(label)
    return f"[Image {found.group('body')}{IMAGE_NOTE_SUFFIX}" if found else None


def _end(attachment: Mapping[str, Any]) -> str:
    return f"[end of {_name(attachment)}]"


def read_call(file_id: Any, offset: int, limit: int = READ_FILE_MAX_CHARS) -> str:
    """The exact tool call that reads a file's text from ``offset``."""
    arguments = json.dumps({"file_id": file_id, "offset": offset, "limit": limit})
    return f"{READ_FILE_TOOL} {arguments}"


def _middle_note(attachment: Mapping[str, Any], head_end: int, tail_start: int, total: int) -> str:
    omitted = tail_start - head_end
    span = (f"characters {head_end:,} to {tail_start:,} of {total:,}" if head_end
            else f"all {total:,} characters" if tail_start == total else f"characters 0 to {tail_start:,}")
    return (f"[... {omitted:,} characters of {_name(attachment)} are not shown here ({span}). Read them with "
            f"{read_call(attachment.get('id'), head_end, min(READ_FILE_MAX_CHARS, omitted))}, then the next "
            f"offset each time, up to offset {tail_start}; the whole file is kept ...]")


def _shares(sizes: Sequence[int], budget: int) -> list[int]:
    """Max-min fair split of ``budget`` over texts of ``sizes``: short ones whole; a long
    one whose share would be under ``MIN_BLOCK_BUDGET`` shows nothing (only its note)."""
    shares = [0] * len(sizes)
    remaining = budget
    pending = sorted(range(len(sizes)), key=lambda i: sizes[i])
    while pending:
        fair = remaining // len(pending)
        if sizes[pending[0]] <= fair:
            shares[pending[0]] = sizes[pending[0]]
            remaining -= sizes[pending.pop(0)]
            continue
        for i in pending:
            shares[i] = fair if fair >= MIN_BLOCK_BUDGET else 0
        break
    return shares


def _text_block(attachment: Mapping[str, Any], text: str, share: int) -> str:
    label = text_label(attachment)
    if len(text) <= share:
        return f"{label}\n{text or '(the file has no text)'}\n{_end(attachment)}"
    head_end, tail_start = head_tail(text, share)
    note = _middle_note(attachment, head_end, tail_start, len(text))
    pieces = [label, text[:head_end], note, text[tail_start:], _end(attachment)]
    return "\n".join(piece for piece in pieces if piece)


def _text_of(attachment: Mapping[str, Any]) -> str:
    text = attachment.get("text")
    return text if isinstance(text, str) else ""


def attachment_parts(attachments: Sequence[Any], limit: int = DEFAULT_ATTACHMENT_LIMIT) -> list[dict[str, Any]]:
    """The content parts of a question's files, in order (see the module docstring)."""
    files = [a for a in attachments if isinstance(a, Mapping)]
    texts = [_text_of(a) for a in files]
    is_image = [a.get("kind") == "image" for a in files]
    shares = _shares([0 if image else len(text) for image, text in zip(is_image, texts)], max(limit, 0))
    parts: list[dict[str, Any]] = []
    for attachment, text, image, share in zip(files, texts, is_image, shares):
        if not image:
            parts.append({"type": "text", "text": _text_block(attachment, text, share)})
            continue
        data, media = attachment.get("data"), attachment.get("content_type")
        if isinstance(data, str) and data and media in IMAGE_KINDS:
            parts.append({"type": "text", "text": image_label(attachment)})
            parts.append({"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}})
        else:
            parts.append({"type": "text", "text": f"{image_label(attachment)[:-1]} — the image could not be read]"})
    return parts


def question_content(message: Mapping[str, Any], limit: int = DEFAULT_ATTACHMENT_LIMIT) -> Any:
    """A user record's content as the model sees it: the text, then its files. Without
    ``attachments`` it is ``normalize_content`` of the content, exactly as before."""
    content = normalize_content(message.get("content"))
    attachments = message.get("attachments")
    if not isinstance(attachments, list) or not attachments:
        return content
    parts = attachment_parts(attachments, limit)
    if not parts:
        return content
    head: list[dict[str, Any]] = []
    if isinstance(content, str):
        head = [{"type": "text", "text": content}] if content.strip() else []
    elif isinstance(content, list):
        head = content
    joined = [*head, *parts]
    if all(p.get("type") == "text" for p in joined):
        return "\n\n".join(p["text"] for p in joined)
    return joined


def session_files(records: Iterable[Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    """The files attached to the questions of ``records``, each once, in order:
    ``{"id", "name", "kind", "size"}`` (what the runtime-state block lists, CTX-36)."""
    seen: set[Any] = set()
    out: list[dict[str, Any]] = []
    for record in records:
        message = record.get("message") if isinstance(record, Mapping) and record.get("kind") == USER else None
        for attachment in (message.get("attachments") if isinstance(message, Mapping) else None) or ():
            if not isinstance(attachment, Mapping) or attachment.get("id") in seen:
                continue
            seen.add(attachment.get("id"))
            out.append({"id": attachment.get("id"), "name": _name(attachment), "kind": attachment.get("kind", "text"),
                        "size": attachment.get("size")})
    return tuple(out)


def file_text(records: Iterable[Mapping[str, Any]], file_id: Any) -> tuple[Mapping[str, Any], str] | None:
    """The attachment ``file_id`` of ``records``' questions and its text (None when no
    question of these records carries it). An image has no text: its text is ''."""
    for record in records:
        message = record.get("message") if isinstance(record, Mapping) and record.get("kind") == USER else None
        for attachment in (message.get("attachments") if isinstance(message, Mapping) else None) or ():
            if isinstance(attachment, Mapping) and attachment.get("id") == file_id:
                text = attachment.get("text")
                return attachment, text if isinstance(text, str) else ""
    return None


# --- the image budget of one request ---------------------------------------------------

MB = 1024 * 1024
LEFT_OUT_SUFFIX = (" — left out of this request to keep it within the provider's limits on images; "
                   "attach it again to show it]")
TOO_LARGE_SUFFIX = (" — too large for the model's provider (at most {mb} MB once encoded and {side:,} px a side); "
                    "attach a smaller copy]")
IMAGE_LEFT_OUT_NOTE = "[an image left out of this request to keep it within the provider's limits on images]"
_SIDES = re.compile(r"(?P<w>\d+)×(?P<h>\d+)$")


@dataclass(frozen=True)
class ImageBudget:
    """What one request carries of images, safely under every provider's limits.

    Anthropic refuses more than 100 images (and past 20, any over 2000 px a side), a
    request over 32 MB, an image over 5 MB of base64 or 8000 px a side; OpenAI more than
    500 images or 50 MB of images. ``max_images`` and ``max_bytes`` (base64 characters of
    every image together) bound the request; ``max_image_bytes`` and ``max_side`` one
    image, whatever room is left."""

    max_images: int = 20
    max_bytes: int = 20 * MB
    max_image_bytes: int = 5 * MB
    max_side: int = 8000

    def __post_init__(self) -> None:
        if min(self.max_images, self.max_bytes, self.max_image_bytes, self.max_side) < 0:
            raise ValueError("an image budget is a number of images and of bytes, never negative")


DEFAULT_IMAGE_BUDGET = ImageBudget()


def image_bytes(part: Mapping[str, Any]) -> int:
    """The base64 characters of an image part (what a provider measures); 0 for a link."""
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, Mapping) else image
    if not isinstance(url, str) or not url.startswith("data:"):
        return 0
    comma = url.find(",")
    return len(url) - comma - 1 if comma >= 0 else 0


def _attachment_label(part: Any) -> str | None:
    text = part.get("text") if is_text_part(part) else None
    return text if isinstance(text, str) and _IMAGE_LABEL.match(text) else None


def _side(label: str | None) -> int:
    found = _SIDES.search(label[:-1]) if label else None
    return max(int(found.group("w")), int(found.group("h"))) if found else 0


def _budgeted(content: list[Any], budget: ImageBudget, room: list[int]) -> list[Any] | None:
    """``content`` with the images past ``room`` ([images, bytes] left, spent in place)
    as notes, newest last in the list and so read first; None when every image stays."""
    out: list[Any] = []
    changed = False
    k = len(content) - 1
    while k >= 0:
        part = content[k]
        if not is_image_part(part):
            out.append(part)
            k -= 1
            continue
        label = _attachment_label(content[k - 1]) if k > 0 else None
        size = image_bytes(part)
        if size > budget.max_image_bytes or _side(label) > budget.max_side:
            suffix = TOO_LARGE_SUFFIX.format(mb=budget.max_image_bytes // MB, side=budget.max_side)
        elif room[0] >= 1 and room[1] >= size:
            room[0], room[1] = room[0] - 1, room[1] - size
            out.append(part)
            k -= 1
            continue
        else:
            room[0] = room[1] = -1  # the newest first: every older image is left out too
            suffix = LEFT_OUT_SUFFIX
        changed = True
        out.append({"type": "text", "text": f"{label[:-1]}{suffix}" if label else IMAGE_LEFT_OUT_NOTE})
        k -= 2 if label else 1
    return out[::-1] if changed else None


def apply_image_budget(messages: MutableSequence[dict[str, Any]], budget: ImageBudget = DEFAULT_IMAGE_BUDGET,
                       positions: Sequence[int] | None = None) -> list[int]:
    """Keep the newest images of ``messages`` within ``budget``; every older one (and its
    attachment label) becomes one note — ``[Image screen.png · id 13 · … — left out of this
    request to keep it within the provider's limits on images; attach it again to show
    it]`` — and one too large for any request says so. ``positions`` (ascending) are the
    only messages that may hold images (default: all). A changed message is replaced by a
    new dict, never changed in place. Returns the positions changed, ascending."""
    room = [budget.max_images, budget.max_bytes]
    changed: list[int] = []
    for i in reversed(positions if positions is not None else range(len(messages))):
        content = messages[i].get("content")
        if not isinstance(content, list):
            continue
        new = _budgeted(content, budget, room)
        if new is not None:
            messages[i] = {**messages[i], "content": new}
            changed.append(i)
    return changed[::-1]


def question_message(message: Mapping[str, Any], limit: int = DEFAULT_ATTACHMENT_LIMIT,
                     image_budget: ImageBudget | None = DEFAULT_IMAGE_BUDGET) -> dict[str, Any]:
    """A stored question (a user record's message) as the user message of the view, its
    images within ``image_budget`` as in a projection of the question alone (the task
    anchor of a compacted view, CTX-31, is one)."""
    out = [{"role": "user", "content": question_content(message, limit)}]
    if image_budget is not None:
        apply_image_budget(out, image_budget)
    return out[0]


def _has_image(content: Any) -> bool:
    return isinstance(content, list) and any(is_image_part(part) for part in content)


class ImageBudgetPass:
    """``apply_image_budget`` on each output of a projection kept between steps, reading
    only what is new: the messages of the settled output that hold images are found once
    (a settled message never gains one). The settled output itself keeps every image
    (a later pass may leave out others instead: a newer screenshot strips an older one's
    images), so only the list handed out changes."""

    def __init__(self, budget: ImageBudget) -> None:
        self.budget = budget
        self._owner: object = None  # the settled output the positions are of
        self._read = 0  # how far that output was read
        self._listed: list[int] = []

    def apply(self, out: list[dict[str, Any]], owner: object, settled: int) -> list[int]:
        """Budget ``out``, whose first ``settled`` messages are ``owner``'s settled output
        (a new owner starts afresh); the positions changed, ascending."""
        if owner is not self._owner:
            self._owner, self._read, self._listed = owner, 0, []
        listed = [i for i in self._listed if i < settled]
        found = [i for i in range(self._read, len(out)) if _has_image(out[i].get("content"))]
        self._listed = listed + [i for i in found if i < settled]
        self._read = max(self._read, settled)
        return apply_image_budget(out, self.budget, listed + found)
