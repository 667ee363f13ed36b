"""Files in the console (RUN-13): a question's attachments as the records page lists them,
and inline data (images in a body, a record's attachment data) shortened for reading.

Plain Python, like ``display``. The console never shows a file's bytes or draws an image
from a stored type: it lists name, type and size and links to the audited download
(``files.file_download_view``). The extracted text the model read is shown as its head.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# A base64 string this long or longer is data, not something to read.
DATA_SHORTEN_AT = 200
DATA_HEAD = 12
TEXT_HEAD_CHARS = 1_500


def _base64_bytes(data: str) -> int:
    """How many bytes a base64 string carries (four characters carry three)."""
    data = data.strip()
    return len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))


def data_note(data: str) -> str:
    """``iVBORw0KGgoA… (12,345 bytes)``: the first characters and the size."""
    return f"{data[:DATA_HEAD]}… ({_base64_bytes(data):,} bytes)"


def _is_data_url(value: str) -> bool:
    return value.startswith("data:") and ";base64," in value[:120] and len(value) >= DATA_SHORTEN_AT


def shortened(value: Any) -> Any:
    """``value`` with inline data shortened for people: a base64 ``data:`` URL becomes
    ``data:image/png;base64,iVBORw0KGgoA… (12,345 bytes)``, and so does a long string under
    a ``data`` key (an Anthropic image source, an attachment's image). Other values as
    they are; nothing is changed in place."""
    if isinstance(value, str):
        if _is_data_url(value):
            head, _, data = value.partition(",")
            return f"{head},{data_note(data)}"
        return value
    if isinstance(value, dict):
        return {key: data_note(item) if key == "data" and isinstance(item, str) and len(item) >= DATA_SHORTEN_AT
                else shortened(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [shortened(item) for item in value]
    return value


@dataclass(frozen=True)
class FileView:
    """One attachment of a question's record: what the records page lists."""

    id: int
    name: str
    content_type: str
    size: int
    kind: str
    detail: str  # "12 pages, 12 read", "800 × 600", "utf-8"
    text_head: str  # the start of the text the model read ("" for an image)
    text_chars: int

    @property
    def text_cut(self) -> bool:
        return self.text_chars > len(self.text_head)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _detail(item: dict[str, Any]) -> str:
    kind = item.get("kind")
    if kind == "pdf" and _int(item.get("pages")) is not None:
        read = _int(item.get("pages_read"))
        return f"{item['pages']} pages" + (f", {read} read" if read is not None and read != item["pages"] else "")
    if kind == "image" and _int(item.get("width")) and _int(item.get("height")):
        return f"{item['width']} × {item['height']}"
    if kind == "text" and item.get("encoding"):
        return str(item["encoding"])
    return ""


def file_views(attachments: Any) -> tuple[FileView, ...]:
    """A record's ``attachments`` (the RUN-13 shape) for the records page; an entry
    without a usable id is left out."""
    views = []
    for item in attachments if isinstance(attachments, list) else []:
        if not isinstance(item, dict) or (file_id := _int(item.get("id"))) is None or file_id <= 0:
            continue
        raw_text = item.get("text")
        body = raw_text if isinstance(raw_text, str) else ""
        views.append(FileView(id=file_id, name=str(item.get("name") or f"file {file_id}"),
                              content_type=str(item.get("content_type") or "?"), size=_int(item.get("size")) or 0,
                              kind=str(item.get("kind") or "?"), detail=_detail(item),
                              text_head=body[:TEXT_HEAD_CHARS], text_chars=len(body)))
    return tuple(views)
