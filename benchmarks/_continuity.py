"""Pure parts of the continuity benchmark (CTX-52): sessions with planted facts, the three
summarizers, and whether a fact is still in a request.

A *fact* is a short, unmistakable phrase planted in one record of a session (its marker,
e.g. ``cobalt-heron-3`` -- words no transcript holds); it is *present* in a request when
its marker appears in the text of any message of that request, tool-call arguments
included, whatever carried it there (the summary, a pin, the runtime-state block, a
masked result's reference note, a retained message). Nothing here imports Django.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

KINDS = ("goal", "instruction", "artifact", "decision", "open_task", "subagent", "unknown_call", "pin")
# Rows of the table: the kinds, and the sub-agent's result counted by its text alone.
ROWS = (*KINDS, "subagent (its text)")
# The kinds SPEC §5a says code carries whatever the summarizer writes (the 100% goal).
CARRIED_BY_CODE = ("goal", "instruction", "pin", "artifact", "unknown_call", "subagent")

TOOLS = [{"type": "function", "function": {"name": name, "description": text, "parameters": {
    "type": "object", "properties": {arg: {"type": "string"} for arg in args}}}}
    for name, text, args in (
        ("run", "Run a shell command in the workspace.", ("cmd",)),
        ("read_file", "Read a file of the workspace or an attached file.", ("path",)),
        ("http_fetch", "Fetch a URL.", ("url", "method")),
        ("delegate", "Hand a task to a sub-agent and wait for its result.", ("task",)),
        ("read_record", "Read a record of this session back whole.", ("record_id",)),
    )]


@dataclass(frozen=True)
class Fact:
    kind: str
    marker: str
    seq: int  # the record it was planted in
    # Planted in a tool result: a ``read_record`` reference to its record in the request
    # (a masked result's note, the ledger's entry) reads it back whole, so it counts.
    readable: bool = False


@dataclass
class Session:
    """One benchmark session: SPEC §3 records with planted facts."""

    source: str
    name: str
    system: str
    records: list[dict[str, Any]] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    pinned: set[int] = field(default_factory=set)  # seqs pinned (the goal by default, CTX-50)
    run: int = 0

    def add(self, kind: str, message: dict[str, Any]) -> dict[str, Any]:
        if kind == "user":
            self.run += 1
        record = {"seq": len(self.records) + 1, "run": f"r{self.run}", "instance": "main", "kind": kind,
                  "message": message}
        self.records.append(record)
        return record

    def plant(self, kind: str, marker: str, record: Mapping[str, Any]) -> None:
        self.facts.append(Fact(kind, marker, int(record["seq"]), readable=record["kind"] == "tool_result"))


def _call(session: Session, text: str | None, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str]:
    call_id = f"call_{len(session.records) + 1}"
    record = session.add("assistant", {"role": "assistant", "content": text, "partial": False, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]})
    return record, call_id


def _result(session: Session, call_id: str, name: str, body: str, status: str = "ok") -> dict[str, Any]:
    return session.add("tool_result", {"role": "tool", "tool_call_id": call_id, "name": name, "content": body,
                                       "status": status})


def _filler(length: int, topic: str) -> str:
    return "\n".join(f"{topic} line {i}: value {i * 37 % 1000}, checked against the expected figure, unchanged."
                     for i in range(length))


def markers(number: int) -> dict[str, str]:
    """The markers of one session's facts (distinct per session, never in a transcript)."""
    words = {"goal": "cobalt-heron", "instruction": "amber-lynx", "artifact": "quartz-otter",
             "decision": "violet-ibex", "open_task": "saffron-gecko", "subagent": "jade-marmot",
             "unknown_call": "copper-wren", "pin": "indigo-tapir"}
    return {kind: f"{word}-{number}" for kind, word in words.items()}


