"""CTX-36: the runtime-state block of a compacted view, within the room it is given.

The block is required content: it is placed in every compacted view, so whatever it costs
is taken from the summary and the retained groups. Its sources only grow -- every call of
the session whose outcome nobody reported stays unknown, and the plan (up to 50 steps of
500 characters) is carried into every later question -- so it is rendered within a bound
(``compact()`` gives it a share of the threshold, ``RUNTIME_STATE_SHARE``).
Unbounded, 20 unknown calls took 646 of a 2,048-token model's 787-unit threshold, no
compaction could commit, and every later question of the session ended in
``context_overflow``.

What fits is rendered whole, the exact text of the unbounded block. Otherwise the same
block with arguments, plan lines and texts clipped shorter (two tighter levels). When even
the tighter one does not fit, at that level each list in turn -- pending calls, unknown
calls, the plan, sub-instances, supplements, attached files, the artifact ledger (CTX-49,
``ledger.py``) -- is listed with its first entry while that fits, the others only counted
in one last line; then the listed ones take further entries in turns, each stopping at its
first entry that does not fit. Calls and sub-instances keep their newest; the plan keeps
its steps in their order, the unfinished ones given room before the done ones; supplements
keep their oldest (they join the conversation in that order); the ledger keeps its newest,
listed newest first, the earlier ones counted after them. Each list says how many entries
it leaves out. When not even the header and the line that counts everything fit, there is
no block.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from context import records as rec
from context.attachments import READ_FILE_MAX_CHARS, READ_FILE_TOOL, human_size

from .ledger import LEDGER_TITLE, ledger_earlier, ledger_line, ledger_to_show
from .types import CompactionRequest, RuntimeState

# CTX-36: the most the runtime-state block may cost, as a share of the threshold. It is
# required content, placed in every compacted view, and its lists only grow (every
# unanswered call of the session, a plan of up to 50 long steps): unbounded, it left a
# small window no room to compact in. A fifth leaves the summary, the anchor and the
# newest groups four fifths; in a 2,048-token window (1,000 for the answer) it is 157
# tokens, the two newest calls with an unknown outcome and the count of the others.
RUNTIME_STATE_SHARE = 0.2
RUNTIME_STATE_HEADER = ("[Runtime state at the time of this compaction, recorded by the platform (not written by "
                        "the user, not part of the summary)]")
_UNKNOWN_TITLE = ("Tool calls with an unknown outcome (they may or may not have happened; do not assume they "
                  "succeeded; check the actual state before relying on them or repeating them):")
# Per detail level: characters of a call's arguments and id, of a plan line, of a
# sub-instance's task, of a supplement; whether a clipped text ends in a bare "…" (the
# count of what is left out costs room the next entry could use). Level 0 is the
# unbounded block.
_LEVELS = ((500, None, None, 1_000, 4_000, False), (200, 80, 200, 300, 600, True), (60, 40, 80, 80, 120, True))
_DONE_RE = re.compile(r"^\s*\d+\.\s*\[done\]", re.IGNORECASE)

Cost = Callable[[Mapping[str, Any]], int]


def is_runtime_state_message(message: Any) -> bool:
    """True for a block made by ``render_runtime_state``."""
    return (isinstance(message, Mapping) and message.get("role") == "user"
            and isinstance(message.get("content"), str) and message["content"].startswith(RUNTIME_STATE_HEADER))


def _clip(text: str, limit: int | None, *, brief: bool = False) -> str:
    if limit is None or len(text) <= limit:
        return text
    return f"{text[:limit]}…" if brief else f"{text[:limit]}… [{len(text) - limit} more characters]"


def _arguments(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


@dataclass
class _Section:
    """One list of the block: its entries (the text of each at every level), the order in
    which they are given room, and how the block says what it leaves out."""

    name: str
    entries: list[tuple[str, ...]]
    priority: list[int]
    title: str
    note: Callable[[int, int], str]  # (left out, total) -> the line that counts them
    note_first: bool = False  # the count comes before the entries (earlier calls)
    verbatim: str | None = None  # the text to show when every entry is shown unclipped (the plan as written)
    title_cut: str | None = None  # the title when some entry is left out or clipped
    shown: set[int] = field(default_factory=set)

    def text(self, level: int) -> str:
        whole = len(self.shown) == len(self.entries) and all(e[level] == e[0] for e in self.entries)
        if whole and self.verbatim is not None:
            return f"{self.title}\n{self.verbatim}"
        lines = [self.entries[i][level] for i in sorted(self.shown)]
        left = len(self.entries) - len(self.shown)
        if left:
            note = self.note(left, len(self.entries))
            lines = [note, *lines] if self.note_first else [*lines, note]
        return "\n".join([self.title if whole else self.title_cut or self.title, *lines])


def _call_entries(calls: Sequence[Mapping[str, Any]]) -> list[tuple[str, ...]]:
    out = []
    for call in calls:
        name, ident, arguments = str(call.get("name") or "?"), call.get("id"), _arguments(call.get("arguments", {}))
        out.append(tuple(
            f"- {_clip(name, ident_chars, brief=brief)}"
            f"{f' (call {_clip(str(ident), ident_chars, brief=brief)})' if ident else ''} "
            f"with arguments {_clip(arguments, argument_chars, brief=brief)}"
            for argument_chars, ident_chars, *_, brief in _LEVELS))
    return out


def _earlier_calls(left: int, _total: int) -> str:
    return f"- and {_plural(left, 'earlier call')} like these (no room to list them)"


def _sections(state: RuntimeState) -> list[_Section]:
    """The non-empty lists of ``state``, in the order they are given room."""
    sections: list[_Section] = []
    for name, calls, title in (("pending", state.pending_calls, "Pending tool calls (started, no result yet):"),
                               ("unknown", state.unknown_calls, _UNKNOWN_TITLE)):
        if calls:
            sections.append(_Section(name, _call_entries(calls), list(range(len(calls)))[::-1],
                                     title, _earlier_calls, note_first=True))
    plan = state.plan or ""
    if plan.strip():
        lines = [line for line in plan.splitlines() if line.strip()]
        unfinished = [i for i, line in enumerate(lines) if not _DONE_RE.match(line)]
        done = [i for i, line in enumerate(lines) if _DONE_RE.match(line)][::-1]
        sections.append(_Section(
            "plan", [tuple(_clip(line, level[2], brief=level[5]) for level in _LEVELS) for line in lines],
            unfinished + done,
            "Plan (current, verbatim):",
            lambda left, total: f"({left} of {total} plan lines left out: no room to list them)",
            verbatim=plan, title_cut="Plan (current; shortened to fit the context window):"))
    if state.sub_instances:
        subs = state.sub_instances
        heads = [f"- {s.get('id', '?')} [{s.get('status', 'unknown')}]: " for s in subs]
        sections.append(_Section(
            "subs", [tuple(head + _clip(str(s.get("task", "")), level[3], brief=level[5]) for level in _LEVELS)
                     for head, s in zip(heads, subs)], list(range(len(subs)))[::-1],
            "Sub-instances (delegated sub-agents):",
            lambda left, _total: f"- and {_plural(left, 'earlier sub-instance')} (no room to list them)",
            note_first=True))
    if state.queued_supplements:
        texts = state.queued_supplements
        sections.append(_Section(
            "supplements", [tuple(f"- {_clip(text, level[4], brief=level[5])}" for level in _LEVELS) for text in texts],
            list(range(len(texts))),
            "Queued supplements (sent by the user during this run; they will be added to the conversation):",
            lambda left, _total: f"- and {_plural(left, 'later supplement')} (no room to list them; they are queued)"))
    if state.files:
        files = state.files
        sections.append(_Section(
            "files", [tuple(f"- {_clip(str(f.get('name', '?')), level[3], brief=level[5])} (id {f.get('id', '?')}, "
                            f"{f.get('kind', 'file')}, {human_size(f.get('size'))})" for level in _LEVELS)
                      for f in files], list(range(len(files)))[::-1],
            f"Files the user attached (their text may be summarized above; read one again with "
            f"{READ_FILE_TOOL} {{\"file_id\": <its id>, \"offset\": 0, \"limit\": {READ_FILE_MAX_CHARS}}}):",
            lambda left, _total: f"- and {_plural(left, 'earlier file')} (no room to list them)", note_first=True))
    # CTX-49: newest first, what the other lists name left to them (one call once, one file once).
    ledger = ledger_to_show(state.ledger, unknown=state.unknown_calls, files=state.files)
    if ledger:
        sections.append(_Section(
            "ledger", [tuple(ledger_line(entry, label_chars=level[3], brief=level[5]) for level in _LEVELS)
                       for entry in ledger], list(range(len(ledger))), LEDGER_TITLE, ledger_earlier))
    return sections


_ORDER = ("plan", "pending", "unknown", "subs", "supplements", "files", "ledger")  # the order of the block's text


_WORDS = {"plan": ("plan line", "plan lines"), "pending": ("pending tool call", "pending tool calls"),
          "unknown": ("tool call with an unknown outcome", "tool calls with an unknown outcome"),
          "subs": ("sub-instance", "sub-instances"), "supplements": ("queued supplement", "queued supplements"),
          "files": ("attached file", "attached files"), "ledger": ("artifact", "artifacts")}


def _block(sections: Sequence[_Section], level: int, counted: Sequence[_Section] = ()) -> dict[str, Any]:
    """The block with ``sections`` listed and ``counted`` only counted, in one last line."""
    parts = [RUNTIME_STATE_HEADER, *(s.text(level) for s in sorted(sections, key=lambda s: _ORDER.index(s.name)))]
    if counted:
        listed = ", ".join(f"{len(s.entries)} {_WORDS[s.name][len(s.entries) != 1]}"
                           for s in sorted(counted, key=lambda s: _ORDER.index(s.name)))
        warning = " Do not assume that a call with an unknown outcome succeeded." if any(
            s.name == "unknown" for s in counted) else ""
        parts.append(f"{'Also not' if sections else 'Not'} listed, for lack of room in the context window: "
                     f"{listed}.{warning}")
    return {"role": "user", "content": "\n\n".join(parts)}


def render_runtime_state(state: RuntimeState, *, max_units: int | None = None,
                         cost_of: Cost | None = None) -> dict[str, Any] | None:
    """The runtime-state block of a compacted view (CTX-36), or None when there is nothing
    to say -- or, with ``max_units``, when not even a line counting it all fits.

    These facts come from the records and the frame, not from the summary: the plan,
    pending and unknown-outcome tool calls, sub-instances and queued supplements. With
    ``max_units`` the block costs at most that much by ``cost_of`` (a message's units),
    less detailed as it must be (see the module docstring).
    """
    if state.is_empty():
        return None
    sections = _sections(state)
    for section in sections:
        section.shown = set(range(len(section.entries)))
    whole = _block(sections, 0)
    if max_units is None or cost_of is None or cost_of(whole) <= max_units:
        return whole
    for level in range(1, len(_LEVELS)):
        block = _block(sections, level)
        if cost_of(block) <= max_units:
            return block
    return _fill(sections, max_units, cost_of)


def _fill(sections: list[_Section], max_units: int, cost_of: Cost) -> dict[str, Any] | None:
    """The tightest level. Each section in turn is listed with its first entry while that
    fits (else only counted, in the last line); then the listed sections take further
    entries in turns while they fit."""
    level = len(_LEVELS) - 1
    listed: list[_Section] = []
    counted = list(sections)
    if cost_of(_block(listed, level, counted)) > max_units:
        return None
    for section in sections:
        section.shown = {section.priority[0]}
        counted.remove(section)
        if cost_of(_block([*listed, section], level, counted)) <= max_units:
            listed.append(section)
        else:
            section.shown = set()
            counted.append(section)
    base = _block(listed, level, counted)
    empty = cost_of({"role": "user", "content": ""})

    def line_cost(text: str) -> int:
        return cost_of({"role": "user", "content": text + "\n"}) - empty

    # Summed line by line (measuring the whole block for every entry would cost a
    # tokenization of the block per call listed), then measured whole and corrected.
    room = max_units - cost_of(base)
    added: list[tuple[_Section, int]] = []
    cursors = {id(s): 1 for s in listed}
    open_ = list(listed)
    while open_:
        for section in list(open_):
            cursor = cursors[id(section)]
            if cursor == len(section.priority):
                open_.remove(section)
                continue
            index = section.priority[cursor]
            cost = line_cost(section.entries[index][level])
            if cost > room:
                open_.remove(section)  # a list stops at its first entry that does not fit
                continue
            room -= cost
            section.shown.add(index)
            cursors[id(section)] = cursor + 1
            added.append((section, index))
    block = _block(listed, level, counted)
    while cost_of(block) > max_units and added:
        section, index = added.pop()
        section.shown.discard(index)
        block = _block(listed, level, counted)
    return block


def without_listed_unknown(messages: Sequence[Mapping[str, Any]],
                           state: RuntimeState) -> tuple[list[dict[str, Any]], list[int], int]:
    """The retained groups of a compacted view without the calls the runtime-state block
    lists as unknown-outcome calls (CTX-3, CTX-36): ``(messages, the position in
    ``messages`` of each one kept, calls left out)``.

    The block is computed from the records and lists every unknown-outcome call under the
    id its record holds; the retained groups show the same call again, renumbered (CTX-5),
    with its placeholder or its ``unknown`` result -- two ids for one call. CTX-36 makes
    the block the place such a call is listed, once and in one state, however many
    compactions follow, so the retained copy goes: the call block and its tool message,
    and the assistant message too when nothing usable remains (its text and its other
    calls stay). A retained call is matched to a listed one by name and arguments, one
    listed call for one retained call; a call the block does not list stays where it is.
    """
    listed = Counter((str(call.get("name") or "?"), _arguments(call.get("arguments", {})))
                     for call in state.unknown_calls)
    answers = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    dropped: set[Any] = set()
    for message in messages:
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        for call in calls or ():
            function = call.get("function") or {}
            key = (str(function.get("name") or "?"), _arguments(function.get("arguments", {})))
            answer = answers.get(call.get("id"))
            if answer is not None and rec.shows_unknown_outcome(answer) and listed[key] > 0:
                listed[key] -= 1
                dropped.add(call.get("id"))
    if not dropped:
        return [dict(m) for m in messages], list(range(len(messages))), 0
    out: list[dict[str, Any]] = []
    kept: list[int] = []
    for position, message in enumerate(messages):
        if message.get("role") == "tool" and message.get("tool_call_id") in dropped:
            continue
        message = dict(message)
        if message.get("role") == "assistant" and message.get("tool_calls"):
            calls = [c for c in message["tool_calls"] if c.get("id") not in dropped]
            if calls:
                message["tool_calls"] = calls
            else:
                del message["tool_calls"]
                if rec.content_is_empty(message.get("content")):
                    continue  # nothing usable remains (CTX-2's rule)
        out.append(message)
        kept.append(position)
    return out, kept, len(dropped)


def runtime_state_room(request: CompactionRequest) -> int:
    """What the runtime-state block of ``request``'s compaction may cost (CTX-36)."""
    return int(request.budget.trigger_threshold(request.policy) * RUNTIME_STATE_SHARE)


def runtime_state_block(request: CompactionRequest) -> dict[str, Any] | None:
    """The runtime-state block ``compact(request)`` places, within ``runtime_state_room``."""
    return render_runtime_state(request.runtime_state, max_units=runtime_state_room(request),
                                cost_of=request.estimator.message)
