"""Attached files (RUN-13): stored encrypted with the session, sniffed by content, and
carried by the user record of the question that uses them.

``file_store`` refuses before it writes: past ``AGENTLOOM_FILE_MAX_BYTES`` (an image past
``AGENTLOOM_IMAGE_MAX_BYTES``) TooLarge ``file_too_large``, an image larger in pixels than
the server decodes (core/images.py) ``image_too_large``, past the session's
``AGENTLOOM_SESSION_FILES_MAX_BYTES`` TooLarge ``session_files_full``, past the person's
``AGENTLOOM_USER_FILES_MAX_BYTES`` (every file they uploaded, in every session)
``user_files_full`` (413), a kind it does not take UnsupportedType (415).
``attachments_take`` turns the ids a question names into the attachments its record
carries (the contract of RUN-13) and marks the files used; ``file_delete`` removes one no
question has used yet, which frees its room in the session and the person's.

A stored name is safe to show and to save as (``file_name_clean``, docs/web.md): no
control, format (bidi overrides, zero-width) or line/paragraph separator characters, and
an extension that says what the bytes are — a text file keeps its own only when it is a
plain-text one that opens in an editor, else ``.txt`` is appended; an image or a PDF ends
with its type's extension. The model, the chat, the console and every download see this
one name.
"""
from __future__ import annotations

import base64
import hashlib
import unicodedata
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils.http import content_disposition_header

from context.surrogates import replace_lone_surrogates
from core.errors import Conflict, NotFound, TooLarge, UnsupportedType, ValidationFailed
from core.slow_work import slow_work
from sessions.models import Session, SessionFile
from sessions.services.manual_compaction import session_lock
from sessions.services.people import person_lock
from sessions.sniff import ImageTooLarge, Unreadable, Unsupported, sniff

MAX_FILES_PER_QUESTION = 20
NAME_MAX = 255  # the column's bound
# Cc: C0 and C1 controls and DEL; Cf: format characters (U+202E right-to-left override,
# the other bidi controls, zero-width ones, U+FEFF); Cs: lone surrogates; Zl, Zp: U+2028
# and U+2029.
_NAME_DROPPED = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# Extensions a text file keeps: plain text a double-click opens in an editor or viewer.
# Not kept (``.txt`` is appended): anything a desktop runs or renders when opened — js
# (Windows Script Host), py, sh, bat, ps1, hta, … — and html, svg and xml, which a browser
# renders from disk; the bytes are stored and served as text/plain, so ``.txt`` is true.
TEXT_EXTENSIONS = frozenset({
    "txt", "text", "md", "markdown", "rst", "log", "csv", "tsv", "json", "jsonl", "ndjson", "yaml", "yml",
    "toml", "ini", "cfg", "conf", "sql", "diff", "patch", "c", "h", "cc", "cpp", "hpp", "cs", "go", "rs",
    "java", "kt", "swift", "ts", "css"})
_TYPE_EXTENSIONS = {"application/pdf": ("pdf",), "image/png": ("png",), "image/jpeg": ("jpg", "jpeg"),
                    "image/webp": ("webp",), "image/gif": ("gif",)}


def megabytes(size: int) -> str:
    """A bound in words, rounded down (3,750,000 bytes is "3.5 MB", never "4 MB": a person
    told a figure above the bound would attach a file it then refuses)."""
    if size < 1024 * 1024:
        return f"{size // 1024} KB"
    tenths = size * 10 // (1024 * 1024)
    return f"{tenths // 10} MB" if tenths % 10 == 0 else f"{tenths // 10}.{tenths % 10} MB"


def file_too_large(limit: int) -> TooLarge:
    """413 ``file_too_large``: raised here and by the upload handler while the body arrives."""
    return TooLarge(f"The file is larger than {megabytes(limit)}, the most this server takes. "
                    "Attach a smaller file, or only the part that matters.", code="file_too_large")


def _extensions(*, kind: str, content_type: str) -> tuple[str, ...]:
    """The extensions a name of this kind may end with, the one to append first."""
    if kind == SessionFile.Kind.TEXT:
        return ("txt", *sorted(TEXT_EXTENSIONS))
    if content_type in _TYPE_EXTENSIONS:
        return _TYPE_EXTENSIONS[content_type]
    subtype = "".join(ch for ch in content_type.rpartition("/")[2].split("+")[0] if ch.isascii() and ch.isalnum())
    return (subtype or "bin",)