def open_session(source: str, name: str, system: str, number: int) -> Session:
    """A session whose first records plant every kind of fact (before the transcript's own
    records): the goal (the first question, pinned by default), a standing instruction, an
    artifact (a file read and a URL fetched), a decision, an open task, a sub-agent's result,
    a call whose outcome is unknown (its run ended without a result), and a pinned message."""
    m = markers(number)
    s = Session(source, name, system[:6_000])
    goal = s.add("user", {"role": "user", "content": (
        "Please take the billing export from the old reporting job and make it run on the new scheduler, "
        f"keeping the monthly totals identical. Call the project {m['goal']} in every commit message.")})
    s.plant("goal", m["goal"], goal)
    s.pinned.add(int(goal["seq"]))
    record, call = _call(s, "I will read the scheduler's guide first.", "http_fetch",
                         {"url": f"https://docs.example.org/{m['artifact']}/scheduler-guide.html"})
    s.plant("artifact", m["artifact"], record)
    _result(s, call, "http_fetch", "Scheduler guide\n" + _filler(40, "guide"))
    s.add("assistant", {"role": "assistant", "content": (
        "The export reads the ledger table month by month. After weighing a rewrite against a wrapper, "
        f"Decision: we keep the old SQL and wrap it in a scheduler task, recorded as {m['decision']}. "
        "I will now check how the scheduler starts jobs."), "partial": False})
    s.plant("decision", m["decision"], s.records[-1])
    instruction = s.add("user", {"role": "user", "content": (
        f"One standing rule for the whole session ({m['instruction']}): never change files under vendor/, "
        "and run the tests before every commit.")})
    s.plant("instruction", m["instruction"], instruction)
    record, call = _call(s, "Asking a sub-agent to survey the scheduler.", "delegate",
                         {"task": "Find how the new scheduler registers periodic jobs."})
    result = _result(s, call, "delegate", (
        f"Sub-agent result: periodic jobs are registered in scheduler/registry.py with the tag {m['subagent']}; "
        "each needs an idempotency key.\n" + _filler(20, "survey")))
    s.plant("subagent", m["subagent"], result)
    record, call = _call(s, "Notifying the data team that the export will move.", "http_fetch",
                         {"url": f"https://hooks.example.org/notify/{m['unknown_call']}", "method": "POST"})
    s.plant("unknown_call", m["unknown_call"], record)  # no result: the worker stopped during the call
    task = s.add("user", {"role": "user", "content": (
        "Once the move works, also add a backfill command for the last twelve months; that is for later, "
        f"keep it on your list as {m['open_task']}.")})
    s.plant("open_task", m["open_task"], task)
    pin = s.add("user", {"role": "user", "content": (
        f"Keep this in view: the monthly totals must match finance's sheet to the cent, reference {m['pin']}.")})
    s.plant("pin", m["pin"], pin)
    s.pinned.add(int(pin["seq"]))
    s.add("assistant", {"role": "assistant", "content": "Understood; I will keep that in view.", "partial": False})
    return s


def extend(session: Session, records: Iterable[Mapping[str, Any]]) -> None:
    """Append a transcript's records, renumbered, each real user turn a new run."""
    for record in records:
        session.add(str(record["kind"]), json.loads(json.dumps(record["message"])))


def generated_steps(session: Session, steps: int, *, output_lines: int = 45, every: int = 12) -> None:
    """A tool-heavy stretch: each step a shell call and its long output, a new question every ``every``."""
    for step in range(steps):
        if step % every == 0:
            session.add("user", {"role": "user", "content": f"Next: check part {step // every + 1} of the move."})
        _, call = _call(session, f"Step {step}: running the tests of part {step // every + 1}.", "run",
                        {"cmd": f"pytest tests/billing -k part{step} -q"})
        _result(session, call, "run", _filler(output_lines, f"test output {step}"))


# --- presence -----------------------------------------------------------------------------------


_REFERENCE = re.compile(r'read_record \{"seq": (\d+)\}')


def request_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """Everything a model reads of ``messages``: their texts and their calls' names and arguments."""
    parts: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [str(p.get("text", "")) for p in content if isinstance(p, Mapping)]
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            parts.append(f"{function.get('name', '')} {function.get('arguments', '')}")
    return "\n".join(parts)


