"""CTX-49: the artifact ledger -- what the agent touched, computed by code from the records.

After a compaction the summary is whatever the summarizer wrote; which files, URLs and
resources the agent touched, what it read back and which calls with side effects ran and
how they ended must not depend on it. ``artifact_ledger(records)`` reads them from the
records of the instance's visible history (never from a view, so nothing a compaction
summarized away is lost), newest first, one entry per artifact and per call::

    {"kind", "label", "ref", "outcome", "seq", "call"}

- ``kind``: ``file`` (attached by the person, or read back with ``read_file``), ``url``
  (fetched with ``http_fetch``), ``resource`` (a tool server's resource link or embedded
  resource, TOOL-4), ``record`` (read back with ``read_record``), ``call`` (a call with side
  effects).
- ``label``: one line naming it for the model (no newline).
- ``ref``: the call that reads it back -- ``read_record {"seq": N}`` for a result record,
  ``read_file {"file_id": N}`` for a file -- or None when nothing holds it (a call whose
  outcome nobody reported has no result record).
- ``outcome``: ``done`` / ``failed`` / ``unknown`` / ``denied`` for what the agent did (the
  outcome of the newest call that touched it), ``attached`` for a file the person attached
  that the agent has not read back.
- ``seq``: the newest record of the entry (the order: newest first); ``call``: for an entry
  made by a call, ``{"id", "name", "arguments"}`` as ``tool_call_states`` describes it (the
  id the records hold), so the runtime-state block can leave out what another of its lists
  already names.

Which calls have side effects: every call of a tool not named in ``idempotent`` -- the
worker names the tools the registry and the agent's version declare idempotent
(``Tool.idempotent``; a server tool is idempotent when its annotations say
``readOnlyHint`` or ``idempotentHint``, or the admin said so). A tool the run no longer
knows counts as having side effects: the safe side. Outcomes of a side-effect call: ``ok``
is done; ``error`` failed; ``unknown``, an unanswered call of an ended run (CTX-3), a
``timeout`` (the tool may still have acted) and a ``cancelled`` call that had started are
unknown; a call the person's Stop kept from starting (LOOP-7, ``NOT_STARTED_TEXT``) is
denied -- it never ran. Calls still pending in the open run and calls of a cut stream
(CTX-6, never executed) are not listed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from context import records as rec
from context.attachments import READ_FILE_TOOL, session_files
from context.output_pass import ITEM_ASSISTANT, ITEM_RESULT
from context.pairing import Call, Result, call_outcome, pair
from context.reader import Reader, gc_paused
from context.truncation import DEFAULT_TOOL_RESULT_LIMIT

READ_RECORD_TOOL = "read_record"
HTTP_FETCH_TOOL = "http_fetch"
KINDS = ("file", "url", "resource", "record", "call")
OUTCOMES = ("done", "failed", "unknown", "denied", "attached")
# LOOP-7: the result a call gets when the person stopped the run before it started.
NOT_STARTED_TEXT = rec.NOT_STARTED_TEXT
# Tools whose results are text from elsewhere (a web page, another record, a file): a line of
# theirs that reads like a resource is that text's, not a tool server's, and names nothing.
_ECHOING = frozenset({HTTP_FETCH_TOOL, READ_RECORD_TOOL, READ_FILE_TOOL})
# TOOL-4: how a server tool's resource link and embedded resource read in the record
# (``toolservers.results``): ``[resource link: NAME <URI> (mime) — description]`` and
# ``[resource <URI> (mime)]`` / ``[resource <URI> (mime): N bytes of binary content, not shown]``.
_RESOURCE_LINK = re.compile(r"^\[resource link: (?P<name>[^\n<]*?) ?<(?P<uri>[^>\n]+)>")
_RESOURCE = re.compile(r"^\[resource <(?P<uri>[^>\n]+)>")
_SPACES = re.compile(r"\s+")


@dataclass
class _Entry:
    kind: str
    key: Any
    label: str
    ref: str | None
    outcome: str
    seq: int
    order: int  # position in the read, to break ties of one seq (several resources of one result)
    call: dict[str, str] | None = None
    times: int = 0

    def as_dict(self) -> dict[str, Any]:
        label = self.label if self.times <= 1 else f"{self.label} ({self.times} times)"
        return {"kind": self.kind, "label": label, "ref": self.ref, "outcome": self.outcome, "seq": self.seq,
                "call": self.call}


def record_ref(seq: Any) -> str:
    return f'{READ_RECORD_TOOL} {{"seq": {seq}}}'


def file_ref(file_id: Any) -> str:
    return f'{READ_FILE_TOOL} {{"file_id": {json.dumps(file_id, ensure_ascii=False)}}}'


def _one_line(text: Any) -> str:
    return _SPACES.sub(" ", str(text)).strip()


def _int_seq(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _outcome(status: str, content: Any, side_effects: bool) -> str:
    """A result's status as a ledger outcome (see the module docstring)."""
    if status == "ok":
        return "done"
    if status == "unknown":
        return "unknown"
    if status == "cancelled":
        if rec.content_text(content).strip() == NOT_STARTED_TEXT:
            return "denied"
        return "unknown" if side_effects else "failed"
    if status == "timeout":
        return "unknown" if side_effects else "failed"
    return "failed"


