"""A PDF's text, read in a separate process with a hard deadline (RUN-13).

pypdf runs on untrusted bytes: one page of a few hundred thousand text operators, a
hostile page tree or a huge stream can keep it busy for as long as it likes, and a check
between pages cannot stop a page being read. So the reading happens in a child process
(``python -m sessions.pdf_text``, run by :mod:`core.child_process`) that gets the
bytes on stdin and writes one JSON record a line on stdout, a page at a time. The parent
kills it at the deadline and keeps the pages that arrived by then; with none, the PDF is
refused. The child also bounds its own memory (``RLIMIT_AS``) and CPU time, and its
output is bounded on both sides.

Plain Python, no Django: bytes in, :class:`PdfRead` out.
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

TOO_SLOW = "This PDF took too long to read. Attach a shorter copy, or paste the text you need."
LOCKED = "This PDF is protected by a password. Attach a copy without one."
DAMAGED = "This PDF could not be read; it may be damaged."
TOO_BIG = "This PDF needs too much memory to read. Attach a shorter copy, or paste the text you need."
_REASONS = {"locked": LOCKED, "damaged": DAMAGED, "memory": TOO_BIG}

MAX_MEMORY_BYTES = 1024 * 1024 * 1024  # address space of the reading process
MAX_TEXT_CHARS = 4_000_000  # text kept of one PDF; the page that reaches it is cut there
# ASCII JSON: at most 12 bytes a character (a surrogate pair), plus a little a record.
_MAX_OUTPUT_BYTES = 12 * MAX_TEXT_CHARS + 1024 * 1024
_ROOT = Path(__file__).resolve().parents[1]  # where ``sessions`` is importable from


@dataclass(frozen=True)
class PdfRead:
    """What the child gave: the text of ``pages_read`` of ``pages`` pages, or ``refusal``
    (the words for the person). ``pid`` is the child's, gone by the time this is returned."""

    pid: int
    text: str = ""
    pages: int = 0
    pages_read: int = 0
    refusal: str = ""


def pdf_read(data: bytes, *, max_pages: int, max_seconds: float,
             max_memory_bytes: int = MAX_MEMORY_BYTES) -> PdfRead:
    """Read ``data``'s first ``max_pages`` pages in a child process, killed after
    ``max_seconds``; the pages read by then are kept. Never raises on the PDF's account."""
    # Imported here, not above: the child runs this module, and ``agentloom`` brings Celery.
    from core.child_process import child_run

    command = [sys.executable, "-m", "sessions.pdf_text", str(max_pages),
               str(math.ceil(max_seconds) + 1), str(max_memory_bytes)]
    output = child_run(command, data, max_seconds=max_seconds, max_output_bytes=_MAX_OUTPUT_BYTES, cwd=_ROOT)
    if output.malformed:
        return PdfRead(pid=output.pid, refusal=DAMAGED)
    return _outcome(output.pid, output.records, finished=output.finished)


def _outcome(pid: int, records: list[dict], *, finished: bool) -> PdfRead:
    pages: int | None = None
    texts: list[str] = []
    for record in records:
        if "refused" in record:
            return PdfRead(pid=pid, refusal=_REASONS.get(record["refused"], DAMAGED))
        if "pages" in record:
            pages = int(record["pages"])
        elif "text" in record:
            texts.append(str(record["text"]))
        elif record.get("done") and pages is not None:
            return PdfRead(pid=pid, text="\n\n".join(texts), pages=pages, pages_read=len(texts))
    if finished or pages is None or not texts:  # it died without a word, or read no page in time
        return PdfRead(pid=pid, refusal=DAMAGED if finished else TOO_SLOW)
    return PdfRead(pid=pid, text="\n\n".join(texts), pages=pages, pages_read=len(texts))


# --- the child ----------------------------------------------------------------------------------


def _write(record: dict) -> None:
    sys.stdout.buffer.write(json.dumps(record).encode("ascii") + b"\n")
    sys.stdout.buffer.flush()


def _child(max_pages: int, cpu_seconds: int, memory_bytes: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))  # if the parent is gone
    data = sys.stdin.buffer.read()
    try:
        import io

        from pypdf import PdfReader

        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            _write({"refused": "locked"})
            return
        total = len(reader.pages)
        _write({"pages": total})
        room = MAX_TEXT_CHARS
        for index in range(min(total, max_pages)):
            if room <= 0:
                break
            text = (reader.pages[index].extract_text() or "")[:room]
            room -= len(text)
            _write({"text": text})
    except MemoryError:
        _write({"refused": "memory"})
        return
    except Exception:  # untrusted bytes: whatever the reader trips on, the PDF is damaged
        _write({"refused": "damaged"})
        return
    _write({"done": True})


if __name__ == "__main__":
    _child(*(int(argument) for argument in sys.argv[1:4]))