def present(facts: Iterable[Fact], messages: Sequence[Mapping[str, Any]]) -> dict[Fact, str]:
    """How each fact is in the request: ``text`` (its marker), ``reference`` (only a
    ``read_record`` reference to the result it was planted in), or ``""`` (lost)."""
    text = request_text(messages)
    lowered = text.lower()
    referenced = {int(n) for n in _REFERENCE.findall(text)}
    return {fact: "text" if fact.marker.lower() in lowered else
            "reference" if fact.readable and fact.seq in referenced else "" for fact in facts}


def tally(found: Mapping[Fact, str]) -> dict[str, tuple[int, int]]:
    """Per kind (kept, of); a readable kind also as ``<kind> (its text)``, the text alone."""
    kinds: dict[str, tuple[int, int]] = {}
    for fact, how in found.items():
        keys = [(fact.kind, bool(how))] + ([(f"{fact.kind} (its text)", how == "text")] if fact.readable else [])
        for key, kept in keys:
            k, n = kinds.get(key, (0, 0))
            kinds[key] = (k + kept, n + 1)
    return kinds


# --- the three summarizers ----------------------------------------------------------------------

_ENTRY = re.compile(r"\n+(?=\[(?:user|assistant|tool result|earlier summary|late tool result|user command|system)\])")
_MAX = re.compile(r"at most ([\d,]+) characters")
_NOTE = re.compile(r'\[tool result\] ([\w.-]+)\(.*?\): status \w+, .*? Begins: "(.*)"$', re.S)
_PATH = re.compile(r"(?:https?://[^\s\"')\\]+|\b[\w.-]+(?:/[\w.-]+)+\.\w+)")


def prompt_text(messages: Sequence[Mapping[str, Any]], *, cached: bool) -> str:
    """What a summarizer reads of a summary request, in the transcript form's shape: the
    request's instruction and its ``<conversation>`` of notes (CTX-33). A request of the
    cached form (CTX-46) is the action request and then the instruction: its messages are
    rendered as the notes a transcript-form request would carry."""
    from context.compaction import summarizer_input

    if not cached:
        return str(messages[-1].get("content") or "")
    notes = "\n\n".join(summarizer_input(list(messages[1:-1])))
    return f"{messages[-1].get('content')}\n\n<conversation>\n{notes}\n</conversation>"


def _block(text: str, name: str) -> str | None:
    found = re.search(rf"<{name}>\n(.*?)\n</{name}>", text, re.S)
    return found.group(1) if found else None


def _previous_items(summary: str | None) -> dict[int, list[str]]:
    items: dict[int, list[str]] = {n: [] for n in range(1, 10)}
    current = 0
    for line in (summary or "").splitlines():
        head = re.match(r"^(\d)\. ", line)
        if head:
            current = int(head.group(1))
        elif line.startswith("- ") and current:
            items[current].append(line[2:])
    return items


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


