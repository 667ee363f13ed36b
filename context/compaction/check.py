"""CTX-48: whether a summarizer's reply is a summary at all.

CTX-35 rejects what is empty, too short or repetitive; a reply can pass that and still be
no summary: the demo model's canned answer, a small model's list of sea animals, a copy
of the user's last message. :func:`summary_check` accepts a cleaned reply only when

* it carries the nine sections of CTX-34 (``missing_sections``). Titles are matched
  leniently, as models write them: any case, punctuation, numbering ("6.", "6)",
  "Section 6 —"), markdown (``## 6. All User Messages``, ``**Pending tasks:**``), in any
  order, and with small wording differences ("Primary request and intent", "Optional next
  step", "Files and code sections"): a line is a section's title when it carries at least
  half of the title's words (a word matches another it starts or ends, so "fix" matches
  "fixes"), or at least one of them beside the section's own number;
* it says something outside section 6 (``only_user_messages``): a reply that merely lists
  the user's messages carries nothing the records do not hold already;
* it is not a copy of one message of the history (``copy_of_message``): its text, all but
  spacing, is found inside a single message;
* the server did not cut it (``cut``, LOOP-3): a cut reply has lost its end, and which
  section lost what cannot be told; it is retried, never committed.

Pure: the engine (``summarize``) records each attempt's problems in the metrics
(``summary_check``) and commits nothing that fails.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from context.records import content_text

from .cleaning import MIN_SUMMARY_CHARS, summary_problem
from .sections import SECTION_TITLES, USER_MESSAGES
from .state import is_runtime_state_message
from .types import CompactionRequest
from .view import is_continuation_message

# Words a title is recognised without: they carry no meaning of their own.
_STOPWORDS = frozenset({"a", "an", "and", "the", "of", "to", "in", "for", "with", "on", "or", "all", "any",
                        "section", "part", "key", "optional", "latest", "most", "recent", "one"})
_WORD_RE = re.compile(r"[a-z0-9]+")
# The start of a line that may hold a title: quote marks, list bullets, markdown headings and
# emphasis, then an optional "Section"/"Part" and number, then the title up to a colon, a dash
# or the end of the line.
_LINE_RE = re.compile(
    r"^[\s>#*_`|\-•]*(?:(?:section|part)\s*)?(?:(\d{1,2})\s*[.):\-–—]*)?[\s*_`#]*(.{1,90}?)"
    r"\s*(?:[*_`]*\s*(:|\s[-–—]\s)|[*_`]*\s*$)", re.IGNORECASE)
# What an empty section says.
_EMPTY_WORDS = frozenset({"none", "n", "a", "na", "nothing", "not", "applicable", "yet", "no", "so", "far", "tbd",
                          "empty", "unknown"})
_SPACE_RE = re.compile(r"\s+")
_ASIDE_RE = re.compile(r"\([^()]*\)")
MIN_COPY_CHARS = 20  # a shorter reply is "too short" anyway; a copy is judged above this

_TITLE_WORDS = tuple(tuple(w for w in _WORD_RE.findall(t.lower()) if w not in _STOPWORDS) for t in SECTION_TITLES)


def _same_word(a: str, b: str) -> bool:
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    return len(short) >= 3 and (long_.startswith(short) or long_.endswith(short))


def title_number(line: str) -> int | None:
    """The section (1..9) whose title ``line`` is, or None (see the module docstring)."""
    found = _LINE_RE.match(line)
    if not found:
        return None
    number = int(found.group(1)) if found.group(1) else None
    if "?" in found.group(2):
        return None  # a question quoted in section 6, not a title
    title = _ASIDE_RE.sub(" ", found.group(2))  # "Current work (as of the last step)"
    words = [w for w in _WORD_RE.findall(title.lower()) if w not in _STOPWORDS]
    if not words or len(words) > 8:
        return None
    # Without a number, a heading mark or a closing colon, only a short line is a title.
    marked = number is not None or found.group(3) is not None or line.lstrip().startswith(("#", "**", "__"))
    best, best_score = None, 0.0
    for index, keys in enumerate(_TITLE_WORDS, start=1):
        matched = sum(1 for t in keys if any(_same_word(t, w) for w in words))
        if not matched:
            continue
        # A candidate that matched barely and has many words of its own is prose, not a title.
        score = matched / len(keys) - 0.05 * max(0, len(words) - len(keys) - 1)
        if not marked and len(words) > len(keys) + 1:
            continue
        if score >= 0.5 or (number == index and matched):
            score += 1.0 if number == index else 0.0
            if score > best_score:
                best, best_score = index, score
    return best


def sections_of(text: str) -> dict[int, str]:
    """The sections a summary holds, by number: each one's text after its title, up to
    the next title (the first occurrence of a title counts)."""
    found: dict[int, str] = {}
    current: int | None = None
    body: list[str] = []
    for line in text.splitlines():
        number = title_number(line)
        if number is not None and number not in found and number != current:
            if current is not None:
                found[current] = "\n".join(body)
            current, body = number, [_after_title(line)]
            continue
        if current is not None:
            body.append(line)
    if current is not None:
        found[current] = "\n".join(body)
    return found


def _after_title(line: str) -> str:
    found = _LINE_RE.match(line)
    return line[found.end():] if found else ""


def _says_something(text: str) -> bool:
    words = [w for w in _WORD_RE.findall(text.lower()) if w not in _EMPTY_WORDS]
    return sum(len(w) for w in words) >= 3


def _flat(text: str) -> str:
    return _SPACE_RE.sub(" ", text).strip().lower()


def summary_check(text: str, *, truncated: bool = False, history: Iterable[str] = (),
                  min_chars: int = MIN_SUMMARY_CHARS) -> list[str]:
    """The problems of a cleaned summary (CTX-35, CTX-48); an empty list accepts it.

    Problems, as stable slugs: those of :func:`summary_problem` (``empty``, ``too_short``,
    ``degenerate``), then ``cut`` (``truncated``: the server stopped the reply),
    ``missing_sections`` (fewer than the nine of CTX-34), ``only_user_messages`` (nothing
    outside section 6) and ``copy_of_message`` (``history``: the texts of the messages
    being summarized; the reply is found inside one of them)."""
    problems: list[str] = []
    if truncated:
        problems.append("cut")
    basic = summary_problem(text, min_chars=min_chars)
    if basic is not None:
        return [basic, *problems]
    sections = sections_of(text)
    if len(sections) < len(SECTION_TITLES):
        problems.append("missing_sections")
    if sections and not any(_says_something(body) for number, body in sections.items() if number != USER_MESSAGES):
        problems.append("only_user_messages")
    flat = _flat(text)
    if len(flat) >= MIN_COPY_CHARS and any(flat in _flat(message) for message in history):
        problems.append("copy_of_message")
    return problems


def shortened_problems(text: str, *, min_chars: int = MIN_SUMMARY_CHARS) -> list[str]:
    """The problems of a summary the platform shortened (CTX-34's fitting) or wrote itself
    (CTX-48's code summary): CTX-35's, and ``missing_sections``. What a section says was
    judged on the summarizer's reply before it was shortened: fitting a small room empties
    sections by design (never section 6 first), and is not the summarizer's fault."""
    basic = summary_problem(text, min_chars=min_chars)
    if basic is not None:
        return [basic]
    return ["missing_sections"] if len(sections_of(text)) < len(SECTION_TITLES) else []


def history_texts(r: CompactionRequest) -> list[str]:
    """The texts a summary must not be a copy of (CTX-48): every message of the view but
    an earlier summary and the runtime-state block (a summary may carry those forward),
    and the records' user messages and last answer."""
    texts = [content_text(m.get("content")) for m in r.messages
             if not is_continuation_message(m) and not is_runtime_state_message(m)]
    if r.history is not None:
        texts.extend(r.history.user_messages)
        if r.history.last_answer:
            texts.append(r.history.last_answer)
    return [text for text in texts if text]
