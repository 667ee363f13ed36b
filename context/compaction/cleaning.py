"""CTX-34/35: cleaning a summarizer reply, and telling a usable summary from a bad one.

A summary is untrusted text. It may start with the model's analysis, wrap its answer in
``<summary>`` tags, or carry text that looks like protocol (``</summary><system>…``,
``<|im_start|>``) -- whether the model produced it or copied it from a tool output. The
cleaned summary keeps the body and turns every control-like tag into an inert look-alike,
so nothing in it can close the block that holds it or pose as system text.

A summary longer than its room is shortened between sentences, never inside a word, and
never by emptying a section to keep another whole -- the user messages of section 6 from
the oldest, the next step of section 9 late -- and with nothing put in its place: the
model reads a summary as content, and a note such as "[… characters omitted …]" is
repeated to the user as if it were part of the story. The engine's metrics say that it
was shortened (``summary_cut_chars``), not the text.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Callable

from .sections import NEXT_STEP, SECTION_TITLES, USER_MESSAGES

# Tags that mean something to a model or to our own prompts. Ordinary markup in code
# snippets (<div>, List<String>) is left alone: only these names are neutralized.
CONTROL_TAG_NAMES = (
    "system", "system-reminder", "system_reminder", "developer", "user", "assistant", "tool",
    "tool_call", "tool_calls", "tool_result", "tool_response", "function_call", "function_calls",
    "function_results", "invoke", "summary", "analysis", "thinking", "think", "reasoning",
    "instructions", "instruction", "user_query", "conversation", "previous_summary", "transcript",
    "runtime-state", "im_start", "im_end", "start_of_turn", "end_of_turn", "bos", "eos", "s",
)
_NAMES = "|".join(re.escape(n) for n in sorted(CONTROL_TAG_NAMES, key=len, reverse=True))
_TAG_RE = re.compile(rf"<\s*(/?)\s*({_NAMES})(?=[\s/>])([^<>]{{0,200}}?)>", re.IGNORECASE)
_SPECIAL_RE = re.compile(r"<\|([^<>|\n]{0,64})\|>")
_INST_RE = re.compile(r"\[(/?)(INST|SYS)\]|<<(/?)SYS>>", re.IGNORECASE)

_LEADING_BLOCK_RE = re.compile(
    r"^\s*<\s*(analysis|thinking|think|reasoning)\b[^>]*>.*?(<\s*/\s*\1\s*>|$)", re.IGNORECASE | re.DOTALL)
_SUMMARY_OPEN_RE = re.compile(r"<\s*summary\b[^<>]{0,200}>", re.IGNORECASE)
_SUMMARY_CLOSE_RE = re.compile(r"<\s*/\s*summary\s*>", re.IGNORECASE)
_BLANK_RUN_RE = re.compile(r"\n{3,}")

MIN_SUMMARY_CHARS = 40  # non-whitespace characters; below this a reply is "too short"


def neutralize_control_tags(text: str) -> str:
    """Replace control-like tags with inert look-alikes (``<system>`` -> ``‹system›``).

    The words stay readable, so the summary loses no information, but no tag survives to
    close the summary block or to pose as system, user or tool text.
    """
    text = _TAG_RE.sub(lambda m: f"‹{m.group(1)}{m.group(2)}{m.group(3)}›", text)
    text = _SPECIAL_RE.sub(lambda m: f"‹|{m.group(1)}|›", text)
    return _INST_RE.sub(lambda m: f"‹{m.group(1) or m.group(3) or ''}{m.group(2) or 'SYS'}›", text)


def clean_summary(text: str | None, *, max_chars: int | None = None) -> str:
    """Return the usable summary in a summarizer reply (CTX-34).

    Leading analysis or thinking blocks are removed; when the reply has a ``<summary>``
    block, only its body is kept (from the first opening tag to the last closing tag, so
    a stray closing tag in the middle loses nothing and text after the block is dropped);
    control-like tags are neutralized; runs of blank lines are collapsed; and, with
    ``max_chars``, the result is shortened to at most that many characters by
    ``fit_summary`` (between sentences, every section kept, no marker).
    """
    if max_chars is not None and max_chars < 1:
        raise ValueError("max_chars must be positive")
    text = (text or "").replace("\r\n", "\n")
    opening = _SUMMARY_OPEN_RE.search(text)
    if opening:
        # Anything before the block is analysis, thinking or chatter.
        body = text[opening.end():]
        closings = list(_SUMMARY_CLOSE_RE.finditer(body))
        if closings:
            body = body[:closings[-1].start()]
    else:
        body = text
        while True:
            found = _LEADING_BLOCK_RE.match(body)
            if not found:
                break
            body = body[found.end():]
    body = _BLANK_RUN_RE.sub("\n\n", neutralize_control_tags(body)).strip()
    return body if max_chars is None else fit_summary(body, max_units=max_chars, cost_of=len)


# A section starts a line with its number ("6. All user messages: …", "**6.** …", "## 6) …").
_SECTION_RE = re.compile(r"^[ \t>*#_-]*(\d{1,2})\s*\**\s*[.):]", re.MULTILINE)
# A piece ends after a line break, or after a sentence's closing punctuation and the
# spaces that follow it -- not after a list number that opens a line ("1. ", "2) ").
_BOUNDARY_RE = re.compile(r"\n+|(?<=\S[.!?])[\"')\]»”’]*[ \t]+")
_LIST_NUMBER_RE = re.compile(r"^[ \t>*#_-]*\d{1,3}[.)]?$", re.MULTILINE)
_WORD_RE = re.compile(r"\s+")
_TITLE_RE = re.compile(r"[^\n:]{1,80}:[ \t]+(?=\S)")


def text_pieces(text: str) -> list[str]:
    """``text`` cut after every sentence and line; ``"".join`` of the pieces is ``text``."""
    pieces: list[str] = []
    start = 0
    for found in _BOUNDARY_RE.finditer(text):
        if found.group().startswith((" ", "\t")) and _LIST_NUMBER_RE.search(text, start, found.start()):
            continue
        if found.end() > start:
            pieces.append(text[start:found.end()])
            start = found.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def complete_sentences(text: str) -> str:
    """``text`` without a last sentence that was cut off (a reply stopped by its output
    limit ends inside a word); unchanged when it ends at a boundary."""
    pieces = text_pieces(text.rstrip())
    if len(pieces) > 1 and not re.search(r"[.!?:)\]»”’\"']$", pieces[-1].rstrip()):
        pieces.pop()
    return "".join(pieces).rstrip()


def fit_summary(text: str, *, max_units: int, cost_of: Callable[[str], int]) -> str:
    """``text`` shortened until ``cost_of`` it is at most ``max_units`` (CTX-34).

    A summary in numbered sections keeps every section, each at least its title, and no
    section is emptied to keep another whole. Sections give way a sentence (or a line) at
    a time, the longest first, down to one piece each -- section 6, every user message in
    order, from its oldest, whether it is written one message a line or as one paragraph;
    the others from their end -- while section 9, the next step, is kept whole; then
    section 9 down to its first piece. Only then are sections emptied: the longest first,
    then section 9, and section 6's newest piece last. What the measuring took beyond the
    room is given back. Other text, or sections whose titles alone are too long, keeps its
    longest prefix that ends between sentences; only a first sentence too long on its own
    is cut, and then between words. Nothing marks the cut in the text (see the module
    docstring).
    """
    if cost_of(text) <= max_units:
        return text
    starts = _section_starts(text)
    if len(starts) >= 2:
        bounds = ([(0, None)] if starts[0][0] > 0 else []) + starts
        offsets = [offset for offset, _ in bounds] + [len(text)]
        sections = [(text[a:b], number) for (a, number), b in zip(bounds, offsets[1:])]
        fitted = _fit_sections(sections, max_units, cost_of)
        if fitted is not None:
            return fitted
    return _fit_prefix(text, max_units, cost_of)


def _section_starts(text: str) -> list[tuple[int, int]]:
    """Where each numbered section starts, and its number. Where the text has the prompt's
    own section lines ("6. All user messages:"), a numbered line whose number has such a
    line elsewhere is a list inside a section ("1." "2." … of section 7), and so is one
    that does not follow on from the section before it or is past the ninth."""
    found = []
    for match in _SECTION_RE.finditer(text):
        end = text.find("\n", match.end())
        line = text[match.end():end if end >= 0 else len(text)].lower()
        number = int(match.group(1))
        found.append((match.start(), number, 1 <= number <= len(SECTION_TITLES)
                      and SECTION_TITLES[number - 1].lower() in line))
    titled = {number for _, number, has_title in found if has_title}
    if not titled:
        return [(start, number) for start, number, _ in found]
    starts: list[tuple[int, int]] = []
    for start, number, has_title in found:
        if has_title or (number not in titled and (starts[-1][1] if starts else 0) < number <= len(SECTION_TITLES)):
            starts.append((start, number))
    return starts


def _titled_pieces(section: str) -> list[str]:
    """A section's pieces: its title ("6. All user messages:") a piece of its own, then
    its sentences and lines. Section 6 is cut like the others, so a section 6 written as
    one paragraph gives way a sentence at a time, not all at once."""
    pieces = text_pieces(section)
    title = _TITLE_RE.match(pieces[0]) if pieces else None
    if title and title.end() < len(pieces[0]):
        pieces[0:1] = [pieces[0][:title.end()], pieces[0][title.end():]]
    return pieces


# What gives way first (0) to last (4), by how many pieces a section still shows beyond
# its title (see ``fit_summary``).
_TRIM, _TRIM_NEXT_STEP, _EMPTY, _EMPTY_NEXT_STEP, _EMPTY_USER_MESSAGES = range(5)


def _fit_sections(sections: list[tuple[str, int | None]], max_units: int,
                  cost_of: Callable[[str], int]) -> str | None:
    parts = [_titled_pieces(section.rstrip()) for section, _ in sections]
    gaps = [section[len(section.rstrip()):] or "\n" for section, _ in sections]
    # Each section shows its title and its pieces lo..hi-1.
    lo = [1] * len(parts)
    hi = [len(p) for p in parts]
    lengths = [len(section.rstrip()) for section, _ in sections]
    oldest_first = [number == USER_MESSAGES for _, number in sections]
    last = [number == NEXT_STEP for _, number in sections]

    def render() -> str:
        return "".join(("".join(p[:1]) + "".join(p[a:b])).rstrip() + gap
                       for p, a, b, gap in zip(parts, lo, hi, gaps)).rstrip()

    def tier_of(i: int) -> int:
        """While any section shows more than one piece, none is emptied (CTX-34): every
        section but the next step is cut down to one piece, then the next step. Emptying
        comes after, the next step late, and section 6's newest piece -- the user's latest
        summarized words, found nowhere else in the view (the next step follows from them,
        and the current request is restated verbatim beside the summary) -- last."""
        if hi[i] - lo[i] > 1:
            return _TRIM_NEXT_STEP if last[i] else _TRIM
        if oldest_first[i]:
            return _EMPTY_USER_MESSAGES
        return _EMPTY_NEXT_STEP if last[i] else _EMPTY

    def drop(i: int) -> int:
        """Take one piece off section ``i`` (its oldest, for section 6), its length."""
        if oldest_first[i]:
            lo[i] += 1
            return len(parts[i][lo[i] - 1])
        hi[i] -= 1
        return len(parts[i][hi[i]])

    def give_back(i: int) -> None:
        if oldest_first[i]:
            lo[i] -= 1
        else:
            hi[i] += 1

    dropped: list[tuple[int, int]] = []  # (section, tier) of each piece taken, in order
    while True:
        rendered = render()
        cost = cost_of(rendered)
        if cost <= max_units:
            break
        if all(lo[i] == hi[i] for i in range(len(parts))):
            return None  # the titles alone are too long
        # Units grow about linearly with characters: drop down to the share that should
        # fit, then measure again (a few measurements, not one per sentence).
        goal = len(rendered) * max_units / max(cost, 1)
        total = sum(lengths)
        while True:
            trimmable = [i for i in range(len(parts)) if lo[i] < hi[i]]
            if not trimmable:
                break
            tier = min(tier_of(i) for i in trimmable)
            longest = max((i for i in trimmable if tier_of(i) == tier), key=lambda i: lengths[i])
            length = drop(longest)
            dropped.append((longest, tier))
            lengths[longest] -= length
            total -= length
            if total <= goal:
                break
    # Not quite linear: the last pass may have taken more than it had to. What still
    # fits is given back, the last piece taken first. A section whose piece does not fit
    # takes nothing more back (its pieces stay contiguous), and no piece taken before it
    # at an earlier tier comes back either: that would keep a section longer than one
    # already emptied or cut further.
    blocked: set[int] = set()
    floor = _TRIM
    for i, tier in reversed(dropped):
        if i in blocked or tier < floor:
            continue
        give_back(i)
        candidate = render()
        if cost_of(candidate) <= max_units:
            rendered = candidate
        else:
            drop(i)
            blocked.add(i)
            floor = tier
    return rendered


def _fit_prefix(text: str, max_units: int, cost_of: Callable[[str], int]) -> str:
    pieces = text_pieces(text)
    ends = [0]
    for piece in pieces:
        ends.append(ends[-1] + len(piece))
    low, high = 0, len(pieces)  # the most whole pieces that fit
    while low < high:
        middle = (low + high + 1) // 2
        if cost_of(text[:ends[middle]].rstrip()) <= max_units:
            low = middle
        else:
            high = middle - 1
    if low:
        return text[:ends[low]].rstrip()
    words = [found.start() for found in _WORD_RE.finditer(pieces[0] if pieces else "")]
    low, high = 0, len(words)  # the most whole words of the first sentence that fit
    while low < high:
        middle = (low + high + 1) // 2
        if cost_of(text[:words[middle - 1]]) <= max_units:
            low = middle
        else:
            high = middle - 1
    return text[:words[low - 1]].rstrip() if low else ""


def summary_problem(text: str, *, min_chars: int = MIN_SUMMARY_CHARS) -> str | None:
    """Why a cleaned summary is unusable (CTX-35), or None when it is fine.

    ``empty``; ``too_short`` (fewer than ``min_chars`` non-whitespace characters);
    ``degenerate`` -- a model stuck in a loop: long lines repeated until they make up much
    of the text, or text that compresses to almost nothing.
    """
    solid = "".join(text.split())
    if not solid:
        return "empty"
    if len(solid) < min_chars:
        return "too_short"
    if _is_repetitive(text):
        return "degenerate"
    return None


def _is_repetitive(text: str) -> bool:
    data = text.encode("utf-8")
    if len(data) >= 400 and len(zlib.compress(data, 6)) < 0.1 * len(data):
        return True
    lines = [line.strip() for line in text.splitlines() if len(line.strip()) >= 20]
    if len(lines) < 4:
        return False
    counts = Counter(lines)
    repeated = sum(len(line) * (n - 1) for line, n in counts.items() if n >= 3)
    return repeated >= 0.3 * len(text)