def _arguments(call: Call) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments or "{}")
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _resources(content: Any) -> list[tuple[str, str]]:
    """``(name, uri)`` of every resource link and embedded resource a result names (TOOL-4)."""
    found: list[tuple[str, str]] = []
    for line in rec.content_text(content).splitlines():
        match = _RESOURCE_LINK.match(line) or _RESOURCE.match(line)
        if match:
            found.append((_one_line(match.groupdict().get("name") or ""), _one_line(match["uri"])))
    return found


class _Ledger:
    def __init__(self) -> None:
        self.entries: dict[Any, _Entry] = {}
        self.order = 0

    def add(self, kind: str, key: Any, label: str, ref: str | None, outcome: str, seq: int,
            call: dict[str, str] | None = None) -> None:
        """One artifact: a newer touch of the same one replaces its label, reference and
        outcome and moves it up; the count says how often it was touched."""
        self.order += 1
        old = self.entries.get((kind, key))
        touched = 1 if call is not None else 0  # how often the agent touched it (an attachment is not a touch)
        if old is not None:
            if (seq, self.order) < (old.seq, old.order):
                old.times += touched
                return
            touched += old.times
        self.entries[(kind, key)] = _Entry(kind, key, label, ref, outcome, seq, self.order, call, touched)


def artifact_ledger(records: Iterable[Mapping[str, Any]], *, idempotent: Collection[str] = frozenset(),
                    open_runs: Collection[Any] | None = None,
                    instance: str | None = None) -> tuple[dict[str, Any], ...]:
    """The artifact ledger of ``records`` (CTX-49), newest first (see the module docstring).

    ``records`` are SPEC §3 dicts in seq order, every record the instance may see;
    ``idempotent`` names the tools without side effects; ``open_runs`` and ``instance`` as
    in ``tool_call_states`` (the run still going, whose unanswered calls are pending)."""
    read = _Read([r for r in records if isinstance(r, dict)], instance)
    runs = open_runs if open_runs is not None else (
        {read.reader.closures.latest_run} if read.reader.any_read else set())
    ledger = _Ledger()
    for record in read.records:  # the files attached, at the question that carried each
        for file_id in _attached_ids(record):
            if file_id in read.files:
                name = _one_line(read.files[file_id].get("name") or "a file")
                ledger.add("file", file_id, f"file {name} (id {file_id})", file_ref(file_id), "attached",
                           _int_seq(record.get("seq")))
    for call in read.calls:
        read.touch(ledger, call, runs, side_effects=call.name not in idempotent)
    # Newest record first; what one record holds (the resources of one result) in its order.
    ordered = sorted(ledger.entries.values(), key=lambda e: (-e.seq, e.order))
    return tuple(e.as_dict() for e in ordered)


