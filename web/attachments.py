"""A question's attached files as the chat shows them (RUN-13): name, size, kind, a
download link for every file, a thumbnail only for a sniffed raster image type.

Read from the question's record (``attachments``: id, name, content_type, size, kind —
the text and image data in it are the model's, never shown here). The thumbnail is
loaded from the download address into an ``<img>``; an SVG, HTML or anything else is
never rendered, whatever its name says: ``content_type`` is what the server sniffed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.urls import reverse

# The raster types a browser draws without running anything (the ones RUN-13 takes).
THUMBNAIL_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
KIND_LABELS = {"text": "text", "pdf": "PDF", "image": "image"}


def size_label(size: int) -> str:
    """Bytes for people, as the chat's chips word them (static/web/attach.js ``sizeLabel``)."""
    if size < 1024:
        return f"{size} byte{'' if size == 1 else 's'}"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


@dataclass(frozen=True)
class AttachmentView:
    id: int
    name: str
    content_type: str
    size: int
    kind: str

    @property
    def size_label(self) -> str:
        return size_label(self.size)

    @property
    def kind_label(self) -> str:
        return KIND_LABELS.get(self.kind, "file")

    @property
    def thumbnail(self) -> bool:
        return self.kind == "image" and self.content_type in THUMBNAIL_TYPES

    @property
    def url(self) -> str:
        return reverse("file-download", args=[self.id])


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def attachment_views(message: Any) -> list[AttachmentView]:
    """The attachments of a question's record, in the order they were attached; an entry
    without a usable id is left out (nothing to link to)."""
    raw = message.get("attachments") if isinstance(message, dict) else None
    views = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict) or (file_id := _int(item.get("id"))) is None or file_id <= 0:
            continue
        views.append(AttachmentView(id=file_id, name=str(item.get("name") or f"file {file_id}"),
                                    content_type=str(item.get("content_type") or ""),
                                    size=_int(item.get("size")) or 0, kind=str(item.get("kind") or "")))
    return views