def file_name_clean(name: Any, *, kind: str, content_type: str) -> str:
    """The last part of the name the browser sent, without slashes or the characters of
    ``_NAME_DROPPED``, ending with an extension of what the bytes are (``kind`` and
    ``content_type`` as sniffed), at most NAME_MAX characters. Idempotent, so a name
    stored before these rules is cleaned the same way when it is downloaded."""
    text = str(name or "").replace("\\", "/").rsplit("/", 1)[-1]
    text = "".join(ch for ch in text if unicodedata.category(ch) not in _NAME_DROPPED)
    text = text.strip().rstrip(". ")  # Windows drops trailing dots and spaces itself
    stem, dot, extension = text.rpartition(".")
    allowed = _extensions(kind=kind, content_type=content_type)
    if dot and stem and extension.lower() in allowed:
        base, suffix = stem, "." + extension
    else:
        base, suffix = text, "." + allowed[0]
    base = base[:NAME_MAX - len(suffix)].rstrip(". ") or "file"
    return base + suffix


def file_name_of(file: SessionFile) -> str:
    """The name ``file`` is downloaded as (its stored name, cleaned again for older rows)."""
    return file_name_clean(file.name, kind=file.kind, content_type=file.content_type)


def attachment_disposition(name: str) -> str:
    """The ``Content-Disposition`` of a download named ``name``: an attachment, never shown in
    the page (Django's helper gives None only for an inline file with no name)."""
    return content_disposition_header(as_attachment=True, filename=name) or "attachment"


def file_store(*, session: Session, user, name: Any, data: bytes) -> SessionFile:
    """Sniff ``data`` and store it with ``session``; nothing is written on a refusal.

    Takes the person's and the session's row locks (its own transaction), so two uploads
    cannot both fit in the room left for one. The caller has checked that ``user`` may
    write the session.
    """
    if not data:
        raise ValidationFailed("The file is empty. Attach a file with something in it.", code="empty_file",
                               fields={"file": "empty"})
    if len(data) > settings.AGENTLOOM_FILE_MAX_BYTES:
        raise file_too_large(settings.AGENTLOOM_FILE_MAX_BYTES)
    try:
        # A PDF read or an image decoded runs in a child process: one of a bounded number at
        # once, the request's database connection given back meanwhile (slow_work.py).
        found = sniff(data, pdf_max_pages=settings.AGENTLOOM_PDF_MAX_PAGES,
                      pdf_max_seconds=settings.AGENTLOOM_PDF_MAX_SECONDS,
                      image_max_decoded_bytes=settings.AGENTLOOM_IMAGE_MAX_DECODED_BYTES,
                      around_child=lambda: slow_work("extraction", person=getattr(user, "pk", None)))
    except Unsupported as exc:
        raise UnsupportedType(f"{exc} Attach text, a PDF, or a PNG, JPEG, WebP or GIF image.") from None
    except ImageTooLarge as exc:
        raise TooLarge(str(exc), code="image_too_large") from None
    except Unreadable as exc:
        raise UnsupportedType(str(exc)) from None
    if found.kind == SessionFile.Kind.IMAGE and len(data) > settings.AGENTLOOM_IMAGE_MAX_BYTES:
        raise TooLarge(f"Images can be at most {megabytes(settings.AGENTLOOM_IMAGE_MAX_BYTES)}. "
                       "Attach a smaller or scaled-down copy.", code="file_too_large")
    with transaction.atomic():
        person_lock(user=user)  # the person's files across sessions, then this session's
        session_lock(session_id=session.pk)
        _room_check(session=session, user=user, size=len(data))
        return SessionFile.objects.create(
            session=session, uploaded_by=user, content_type=found.content_type,
            name=file_name_clean(name, kind=found.kind, content_type=found.content_type),
            kind=found.kind, size=len(data), sha256=hashlib.sha256(data).hexdigest(), encoding=found.encoding,
            pages=found.pages, pages_read=found.pages_read, width=found.width, height=found.height,
            data=data, text=replace_lone_surrogates(found.text))  # a PDF's text can hold them