def _attached_ids(record: Mapping[str, Any]) -> list[Any]:
    message = record.get("message") if record.get("kind") == rec.USER else None
    attachments = message.get("attachments") if isinstance(message, Mapping) else None
    return [a.get("id") for a in attachments if isinstance(a, Mapping)] if isinstance(attachments, list) else []


class _Read:
    """The records read and paired as ``tool_call_states`` reads them (a checkpoint replaces
    nothing), with what the ledger needs beside: where each call was made, each result's
    stored content (whole, not cut for the view), what each record is, the files attached."""

    def __init__(self, records: list[dict[str, Any]], instance: str | None) -> None:
        self.records = records
        self.reader = Reader(DEFAULT_TOOL_RESULT_LIMIT, instance)
        self.stored: dict[int, Any] = {}  # seq -> a result record's content
        self.naming: set[int] = set()  # seqs of the tool results that may name resources
        self.kinds: dict[int, str] = {}  # seq -> what the record is (the label of a record read back)
        with gc_paused():
            for record in records:
                self._note(record)
                if record.get("kind") == rec.COMPACTION:
                    record = {**record, "kind": "checkpoint_not_applied"}  # still a record of its run
                self.reader.read(record)
        self.calls: list[Call] = []
        self.made_at: dict[int, int] = {}  # id(Call) -> the seq of the assistant record that made it
        entries: list[Call | Result] = []
        for tag, payload, read_calls, _, seq, _ in self.reader.items:
            if tag == ITEM_ASSISTANT:
                for call in read_calls:
                    self.made_at[id(call)] = _int_seq(seq)
                self.calls.extend(read_calls)
                entries.extend(read_calls)
            elif tag == ITEM_RESULT:
                entries.append(payload)
        pair(entries, self.reader.closures)
        self.files = {f["id"]: f for f in session_files(records) if isinstance(f.get("id"), (int, str))}

    def _note(self, record: Mapping[str, Any]) -> None:
        seq, message, kind = record.get("seq"), record.get("message"), record.get("kind")
        if not isinstance(seq, int) or not isinstance(message, dict) or not isinstance(kind, str):
            return
        if kind in rec.RESULT_KINDS:
            self.stored[seq] = message.get("content")
            if kind == rec.TOOL_RESULT and message.get("name") not in _ECHOING:
                self.naming.add(seq)
            self.kinds[seq] = f"the result of {_one_line(message.get('name') or 'a tool')}"
        else:
            self.kinds[seq] = {"user": "a question", "assistant": "an answer"}.get(kind, f"a {kind} record")

    def touch(self, ledger: _Ledger, call: Call, runs: Collection[Any], *, side_effects: bool) -> None:
        """What one call adds to the ledger."""
        answer = call.answer
        content = None
        if answer is None:
            if call_outcome(call, self.reader.closures, runs) != "unknown":
                return  # pending in the open run, or from a cut stream: it never ran (CTX-2, CTX-6)
            late = call.late  # what the tool reported after its run ended (CTX-4): the call stays unknown
            seq = _int_seq(late.seq) if late is not None else self.made_at.get(id(call), 0)
            outcome, ref = "unknown", record_ref(late.seq) if late is not None else None
        else:
            seq = _int_seq(answer.seq)
            outcome, ref = _outcome(answer.status, self.stored.get(seq), side_effects), record_ref(answer.seq)
            content = self.stored.get(seq) if seq in self.naming else None
        described = {"id": call.raw_id or "", "name": call.name, "arguments": call.arguments}
        arguments = _arguments(call)
        if call.name == HTTP_FETCH_TOOL and isinstance(arguments.get("url"), str):
            url = _one_line(arguments["url"])
            ledger.add("url", url, f"URL {url}, fetched", ref, outcome, seq, described)
        elif call.name == READ_RECORD_TOOL and isinstance(arguments.get("seq"), int):
            read = arguments["seq"]
            what = self.kinds.get(read)
            ledger.add("record", read, f"record {read}{f' ({what})' if what else ''}, read back", record_ref(read),
                       outcome, seq, described)
        elif call.name == READ_FILE_TOOL and isinstance(arguments.get("file_id"), (int, str)):
            file_id = arguments["file_id"]
            name = self.files.get(file_id, {}).get("name")
            attached = ", attached by the person" if file_id in self.files else ""
            ledger.add("file", file_id, f"file {_one_line(name or 'not attached here')} (id {file_id}){attached}, "
                       "read back by the agent", file_ref(file_id), outcome, seq, described)
        elif side_effects:
            ident = f" (call {call.raw_id})" if call.raw_id else ""
            ledger.add("call", ("call", id(call)), f"{call.name}{ident} with arguments {_one_line(call.arguments)}",
                       ref, outcome, seq, described)
        for name, uri in _resources(content):
            label = f"resource {name + ' ' if name else ''}<{uri}>, named by {call.name}"
            ledger.add("resource", uri, label, ref, outcome, seq, described)


