"""CTX-48: the summary written by code, when the summarizer's replies fail the check.

After the retries of CTX-35, a summary that still fails is not committed; the platform
writes one itself from what the records say (``CompactionRequest.history``, read by the
worker; without it, from the view's messages being summarized): the nine sections of
CTX-34, section 6 holding every real user message of the summarized range in order, the
tool calls with their statuses, the artifact ledger (CTX-49) when there is one, and the
opening of the last assistant answer. Its first section says it was written by the
platform from the records, not by a model; the metrics say ``summary_source: code``.

It fits the summary's room (``Sizing.body_units``) by one rule, in this order, each step
only when the one before is not enough:

1. the calls and ledger entries shown shrink to the newest ten (the rest counted), the
   last answer's opening to 200 characters;
2. every user message is shortened to the same number of characters, the most that fits
   (its head and its end kept, " … " between), down to 60;
3. the sections lose every sentence the records do not fill (terse form), the calls and
   ledger shrink to the newest three, the answer to 80 characters, and every user
   message goes down to 24 characters; then no call, ledger entry or answer is shown
   (counted), and every user message goes down to its first 9 characters;
4. only then are user messages left out: the oldest after the opening ones, counted in
   their place ("3 earlier messages not shown");
5. what is still over is shortened between sentences as a model's summary is
   (``fit_summary``).

A message is shortened before any is dropped: the first question (the goal) and a
standing instruction given early are worth more as a head than as nothing. The opening
messages (the first ``OPENING``) are where a session states its goal and the rules that
stand for all of it ("never touch vendor/", "always answer in French"): while the others
are shortened below ``OPENING_CHARS``, they keep that many characters, and they are never
the ones left out. The continuity benchmark (CTX-52) found the rule's need: a standing rule
planted in the second message lost its words to the uniform 60-character heads.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from context.records import COMMAND_HEADER, SUPPLEMENT_PREFIX, UNKNOWN_OUTCOME_TEXT, content_text
from context.traces import Trace, trace_json, trace_span

from .check import sections_of, shortened_problems
from .cleaning import fit_summary, neutralize_control_tags
from .finish import ViewFinish
from .sections import SECTION_TITLES, USER_MESSAGES
from .state import is_runtime_state_message
from .types import CompactionRequest, CompactionResult, HistoryFacts
from .view import continuation_summary, is_continuation_message, restates_anchor

# In the first section's title, which shortening never takes (CTX-34): the mark stays.
CODE_SUMMARY_MARK = "written by the platform from the records, not by a model"
_LATE_PREFIX = "[late tool result]"
_STATUS_RE = re.compile(r"^\[tool status: (\w+)\]\n")
_SPACE_RE = re.compile(r"\s+")
# A tool result's status, in the words of the artifact ledger (CTX-49).
OUTCOMES = {"ok": "done", "error": "failed", "timeout": "failed", "cancelled": "failed", "unknown": "unknown",
            "denied": "denied", "pending": "pending", "done": "done", "failed": "failed"}


OPENING = 3  # the session's opening user messages: the goal and its standing rules
OPENING_CHARS = 240  # what each keeps while the others are shortened further


@dataclass(frozen=True)
class _Shape:
    """How much of each part is shown (see the module docstring's rule)."""

    message_chars: int | None  # None: whole
    calls: int | None
    answer_chars: int
    dropped: int = 0  # the oldest messages after the opening ones left out
    terse: bool = False
    opening_chars: int = OPENING_CHARS  # 0 when even the fewest messages do not fit beside them


def _flat(text: str) -> str:
    return _SPACE_RE.sub(" ", neutralize_control_tags(text)).strip()


def shorten(text: str, limit: int | None, *, head_only: bool = False) -> str:
    """``text`` on one line, at most ``limit`` characters: its head and its end (its head
    alone with ``head_only``, or when under 30 characters: an end that short says nothing)."""
    flat = _flat(text)
    if limit is None or len(flat) <= limit:
        return flat
    if head_only or limit < 30:
        return flat[:max(1, limit - 1)].rstrip() + "…"
    tail = max(0, limit // 3 - 2)
    head = max(1, limit - tail - 3)
    return flat[:head].rstrip() + " … " + (flat[-tail:].lstrip() if tail else "")


def facts_from_view(messages: Sequence[Mapping[str, Any]]) -> HistoryFacts:
    """What a code-written summary can be made of when the worker gave no records: the
    user messages of an earlier summary's section 6 and of ``messages`` in order, the calls
    and their statuses, the last assistant answer (a restated task after an earlier
    summary is that summary's, a runtime-state block is code's own)."""
    users: list[str] = []
    calls: dict[str, dict[str, Any]] = {}
    answer: str | None = None
    previous: Mapping[str, Any] | None = None
    for message in messages:
        role = message.get("role")
        if is_runtime_state_message(message):
            pass
        elif is_continuation_message(message):
            earlier = sections_of(continuation_summary(message)).get(USER_MESSAGES, "")
            users.extend(line.strip().lstrip("-•* ").strip("“”\"") for line in earlier.splitlines()
                         if line.strip() and line.strip().lower() not in ("(none)", "none")
                         and not line.strip().endswith("not shown)"))
        elif role == "user" and not (previous is not None and restates_anchor(previous)):
            text = content_text(message.get("content"))
            if text.strip() and not text.startswith((_LATE_PREFIX, COMMAND_HEADER)):
                users.append(text)
        elif role == "assistant":
            text = content_text(message.get("content"))
            if text.strip():
                answer = text
            for call in message.get("tool_calls") or ():
                if not isinstance(call, Mapping):
                    continue
                found = call.get("function")
                function: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
                call_id = str(call.get("id", ""))
                calls[call_id] = {"id": call_id, "name": str(function.get("name") or "?"),
                                  "arguments": str(function.get("arguments") or ""), "status": "pending"}
        elif role == "tool":
            known = calls.get(str(message.get("tool_call_id", "")))
            if known is not None:
                body = content_text(message.get("content"))
                found = _STATUS_RE.match(body)
                status = found.group(1) if found else str(message.get("status") or "ok")
                known["status"] = "unknown" if body == UNKNOWN_OUTCOME_TEXT else OUTCOMES.get(status, status)
        previous = message
    return HistoryFacts(user_messages=tuple(users), calls=tuple(calls.values()), last_answer=answer)


def messages_in_range(history: HistoryFacts, retained: Sequence[Mapping[str, Any]]) -> list[str]:
    """The records' user messages the summary stands for: all of them but the newest ones
    the retained messages still hold verbatim (matched from the end, by text)."""
    users = list(history.user_messages)
    kept = [_flat(content_text(m.get("content")).removeprefix(SUPPLEMENT_PREFIX)) for m in retained
            if m.get("role") == "user"]
    flat = [_flat(u) for u in users]
    # The records may run past the view (a summary prepared of a snapshot): the range ends
    # before the newest retained message, wherever the records hold it.
    end = next((j + 1 for j in range(len(flat) - 1, -1, -1) if kept and flat[j] == kept[-1]), None)
    if end is None:
        return users  # nothing retained, or not found: too much rather than too little
    for text in reversed(kept):
        if end and flat[end - 1] == text:
            end -= 1
    return users[:end]


def _call_line(call: Mapping[str, Any]) -> str:
    status = OUTCOMES.get(str(call.get("status")), str(call.get("status") or "unknown"))
    return f"- {call.get('name') or '?'}({shorten(str(call.get('arguments') or ''), 80)}): {status}"


def _ledger_line(entry: Mapping[str, Any]) -> str:
    parts = [str(entry.get("kind") or "item"), shorten(str(entry.get("label") or ""), 120)]
    ref = entry.get("ref")
    outcome = entry.get("outcome")
    return (f"- {parts[0]}: {parts[1]}" + (f" (read back: {ref})" if ref else "")
            + (f", {OUTCOMES.get(str(outcome), outcome)}" if outcome else ""))


def _newest(lines: list[str], count: int | None, what: str) -> list[str]:
    if count is None or len(lines) <= count:
        return lines
    return [f"- ({len(lines) - count} earlier {what} not shown)", *lines[len(lines) - count:]] if count else [
        f"- ({len(lines)} {what} not shown)"]


def opening_count(users: Sequence[str]) -> int:
    """How many of ``users`` are the opening messages (never all: the latest is not one)."""
    return max(1, min(OPENING, len(users) - 1))


def render_code_summary(users: Sequence[str], calls: Sequence[Mapping[str, Any]], answer: str | None,
                        ledger: Sequence[Mapping[str, Any]], shape: _Shape) -> str:
    """The nine sections (CTX-34) from the records' facts, shown as ``shape`` says."""
    call_lines = [_call_line(c) for c in calls]
    failed = [line for line, c in zip(call_lines, calls) if OUTCOMES.get(str(c.get("status"))) == "failed"]
    open_ = [line for line, c in zip(call_lines, calls)
             if OUTCOMES.get(str(c.get("status")), "unknown") in ("unknown", "pending")]
    # ledger is newest first (CTX-49): shown newest first, the oldest left out
    ledger_lines = [_ledger_line(e) for e in ledger]
    if shape.calls is not None and len(ledger_lines) > shape.calls:
        ledger_lines = [*ledger_lines[:shape.calls], f"- ({len(ledger_lines) - shape.calls} older entries not shown)"]
    counts: dict[str, int] = {}
    for c in calls:
        status = OUTCOMES.get(str(c.get("status")), "unknown")
        counts[status] = counts.get(status, 0) + 1
    limit, opening = shape.message_chars, opening_count(users)
    user_lines = [f"- “{shorten(u, limit if limit is None or i >= opening else max(limit, shape.opening_chars))}”"
                  for i, u in enumerate(users)]
    if shape.dropped:  # the opening ones (the goal, the standing rules) stay; the oldest after them go
        gone = min(shape.dropped, len(users) - opening)
        user_lines[opening:opening + gone] = [f"- ({gone} earlier message{'s' if gone != 1 else ''} not shown)"]
    latest = shorten(users[-1], min(200 if not shape.terse else 40, shape.message_chars or 200)) if users else ""
    if shape.terse:  # a small room: no sentence that the records do not fill
        bodies = [[], [], ledger_lines, _newest(failed, shape.calls, "failed calls"),
                  [f"{len(calls)} tool calls: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))]
                  if calls else [], user_lines, _newest(open_, shape.calls, "calls"),
                  [f"Last answer: “{shorten(answer, shape.answer_chars)}”"] if answer and shape.answer_chars else [],
                  [f"Latest: “{latest}”"] if latest and shape.answer_chars else []]
    else:
        bodies = [
            ["The summarizer gave no summary that passed the check. The user's requests are their messages in "
             "section 6, quoted as written; the first states the goal, and instructions given there still stand."],
            ["(not recorded by code)"],
            ledger_lines or ["(none recorded)"],
            _newest(failed, shape.calls, "failed calls") or ["(no tool call failed)"],
            [(f"{len(calls)} tool call{'s' if len(calls) != 1 else ''}: "
              + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) + ".") if calls
             else "No tool was called.", *_newest(call_lines, shape.calls, "calls")],
            user_lines or ["(none)"],
            [*(["Calls whose outcome is not known (check before repeating one):",
                *_newest(open_, shape.calls, "calls")] if open_ else []),
             "Whatever the user's messages in section 6 asked for that the work has not done."],
            [f"The last answer began: “{shorten(answer, shape.answer_chars)}”" if answer else "(no answer recorded)"],
            [f"Continue from the user's latest message: “{latest}”" if latest else "Confirm with the user."],
        ]
    titles = [f"{SECTION_TITLES[0]} ({CODE_SUMMARY_MARK})", *SECTION_TITLES[1:]]
    return "\n".join(f"{n}. {title}:" + "".join(f"\n{line}" for line in body)
                     for n, (title, body) in enumerate(zip(titles, bodies), start=1))


def code_summary(request: CompactionRequest, *, summarized: Sequence[Mapping[str, Any]],
                 retained: Sequence[Mapping[str, Any]], max_units: int, cost_of: Callable[[str], int]) -> str:
    """The summary written by code for the messages ``summarized`` (the view's messages
    before the ``retained`` ones), at most ``max_units`` by ``cost_of`` where it can be
    (see the module docstring for the rule that shortens it)."""
    if request.history is not None:
        facts = request.history
        users = messages_in_range(facts, retained)
    else:
        facts = facts_from_view(summarized)
        users = list(facts.user_messages)
    calls, answer, ledger = list(facts.calls), facts.last_answer, list(request.runtime_state.ledger)

    def render(shape: _Shape) -> str:
        return render_code_summary(users, calls, answer, ledger, shape)

    def fits(shape: _Shape) -> bool:
        return cost_of(render(shape)) <= max_units

    whole = _Shape(message_chars=None, calls=None, answer_chars=400)
    if fits(whole):
        return render(whole)
    longest = max((len(_flat(u)) for u in users), default=0)
    for calls_shown, answer_chars, floor, terse in ((10, 200, 60, False), (3, 80, 24, True), (0, 0, 10, True)):
        shape = _Shape(message_chars=longest, calls=calls_shown, answer_chars=answer_chars, terse=terse)
        if fits(shape):
            return render(shape)
        low, high = floor, max(floor, longest - 1)  # the most characters per message that fit
        if fits(replace(shape, message_chars=floor)):
            while low < high:
                middle = (low + high + 1) // 2
                if fits(replace(shape, message_chars=middle)):
                    low = middle
                else:
                    high = middle - 1
            return render(replace(shape, message_chars=low))
    droppable = len(users) - opening_count(users)
    # The opening messages keep their words unless even then nothing fits beside them: then
    # they are shortened like the others rather than cut away whole by ``fit_summary``.
    for opening_chars in (OPENING_CHARS, 0):
        tight = _Shape(10, 0, 0, terse=True, opening_chars=opening_chars)
        low, high = 1, max(1, droppable)  # the fewest messages after the opening ones left out
        while low < high:
            middle = (low + high) // 2
            if fits(replace(tight, dropped=middle)):
                high = middle
            else:
                low = middle + 1
        text = render(replace(tight, dropped=low if droppable > 0 else 0))
        if cost_of(text) <= max_units:
            return text
    return fit_summary(text, max_units=max_units, cost_of=cost_of)


# CTX-48: why the summarizer gave no summary, when the code-written one replaces it.
FALLBACK_REASONS = frozenset({"summary_failed", "summary_call_limit", "too_many_segments",
                              "summarizer_budget_too_small", "segment_too_large"})
# The worker's code for a summary request over the hard limit, and the providers' own.
OVERFLOW_CODES = frozenset({"context_overflow", "context_length_exceeded"})
# What a prepared summary's metrics carry of its check (CTX-45 commits it later).
PREPARED_CHECK_METRICS = ("summary_check", "summary_source", "summary_fallback", "summary_failure")


def falls_back(reason: str, metrics: Mapping[str, Any]) -> bool:
    """Whether the summary written by code replaces a summary the summarizer could not give.

    Yes when its replies failed the check (CTX-35, CTX-48), when the summary request was
    too long for the provider (``context_overflow``), when the call limits stopped the
    retries or left no call at all (the code summary costs none), and when the history
    cannot be cut into summary calls (``too_many_segments``, …): the person would rather
    have a compaction than a run that stops. No when every attempt met a provider error
    (transient, or deterministic such as authentication) and no reply came at all: the
    next action call goes to the same provider and would meet the same error, so the
    compaction fails as before and CTX-44's throttle backs off. ``metrics`` says which
    (``summary_fallback`` then keeps the reason, ``summary_failure`` the last problem).
    """
    if reason not in FALLBACK_REASONS:
        return False
    unreachable = (metrics.get("summary_failure") in ("error", "deterministic_error")
                   and metrics.get("error_code") not in OVERFLOW_CODES and not metrics.get("summary_check"))
    return not unreachable


def summary_by_code(r: CompactionRequest, reason: str, metrics: dict[str, Any], finished: ViewFinish, *,
                    summarized: Sequence[Mapping[str, Any]], retained: Sequence[Mapping[str, Any]],
                    consumed: Trace, max_units: int, cost_of: Callable[[str], int]) -> CompactionResult:
    """The compaction with the code-written summary in place of the summarizer's (CTX-48):
    it stands for every record the summary would have (``consumed``), is checked as a
    shortened summary is (nine sections, CTX-35's problems; never committed when it fails,
    which a room too small for nine titles makes it do), and is marked in the metrics:
    ``summary_source`` ``code``, ``summary_fallback`` the reason the summarizer's was not
    used."""
    text = code_summary(r, summarized=summarized, retained=retained, max_units=max_units, cost_of=cost_of)
    metrics["summary_fallback"] = reason
    problems = shortened_problems(text, min_chars=1)
    if problems or cost_of(text) > max_units:
        metrics["summary_check"].append({"segment": None, "attempt": "code", "problems": problems or ["too_long"]})
        return CompactionResult("failed", reason, None, None, metrics)
    metrics["summary_source"] = "code"
    span = trace_span(consumed)
    metrics["segments"] = [{"index": 0, "consumed": list(span) if span else None, "ranges": trace_json(consumed),
                            "messages": metrics["summarized_messages"], "source": "code"}]
    return finished.result(text, metrics)