def _room_check(*, session: Session, user, size: int) -> None:
    """TooLarge when ``size`` more bytes pass the session's room or the person's (both
    rows locked by the caller, so two uploads cannot both take the last of either)."""
    used = SessionFile.objects.filter(session=session).aggregate(total=Sum("size"))["total"] or 0
    room = settings.AGENTLOOM_SESSION_FILES_MAX_BYTES
    if used + size > room:
        raise TooLarge(f"This conversation already holds {megabytes(used)} of files, and takes at most "
                       f"{megabytes(room)}. Remove a file you have not sent yet, or start a new "
                       "conversation to attach more.",
                       code="session_files_full")
    held = SessionFile.objects.filter(uploaded_by=user).aggregate(total=Sum("size"))["total"] or 0
    allowed = settings.AGENTLOOM_USER_FILES_MAX_BYTES
    if held + size > allowed:
        raise TooLarge(f"Your files on this server already take {megabytes(held)}, and each person may keep at "
                       f"most {megabytes(allowed)}. Remove files you have not sent yet, or ask the operator for "
                       "more room.", code="user_files_full")


def file_delete(*, file: SessionFile) -> None:
    """Delete ``file`` while no question has used it, which frees its room in the session.

    Conflict (409 ``file_in_question``) once a question has used it: it is part of that
    question's record then. Takes the session's row lock (its own transaction), the lock a
    question takes its files under, so a file is either sent or deleted, never both. The
    caller has checked that it may read the session.
    """
    with transaction.atomic():
        session_lock(session_id=file.session_id)
        if SessionFile.objects.filter(pk=file.pk, question_seq__isnull=True).delete()[0]:
            return
        if SessionFile.objects.filter(pk=file.pk).exists():
            raise Conflict("This file was sent with a question, so it stays with that question's record and "
                           "cannot be removed. Only files not sent yet can be.", code="file_in_question")
    raise NotFound("File not found.")  # removed meanwhile, by another request


def attachment_of(file: SessionFile) -> dict[str, Any]:
    """What the question's record carries of ``file`` (the RUN-13 contract)."""
    item: dict[str, Any] = {"id": file.pk, "name": file.name, "content_type": file.content_type,
                            "size": file.size, "kind": file.kind}
    if file.kind == SessionFile.Kind.IMAGE:
        item.update(width=file.width, height=file.height, data=base64.b64encode(bytes(file.data)).decode("ascii"))
    elif file.kind == SessionFile.Kind.PDF:
        item.update(pages=file.pages, pages_read=file.pages_read, text=file.text)
    else:
        item.update(encoding=file.encoding, text=file.text)
    return item


def file_ids_clean(ids: Any) -> list[int]:
    """A list of distinct positive ids, or ValidationFailed on ``files``."""
    if ids is None:
        return []
    if not isinstance(ids, list) or len(ids) > MAX_FILES_PER_QUESTION:
        raise ValidationFailed("Attach at most 20 files to one question.",
                               fields={"files": f"a list of at most {MAX_FILES_PER_QUESTION} file ids"})
    if not all(isinstance(i, int) and not isinstance(i, bool) and 0 < i < 2**62 for i in ids) \
            or len(set(ids)) != len(ids):
        raise ValidationFailed("The attached files are not valid.", fields={"files": "distinct file ids"})
    return ids


def attachments_take(*, session: Session, ids: list[int]) -> list[SessionFile]:
    """The files ``ids`` name, in that order: each of ``session`` and not yet used by a
    question, else ValidationFailed (400). Inside the question's transaction, session row
    locked; the caller marks them with ``attachments_mark`` once its record has a seq."""
    if not ids:
        return []
    files = {f.pk: f for f in SessionFile.objects.filter(session=session, pk__in=ids, question_seq__isnull=True)}
    missing = [i for i in ids if i not in files]
    if missing:
        raise ValidationFailed("A file to attach is not one of this conversation's, or was already sent with "
                               "a question. Upload it again.",
                               fields={"files": f"not an unused file of this session: {missing[0]}"})
    return [files[i] for i in ids]


def attachments_mark(*, files: list[SessionFile], question_seq: int) -> None:
    """Mark ``files`` used by the record ``question_seq``; inside the same transaction."""
    marked = SessionFile.objects.filter(pk__in=[f.pk for f in files], question_seq__isnull=True).update(
        question_seq=question_seq)
    if marked != len(files):  # the session lock makes this unreachable; refuse rather than share a file
        raise ValidationFailed("A file was just sent with another question. Upload it again.",
                               fields={"files": "already used"})