# --- text: what the runtime-state block and a summary written by code show ------------

LEDGER_TITLE = ("Artifact ledger (newest first; recorded by the platform from the records, not written by the "
                "summary): the files, URLs and resources the agent touched, what it read back, and every call with "
                "side effects with its outcome (done / failed / unknown / denied); the call after an entry reads it "
                "back:")


def _clip(text: str, limit: int | None, brief: bool) -> str:
    if limit is None or len(text) <= limit:
        return text
    return f"{text[:limit]}…" if brief else f"{text[:limit]}… [{len(text) - limit} more characters]"


def ledger_line(entry: Mapping[str, Any], *, label_chars: int | None = None, brief: bool = False) -> str:
    """One entry as a line: ``- <label>: <outcome> — <ref>``, the label clipped to ``label_chars``."""
    label = _clip(_one_line(entry.get("label") or entry.get("kind") or "?"), label_chars, brief)
    outcome = str(entry.get("outcome") or "unknown")
    if outcome == "unknown" and entry.get("kind") == "call":
        outcome = "unknown (it may or may not have happened: check before relying on it or repeating it)"
    ref = entry.get("ref")
    return f"- {label}: {outcome}" + (f" — {ref}" if ref else "")


def ledger_lines(entries: Sequence[Mapping[str, Any]], *, label_chars: int | None = 500) -> list[str]:
    """The entries as lines, in their order (newest first), each label clipped to
    ``label_chars``: for a summary written by code (CTX-48)."""
    return [ledger_line(entry, label_chars=label_chars) for entry in entries]


def ledger_earlier(left: int, _total: int = 0) -> str:
    """The line that counts the entries a bounded block leaves out."""
    return (f"- and {left} earlier artifact{'' if left == 1 else 's'} (no room to list them; they are in the "
            "records)")


def ledger_to_show(ledger: Sequence[Mapping[str, Any]], *, unknown: Sequence[Mapping[str, Any]] = (),
                   files: Sequence[Mapping[str, Any]] = ()) -> list[Mapping[str, Any]]:
    """The entries the runtime-state block's ledger shows: one call is listed once, in one
    state, and one file once (CTX-36). A call the block lists among the calls with an
    unknown outcome (matched by id, name and arguments, one listed call for one entry)
    stays there, with its warning; a file the person attached stays in the files list,
    with its kind, size and how to read it. (Pending calls are never in the ledger.)"""
    listed: dict[tuple[str, str, str], int] = {}
    for call in unknown:
        key = (str(call.get("id") or ""), str(call.get("name") or ""), str(call.get("arguments") or ""))
        listed[key] = listed.get(key, 0) + 1
    attached = {file_ref(f.get("id")) for f in files}
    out: list[Mapping[str, Any]] = []
    for entry in ledger:
        made_by = entry.get("call")
        if entry.get("kind") == "file" and entry.get("ref") in attached:
            continue
        if entry.get("outcome") == "unknown" and isinstance(made_by, Mapping):
            key = (str(made_by.get("id") or ""), str(made_by.get("name") or ""),
                   str(made_by.get("arguments") or ""))
            if listed.get(key):
                listed[key] -= 1
                continue
        out.append(entry)
    return out