def faithful(prompt: str) -> str:
    """A summarizer that does what it is asked with what it is given: nine sections, the
    earlier summary carried forward, every user message, the paths and URLs it saw, the
    decisions and the results' openings it read, within the length asked for (the oldest
    entries of the longest section go first when it must shorten)."""
    from context.compaction import SECTION_TITLES

    limit = int(_MAX.search(prompt).group(1).replace(",", "")) if _MAX.search(prompt) else 8_000
    items = _previous_items(_block(prompt, "previous_summary"))
    entries = _ENTRY.split(_block(prompt, "conversation") or "")
    users = [e[len("[user] "):] for e in entries if e.startswith("[user] ")]
    calls: dict[str, int] = {}
    results: dict[str, str] = {}
    for entry in entries:
        if entry.startswith("[earlier summary]"):
            for n, found in _previous_items(entry).items():
                items[n] += found
        items[3] += _PATH.findall(entry)
        if entry.startswith("[tool result]"):
            note = _NOTE.match(entry)
            if "outcome unknown" in entry:
                items[5].append("Outcome unknown: " + _clip(entry[len("[tool result] "):], 160))
            elif note:  # a tool's repeated results as one entry: how often, and the latest
                name = note.group(1)
                calls[name] = calls.get(name, 0) + 1
                results[name] = _clip(note.group(2), 160)
            if "status error" in entry:
                items[4].append(_clip(entry, 160))
        elif entry.startswith("[assistant] "):
            items[5] += [_clip(s, 200) for s in re.split(r"(?<=\.)\s", entry) if re.search(r"decid|decision", s, re.I)]
    for name, latest in results.items():
        times = f" ({calls[name]} calls, the latest)" if calls[name] > 1 else ""
        items[5].append(f"{name} returned{times}: {latest}")
    if users and not items[1]:
        items[1].append(_clip(users[0], 300))
    items[6] += [_clip(u, 240) for u in users]
    items[7] += [_clip(u, 240) for u in users if re.search(r"\b(also|later|todo|remaining|still)\b", u, re.I)]
    last = [e for e in entries if e.startswith("[assistant] ")]
    items[8] = [_clip(last[-1][len("[assistant] "):], 200)] if last else items[8][-1:]
    items[9] = [f'Continue with: "{_clip(users[-1], 150)}"'] if users else items[9][-1:]
    for n in items:
        items[n] = list(dict.fromkeys(items[n]))  # carried forward once

    def render() -> str:
        return "\n".join(f"{n}. {title}:\n" + ("\n".join(f"- {i}" for i in items[n]) or "(none)")
                         for n, title in enumerate(SECTION_TITLES, start=1))

    text = render()
    while len(text) > limit - 30 and _drop_one(items):
        text = render()
    if len(text) > limit:  # one entry per section and still too long: shorter entries
        for n in items:
            items[n] = [_clip(i, max(40, limit // 12)) for i in items[n]]
        text = render()
    return f"<summary>\n{text}\n</summary>"


def _is_result(item: str) -> bool:
    return " returned" in item.split(":", 1)[0]


# What a careful writer leaves out first when the summary must be shorter: the tools'
# routine output, then paths, errors, the older user messages (never the first, the goal),
# pending tasks, and only then decisions and findings.
_DROP_ORDER = ((5, _is_result), (3, None), (4, None), (6, "after-first"), (7, None), (5, None), (8, None))


def _drop_one(items: dict[int, list[str]]) -> bool:
    """Leave out the oldest entry of the first kind ``_DROP_ORDER`` names; False when
    nothing is left to drop."""
    for section, which in _DROP_ORDER:
        entries = items[section]
        if which == "after-first":
            if len(entries) > 1:
                entries.pop(1)
                return True
            continue
        for index, entry in enumerate(entries):
            if which is None or which(entry):
                entries.pop(index)
                return True
    return False


def terse(prompt: str) -> str:
    """Nine short sections: the shape is right, the detail is gone."""
    from context.compaction import SECTION_TITLES

    entries = _ENTRY.split(_block(prompt, "conversation") or "")
    users = [e[len("[user] "):] for e in entries if e.startswith("[user] ")]
    first = _clip(users[0], 60) if users else "work continues"
    lines = {1: f"The user wants: {first}", 5: "Work is progressing; several steps were done.",
             6: f"{len(users)} user message(s) in this part.", 8: "Continuing the current task.",
             9: "Carry on with the task."}
    body = "\n".join(f"{n}. {t}: {lines.get(n, '(none)')}" for n, t in enumerate(SECTION_TITLES, start=1))
    return f"<summary>\n{body}\n</summary>"


SEA = ("The Blue Whale", "The Shrimp", "The Octopus", "The Sea Turtle", "The Jellyfish", "The Clownfish",
       "The Manta Ray", "The Seahorse", "The Starfish")


def junk(prompt: str) -> str:
    """A reply that ignores the instruction (what a small model wrote in issue #47)."""
    return "Here are some sea animals:\n" + "\n".join(
        f"{n}. {name}: a fascinating creature of the ocean, found in many seas around the world."
        for n, name in enumerate(SEA, start=1))


SUMMARIZERS = {"faithful": faithful, "terse": terse, "junk": junk}
