"""CTX-34/35: cleaning a summarizer reply, and telling a usable summary from a bad one.

A summary is untrusted text. It may start with the model's analysis, wrap its answer in
``<summary>`` tags, or carry text that looks like protocol (``</summary><system>…``,
``<|im_start|>``) -- whether the model produced it or copied it from a tool output. The
cleaned summary keeps the body and turns every control-like tag into an inert look-alike,
so nothing in it can close the block that holds it or pose as system text.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter

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

SUMMARY_CUT_MARKER = ("\n\n[... summary shortened to fit the context budget: {omitted} of {total} characters "
                      "omitted from the middle ...]\n\n")

MIN_SUMMARY_CHARS = 40  # non-whitespace characters; below this a reply is "too short"


def neutralize_control_tags(text: str) -> str:
    """Replace control-like tags with inert look-alikes (``<system>`` -> ``‹system›``).

    The words stay readable, so the summary loses no information, but no tag survives to
    close the summary block or to pose as system, user or tool text.
    """
    text = _TAG_RE.sub(lambda m: f"‹{m.group(1)}{m.group(2)}{m.group(3)}›", text)
    text = _SPECIAL_RE.sub(lambda m: f"‹|{m.group(1)}|›", text)
    return _INST_RE.sub(lambda m: f"‹{m.group(1) or m.group(3) or ''}{m.group(2) or 'SYS'}›", text)


def cut_middle(text: str, max_chars: int) -> str:
    """Keep the head and the tail of ``text`` within ``max_chars``, with one marker.

    The head carries the requests and the tail the pending work and the next step, which
    matter most to whoever continues.
    """
    if len(text) <= max_chars:
        return text
    total = len(text)
    room = max(max_chars - len(SUMMARY_CUT_MARKER.format(omitted=total, total=total)), 2)
    head = room // 2
    tail = room - head
    return text[:head] + SUMMARY_CUT_MARKER.format(omitted=total - head - tail, total=total) + text[total - tail:]


def clean_summary(text: str | None, *, max_chars: int) -> str:
    """Return the usable summary in a summarizer reply (CTX-34).

    Leading analysis or thinking blocks are removed; when the reply has a ``<summary>``
    block, only its body is kept (from the first opening tag to the last closing tag, so
    a stray closing tag in the middle loses nothing and text after the block is dropped);
    control-like tags are neutralized; runs of blank lines are collapsed; and the result
    is cut to ``max_chars`` (head and tail, with a marker) when longer.
    """
    if max_chars < 1:
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
    return cut_middle(body, max_chars)


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
