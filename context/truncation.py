"""CTX-7: how much of a tool result the model sees.

The model view keeps the head and the tail of a long text -- a log's final error matters
as much as its first lines -- with one marker in between that names what was left out and
which record holds the full text. The records always keep the whole result.

The bound is for the whole result, and it wins over keeping every block (CTX-7's
precedence): a result of several text blocks shares it, every block kept in order, each
long one with its own marker, while each long block can keep ``MIN_BLOCK_BUDGET``
characters and their markers take at most a tenth of the bound (``MARKER_SHARE``); past
that (many long blocks) the blocks are cut as one text, the head of the first ones and the
tail of the last ones, with one marker where the middle was. 55 blocks of 1,000 characters
used to keep a marker each: 8,635 of the 24,000 characters (36%) were markers.

Answers have two bounds: the view shows one like a tool result (the projector), and
``answer_bound`` is how much of one the run loop keeps while it streams.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from typing import Any

from context.records import is_text_part

DEFAULT_TOOL_RESULT_LIMIT = 24_000

# Below this share a block would be mostly marker. While every long block of a result can
# keep this much, each keeps its own head and tail; otherwise the result is cut as a whole.
MIN_BLOCK_BUDGET = 400

# The markers of a result cut block by block take at most this share of its bound (CTX-7):
# past it the blocks are cut as one text, with one marker. At 24,000 characters that is 14
# blocks each with its own marker of about 160 characters.
MARKER_SHARE = 0.1

# What is kept of an answer while it streams, per token of its output limit. No answer
# measured (1,628 of the corpus, six real tokenizers) averages more than 6.4 characters a
# token; 32 is five times that, so only a provider that ignored ``max_tokens`` is cut.
ANSWER_CHARS_PER_TOKEN = 32

# A cut of one text: (head, marker, tail), the head a prefix and the tail a suffix of it.
_Parts = tuple[str, str, str]

_MARKER = (
    "\n\n[... truncated: {omitted} of {total} characters omitted from the middle "
    "(record seq {seq}); the full text is kept in the records and read_record pages "
    "through it ...]\n\n"
)
_MARKER_RE = re.compile(
    r"\n\n\[\.\.\. truncated: (\d+) of (\d+) characters omitted from the middle "
    r"\(record seq ([^)]*)\); the full text is kept in the records and read_record pages "
    r"through it \.\.\.\]\n\n"
)


def answer_bound(max_output_tokens: int) -> int:
    """Characters of one answer (text, reasoning and call arguments together) kept while it
    streams, for an output limit of ``max_output_tokens``: past it the provider ignored
    the limit, and the answer is cut there, recorded as stopped by its output limit."""
    return ANSWER_CHARS_PER_TOKEN * max(max_output_tokens, 1)


def marker(omitted: int, total: int, seq: Any) -> str:
    """The text placed between head and tail of a truncated result."""
    return _MARKER.format(omitted=omitted, total=total, seq="?" if seq is None else seq)


def _is_joiner(ch: str) -> bool:
    # Combining marks, zero-width joiners and variation selectors belong to the character
    # before them; cutting in front of one would split a visible character in two.
    return ch in "\u200d\ufe0e\ufe0f" or unicodedata.combining(ch) != 0


def _splits(text: str, at: int) -> bool:
    # A cut before a joiner, or right after a zero-width joiner, splits one visible
    # character (an accented letter, an emoji sequence) across the marker.
    return 0 < at < len(text) and (_is_joiner(text[at]) or text[at - 1] == "\u200d")


def _head_end(text: str, end: int) -> int:
    while _splits(text, end):
        end -= 1
    return end


def _tail_start(text: str, start: int) -> int:
    while _splits(text, start):
        start += 1
    return start


def truncate_text(text: str, limit: int = DEFAULT_TOOL_RESULT_LIMIT, seq: Any = None) -> str:
    """Return ``text`` cut to at most ``limit`` characters, marker included.

    Cuts fall on code-point boundaries and never separate a character from its combining
    marks. A text that already carries markers is re-cut around them -- its head ends
    before the first, its tail starts after the last -- so the result still has exactly
    one, and it keeps reporting the original total size and record (re-truncating a
    checkpoint's text must not lose where it came from).
    """
    if len(text) <= limit:
        return text
    return "".join(_view_parts(text, limit, seq))


def head_tail(text: str, budget: int) -> tuple[int, int]:
    """Where CTX-7 cuts ``text`` to keep ``budget`` characters of it, half head and half
    tail: ``(head_end, tail_start)``, on character boundaries (never splitting a character
    from its combining marks or joiners). The whole text gives ``(len, len)``."""
    if len(text) <= budget:
        return len(text), len(text)
    head_len = max(budget, 0) // 2
    return _head_end(text, head_len), _tail_start(text, len(text) - (max(budget, 0) - head_len))


def _view_parts(text: str, limit: int, seq: Any) -> _Parts:
    # Markers already in the text are earlier cuts -- of this text, or of blocks now cut as
    # one text. What lies between the first and the last is not contiguous text any more,
    # so the new head ends before the first and the new tail starts after the last, and
    # the one new marker reports the original size: the text outside the markers plus
    # what each of them says it left out, and the record the first one names.
    found = list(_MARKER_RE.finditer(text))
    if found:
        head, tail = text[: found[0].start()], text[found[-1].end() :]
        total = len(text) - sum(len(m.group()) for m in found) + sum(int(m.group(1)) for m in found)
        seq = found[0].group(3)
    else:
        head, tail, total = text, text, len(text)
    # Size the marker with the largest numbers it can show so the budget is never exceeded.
    budget = max(limit - len(marker(total, total, seq)), 2)
    head_len = budget // 2
    tail_len = budget - head_len
    if found:
        # Around existing markers one side may already be short; give its spare budget
        # to the other side.
        head_len = min(head_len, len(head))
        tail_len = min(budget - head_len, len(tail))
        head_len = min(budget - tail_len, len(head))
        head_cut = _head_end(head, head_len)
        tail_cut = _tail_start(tail, len(tail) - tail_len)
    else:
        head_cut = _head_end(text, head_len)
        tail_cut = _tail_start(text, len(text) - tail_len)
    new_head, new_tail = head[:head_cut], tail[tail_cut:]
    omitted = total - len(new_head) - len(new_tail)
    return new_head, marker(omitted, total, seq), new_tail


# What is stored of one result has a bound too (a tool that prints gigabytes must not fill
# the database). Past it the head and the tail are kept, with this marker between them:
# unlike the view's marker it cannot point to a fuller text, because none was kept.
_STORED_MARKER = (
    "\n\n[... {omitted} of {total} characters omitted from the middle when this result was stored: "
    "the platform keeps at most {limit} characters of one tool result ...]\n\n"
)


def cap_for_storage(content: str | list[dict[str, Any]], limit: int) -> str | list[dict[str, Any]]:
    """A tool result as it is stored: whole up to ``limit`` characters, else its head and
    its tail with a marker saying how much was left out (the error at the end of a long
    log is kept, CTX-7). Text blocks share the budget as in the view; images are left alone."""
    if isinstance(content, str):
        return _stored_cut(content, limit)
    return _cut_blocks(content, limit, _stored_parts, _stored_marks)


_STORED_MARKER_RE = re.compile(
    r"\n\n\[\.\.\. [\d,]+ of [\d,]+ characters omitted from the middle when this result was stored: "
    r"the platform keeps at most [\d,]+ characters of one tool result \.\.\.\]\n\n"
)


def _stored_marks(text: str) -> int:
    return sum(len(found.group()) for found in _STORED_MARKER_RE.finditer(text))


def _view_marks(text: str) -> int:
    return sum(len(found.group()) for found in _MARKER_RE.finditer(text))


def structured_for_storage(structured: dict[str, Any] | None,
                           limit: int) -> tuple[dict[str, Any] | None, dict[str, int] | None]:
    """A result's structured content as it is stored, and the note that replaces it.

    Under the same cap as the result's text (TOOL-4): kept whole while its JSON is at most
    ``limit`` characters; past that it is not stored at all, and the note
    ``{"characters": <its JSON's length>, "limit": limit}`` says so. Not cut: a cut object
    is no longer what the server's output schema promised, and a reader must be able to
    trust the structured content it finds. The text beside it (which servers fill with the
    same data) keeps its head and tail, as every long result does."""
    if structured is None:
        return None, None
    characters = len(json.dumps(structured, ensure_ascii=False))
    if characters <= limit:
        return structured, None
    return None, {"characters": characters, "limit": limit}


def _stored_cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else "".join(_stored_parts(text, limit))


def _stored_parts(text: str, limit: int) -> _Parts:
    total = len(text)
    # Sized with the largest numbers it can show, so the budget is never exceeded.
    budget = max(limit - len(_STORED_MARKER.format(omitted=f"{total:,}", total=f"{total:,}", limit=f"{limit:,}")), 2)
    head = text[:_head_end(text, budget // 2)]
    tail = text[_tail_start(text, total - (budget - budget // 2)):]
    return head, _STORED_MARKER.format(omitted=f"{total - len(head) - len(tail):,}", total=f"{total:,}",
                                       limit=f"{limit:,}"), tail


def _allocate(sizes: list[int], budget: int) -> list[int] | None:
    """Max-min fair split of ``budget``: small blocks stay whole, big ones share the rest;
    None when the big ones' fair share is under ``MIN_BLOCK_BUDGET`` (cut as a whole)."""
    shares = [0] * len(sizes)
    remaining = budget
    pending = sorted(range(len(sizes)), key=lambda i: sizes[i])
    while pending:
        fair = remaining // len(pending)
        i = pending[0]
        if sizes[i] <= fair:
            shares[i] = sizes[i]
            remaining -= sizes[i]
            pending.pop(0)
            continue
        if fair < MIN_BLOCK_BUDGET:
            return None
        for j in pending:
            shares[j] = fair
        break
    return shares


def _cut_blocks(content: list[dict[str, Any]], limit: int, parts: Callable[[str, int], _Parts],
                marked: Callable[[str], int]) -> list[dict[str, Any]]:
    """Text blocks over ``limit`` in all: each long block cut to its fair share, or, when
    the shares would be too small or the markers would take more than ``MARKER_SHARE`` of
    the bound, the blocks cut as one text. ``parts(text, bound)`` gives the head, marker
    and tail of a text cut to ``bound`` characters; ``marked(text)`` the characters of the
    markers a text already holds."""
    sizes = [len(p["text"]) if is_text_part(p) else 0 for p in content]
    if sum(sizes) <= limit:
        return content
    texts = [i for i, size in enumerate(sizes) if size]
    shares = _allocate([sizes[i] for i in texts], limit)
    if shares is None:
        return _cut_as_one(content, parts(_joined(content), limit))
    cuts = {i: parts(content[i]["text"], share) for i, share in zip(texts, shares) if sizes[i] > share}
    # Blocks that keep their share whole may hold an earlier cut's marker: it counts too.
    marks = sum(len(mark) for _, mark, _ in cuts.values()) + sum(
        marked(content[i]["text"]) for i in texts if i not in cuts)
    if marks > limit * MARKER_SHARE:
        return _cut_as_one(content, parts(_joined(content), limit))
    out = list(content)
    for i, cut in cuts.items():
        out[i] = {**content[i], "text": "".join(cut)}
    return out


def _joined(content: list[dict[str, Any]]) -> str:
    return "".join(p["text"] for p in content if is_text_part(p))


def _cut_as_one(content: list[dict[str, Any]], cut: _Parts) -> list[dict[str, Any]]:
    """Keep ``cut``, the head and the tail of the blocks' joined text, block by block:
    blocks inside the head or the tail stay as they are, the block where the middle begins
    carries the marker, blocks wholly inside the middle go. Other parts (images) keep
    their place."""
    head, mark, tail = cut
    head_end = len(head)
    tail_start = sum(len(p["text"]) for p in content if is_text_part(p)) - len(tail)
    out: list[dict[str, Any]] = []
    start, placed = 0, False
    for part in content:
        if not is_text_part(part):
            out.append(part)
            continue
        text = part["text"]
        end = start + len(text)
        if end <= head_end or start >= tail_start:
            out.append(part)  # wholly in the head or the tail
        else:
            pieces = [text[:max(0, head_end - start)]]
            if not placed:
                pieces.append(mark)
                placed = True
            pieces.append(text[max(0, tail_start - start):] if end > tail_start else "")
            if any(pieces):
                out.append({**part, "text": "".join(pieces)})
        start = end
    return out


def truncate_content(
    content: str | list[dict[str, Any]], limit: int = DEFAULT_TOOL_RESULT_LIMIT, seq: Any = None
) -> str | list[dict[str, Any]]:
    """Apply CTX-7 to a tool result's content (a string or a list of parts).

    The limit bounds the whole result. Text blocks share it max-min fairly and every block
    stays, in order, each long one with its own marker, while each can keep at least
    ``MIN_BLOCK_BUDGET`` characters and the markers take at most ``MARKER_SHARE`` of the
    limit; with more long blocks than that allows, the head of the first blocks and the
    tail of the last ones are kept with one marker between them. Cutting a cut result again
    keeps a single marker. Image parts are not text and are left to the screenshot rule
    (CTX-8).
    """
    if isinstance(content, str):
        return truncate_text(content, limit, seq)
    return _cut_blocks(content, limit, lambda text, bound: _view_parts(text, bound, seq), _view_marks)
