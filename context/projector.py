"""The projector: source records in, the model-visible message list out (SPEC §3).

Reading happens in two passes, as CTX-9 asks. The first pass reads records in seq order,
turning each into a pending item and letting a valid checkpoint replace everything read
so far. The second pass pairs calls with results over the final list, rewrites call ids,
places unknown-outcome placeholders and late results, and trims old screenshots.
"""

from __future__ import annotations

import copy
import gc
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from context import records as rec
from context.attachments import DEFAULT_IMAGE_BUDGET, ImageBudget, ImageBudgetPass, question_content
from context.media import DEFAULT_SCREEN_TOOLS
from context.output_pass import ITEM_ASSISTANT, ITEM_MESSAGE, ITEM_RESULT, Settled, assemble, note
from context.pairing import Call, Closures, Result, call_outcome, pair
from context.policy import PLATFORM_MAX_OUTPUT_TOKENS
from context.truncation import DEFAULT_TOOL_RESULT_LIMIT, answer_bound, truncate_content, truncate_text

_VIEW_RUN = object()  # the starting view belongs to no run, so it is never "open"


class _Reader:
    """First pass (CTX-9): records in order, checkpoints replacing what came before."""

    def __init__(self, tool_result_limit: int, instance: str | None, repairs: bool = False,
                 answer_limit: int | None = None) -> None:
        self.limit = tool_result_limit
        # An answer the model wrote within its output limit is never cut: only one past
        # ``answer_bound`` of the platform's output reserve (or the caller's) is.
        self.answer_limit = max(tool_result_limit, answer_limit or answer_bound(PLATFORM_MAX_OUTPUT_TOKENS))
        self.instance = instance
        # What the read changed of a record, by the id of the item it became (only when
        # the caller asked for repairs: this pass is the hot path of every step).
        self.notes: dict[int, list[dict[str, Any]]] | None = {} if repairs else None
        # (tag, payload, calls, run, seq, origin) per usable message read since the last
        # checkpoint; origin is the record seq for a message read from a record, None for
        # one from a starting view or a checkpoint (what ``sources_out`` reports).
        self.items: list[tuple[int, Any, Any, Any, Any, Any]] = []
        self.closures = Closures()
        self.index = 0
        self.watermark: int | None = None
        self.any_read = False
        self.generation = 0  # checkpoints applied: each one replaces ``items``
        self.reopened = 0  # runs resumed: each one may make ended calls pending again
        self._run: Any = _VIEW_RUN  # run of the previous record, to skip closure bookkeeping

    # -- starting point -------------------------------------------------------------
    def load_view(self, messages: Sequence[Mapping[str, Any]], watermark: int) -> None:
        """Start from a reusable view that covers every record with seq <= watermark."""
        bad = [i for i, m in enumerate(messages) if not rec.is_valid_chat_message(m)]
        if bad:
            raise ValueError(f"start_view has malformed messages at positions {bad}")
        self.watermark = watermark
        for message in messages:
            self._read_chat_message(message, ("view",), _VIEW_RUN, watermark)

    # -- records --------------------------------------------------------------------
    def read(self, record: Mapping[str, Any]) -> None:
        """Read one record; records the view already covers are skipped."""
        # Records are plain dicts (SPEC §3); exact dict checks keep this loop fast.
        if not isinstance(record, dict):
            return
        if self.instance is not None and record.get("instance") != self.instance:
            return
        seq = record.get("seq")
        if self.watermark is not None and isinstance(seq, int) and seq <= self.watermark:
            return
        kind = record.get("kind")
        run = record.get("run")
        if run is not None and not isinstance(run, (str, int)):
            run = repr(run)  # run ids are keys below; junk must not crash the read
        self.index += 1
        self.any_read = True
        message = record.get("message")
        if run != self._run or kind == rec.RUN_STATUS:
            self._run = run
            reopens = kind == rec.RUN_STATUS and isinstance(message, dict) and message.get("status") == rec.RUN_REOPENED
            self.closures.see(run, self.index, kind == rec.RUN_STATUS, reopens)
            self.reopened += reopens
        if not isinstance(message, dict):
            return
        if kind == rec.ASSISTANT:
            self._read_assistant(message, ("records", record.get("instance")), run, seq,
                                 bool(message.get("partial")))
        elif kind == rec.TOOL_RESULT or kind == rec.DELEGATION_RESULT:
            self._read_result(message, ("records", record.get("instance")), run, seq, render_status=True)
        elif kind == rec.USER or kind == rec.SUPPLEMENT:
            content = question_content(message, self.limit)  # RUN-13: its files follow its text
            if content is None or rec.content_is_empty(content):
                return
            if kind == rec.SUPPLEMENT:
                content = rec.prefix_content(content, rec.SUPPLEMENT_PREFIX)
            self.items.append((ITEM_MESSAGE, {"role": "user", "content": content}, None, run, seq, seq))
        elif kind == rec.COMMAND:
            if not message.get("exclude"):
                text = self._command_text(message, seq)
                self.items.append((ITEM_MESSAGE, {"role": "user", "content": text}, None, run, seq, seq))
        elif kind == rec.COMPACTION:
            self._apply_checkpoint(record, run, seq)
        # Every other kind is metadata (run_status, model_change, label, extension_state,
        # context, compaction_summary, and kinds not invented yet): nothing to project.

    def _command_text(self, message: Mapping[str, Any], seq: Any) -> str:
        output = message.get("output")
        output = output if isinstance(output, str) else ""
        text = (
            f"{rec.COMMAND_HEADER}\n$ {message.get('command', '')}\n"
            f"exit code: {message.get('exit_code')}\n{output}"
        )
        # A command's output is as unbounded as a tool's, so it gets the same CTX-7 limit.
        return truncate_text(text, self.limit, seq)

    def _read_assistant(self, message: Mapping[str, Any], scope: Any, run: Any, seq: Any,
                        partial: bool) -> None:
        content = rec.normalize_content(message.get("content"))
        if isinstance(content, list):
            content = [p for p in content if rec.is_text_part(p)]
        if rec.content_is_empty(content):
            content = None
        notes: list[dict[str, Any]] = []
        if content is not None:
            # No single record may end the session by size (CTX-7, CTX-42): an answer longer
            # than any answer within its output limit -- a provider that ignored the limit,
            # an import -- keeps its head and its tail like a tool result; read_record pages
            # the rest. Answers the model wrote within its limit are shown whole.
            cut = truncate_content(content, self.answer_limit, seq)
            if cut is not content and cut != content:
                content = cut
                notes.append(note("truncated", f"the answer is longer than the {self.answer_limit:,} characters "
                                                "the view shows of one answer; head and tail kept (CTX-7)", seq))
        if partial and content is not None:
            content = rec.suffix_content(content, rec.INTERRUPTED_SUFFIX)
            notes.append(note("interrupted_text", "the answer's stream was cut; its text is marked interrupted", seq))
        calls: list[Call] = []
        raw_calls = message.get("tool_calls")
        for raw in raw_calls if isinstance(raw_calls, list) else ():
            function = raw.get("function") if isinstance(raw, dict) else None
            name = function.get("name") if isinstance(function, dict) else None
            if not isinstance(function, dict) or not isinstance(name, str) or not name:
                continue  # nothing any provider could accept, and nothing was executed
            arguments, is_object = rec.parse_arguments(function.get("arguments"))
            if not is_object:
                if partial or raw.get("partial"):
                    notes.append(note("call_dropped", f"the arguments of {name} were cut by an interrupted stream; "
                                                       "it never ran", seq))
                    continue  # cut by an interrupted stream: never executed (CTX-6)
                arguments = rec.wrap_invalid_arguments(arguments)
                notes.append(note("arguments_wrapped", f"the arguments of {name} were not a JSON object; "
                                                         "the raw text is kept inside one", seq))
            raw_id = raw.get("id")
            calls.append(Call(raw_id if isinstance(raw_id, str) and raw_id else None, scope,
                              run, self.index, name, arguments, partial))
        if content is None and not calls:
            return  # nothing usable remains (an empty or reasoning-only message)
        base: dict[str, Any] = {"role": "assistant", "content": content}
        reasoning = message.get("reasoning_content", message.get("reasoning"))
        if isinstance(reasoning, str):
            if reasoning:
                base["reasoning_content"] = reasoning
        elif reasoning is not None:
            base["reasoning"] = copy.deepcopy(reasoning)  # opaque provider blocks, verbatim
        if notes and self.notes is not None:
            self.notes[id(base)] = notes
        self.items.append((ITEM_ASSISTANT, base, calls, run, seq, seq if scope[0] == "records" else None))

    def _read_result(self, message: Mapping[str, Any], scope: Any, run: Any, seq: Any,
                     render_status: bool) -> None:
        raw_id = message.get("tool_call_id")
        status = message.get("status")
        if not isinstance(status, str) or status not in rec.RESULT_STATUSES:
            status = "error" if message.get("is_error") else "ok"
        content = rec.normalize_content(message.get("content"))
        if content is None or rec.content_is_empty(content):
            content = rec.EMPTY_RESULT_TEXT if not content else [
                *content, {"type": "text", "text": rec.EMPTY_RESULT_TEXT}]
        cut = truncate_content(content, self.limit, seq)
        truncated = cut is not content and cut != content
        content = cut
        if render_status and status != "ok":
            content = rec.prefix_content(content, f"[tool status: {status}]\n")
        result = Result(raw_id if isinstance(raw_id, str) and raw_id else None, scope,
                        self.index, seq, status, content, bool(message.get("observes_screen")))
        if truncated and self.notes is not None:
            self.notes[id(result)] = [note("truncated", f"the result is longer than the {self.limit:,} characters "
                                                         "the view shows; head and tail kept (CTX-7)", seq)]
        self.items.append((ITEM_RESULT, result, None, run, seq, seq if scope[0] == "records" else None))

    def _read_chat_message(self, message: Mapping[str, Any], scope: Any, run: Any, seq: Any) -> None:
        """Read one message of a checkpoint or starting view (already model-shaped)."""
        role = message["role"]
        if role == "assistant":
            self._read_assistant(message, scope, run, seq, partial=False)
        elif role == "tool":
            self._read_result(message, scope, run, seq, render_status=False)
        else:
            content = rec.normalize_content(message.get("content"))
            if not rec.content_is_empty(content):
                self.items.append((ITEM_MESSAGE, {"role": role, "content": content}, None, run, seq, None))

    def _apply_checkpoint(self, record: Mapping[str, Any], run: Any, seq: Any) -> None:
        """CTX-9: a valid checkpoint replaces everything read so far with its messages.

        It is applied only when it observed everything it would replace: every item read
        so far comes from a record with seq <= covered_seq or from the checkpoint's own
        run. A compaction made by a resumed run that never saw the runs in between (RUN-9)
        therefore cannot erase them; it is skipped and the raw records stay.
        """
        messages = rec.checkpoint_messages(record)
        if messages is None:
            return  # malformed: ignored, never trusted
        covered = record["message"]["covered_seq"]
        for _, _, _, item_run, item_seq, _ in self.items:
            if item_run != run and not (isinstance(item_seq, int) and item_seq <= covered):
                return  # it never saw this item: applying it would erase history
        self.items = []
        self.generation += 1
        if self.notes is not None:
            # Notes are keyed by id() of the items just dropped; a new item could reuse one.
            self.notes = {}
        scope = ("checkpoint", seq, self.index)
        for message in messages:
            self._read_chat_message(message, scope, run, seq)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Defer cyclic garbage collection while projecting.

    A projection allocates one output object per record while the caller holds all the
    records; CPython then runs full collections that walk every one of them, which cost
    more than the projection itself on long sessions (about 60% of the time at 100k
    records). Nothing is lost by waiting: collection resumes as soon as we return.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def project_records(
    records: Iterable[Mapping[str, Any]],
    *,
    screen_tools: Collection[str] = DEFAULT_SCREEN_TOOLS,
    tool_result_limit: int = DEFAULT_TOOL_RESULT_LIMIT,
    answer_limit: int | None = None,
    start_view: Sequence[Mapping[str, Any]] | None = None,
    start_watermark: int | None = None,
    open_runs: Collection[Any] | None = None,
    instance: str | None = None,
    sources_out: list[tuple[int, int] | None] | None = None,
    repairs_out: list[dict[str, Any]] | None = None,
    image_budget: ImageBudget | None = DEFAULT_IMAGE_BUDGET,
) -> list[dict[str, Any]]:
    """Turn source records into the OpenAI-shaped messages the next request reads.

    ``records`` are SPEC §3 dicts in seq order; they are never modified (CTX-1) and the
    output shares no mutable object with them.

    Options:
      screen_tools: names of tools that observe a screen (CTX-8); a result flagged
        ``observes_screen`` counts too.
      tool_result_limit: characters of a tool result the view shows (CTX-7).
      answer_limit: characters of one answer the view shows (default: ``answer_bound`` of
        the platform's output reserve, never below ``tool_result_limit``). Only an answer
        longer than any the model could write within its output limit (a provider that
        ignored the limit, an import) is cut, keeping head and tail around the CTX-7
        marker, so no single record overflows the next request.
      start_view / start_watermark: a reusable view and the seq it covers; records with
        seq <= start_watermark are skipped and the view's messages are the starting point.
      open_runs: runs still in progress, whose unanswered calls are pending and left out
        (CTX-2). Default: the run that started last, unless a run_status record ended
        it. Unanswered calls of every other run get an unknown-outcome placeholder
        (CTX-3).
      instance: when set, only records of that instance are read.
      sources_out: when a list is given, its contents are replaced by one entry per
        output message: ``(first_seq, last_seq)`` of the record(s) it came from, or None
        for a message from the starting view or a checkpoint and for an unknown-outcome
        placeholder. The output itself is the same with or without it. Compaction uses
        it to say which records each summary consumed (CTX-41).
      repairs_out: when a list is given, its contents are replaced by what the read
        changed to make the request valid — ``{"kind", "reason", "seq", "position",
        "call_id"?}`` each: truncated, unknown_outcome, late_result, id_rewritten,
        call_dropped, orphan_result_dropped, screenshot_trimmed, interrupted_text,
        arguments_wrapped, image_left_out. The context inspector shows them; the output is
        the same.
      image_budget: the images one request carries (RUN-13; ``ImageBudget``: by default
        at most 20 images and 20 MB of base64, each at most 5 MB and 8000 px a side). The
        newest are kept; an older image, and its attachment label, becomes a note naming
        the file. None sends every image (for a caller that bounds them itself).

    Assistant messages may carry ``reasoning_content`` (a provider's reasoning text) or
    ``reasoning`` (opaque provider blocks); the provider adapters decide whether to send
    them. Everything else is plain OpenAI chat shape.
    """
    projection = Projection(screen_tools=screen_tools, tool_result_limit=tool_result_limit, start_view=start_view,
                            start_watermark=start_watermark, instance=instance, repairs=repairs_out is not None,
                            answer_limit=answer_limit, image_budget=image_budget)
    with _gc_paused():  # one pause for both passes: a collection in between walks every item read
        projection.extend(records)
        projected = projection._project(open_runs, once=True, track=sources_out is not None)
    if sources_out is not None:
        sources_out[:] = projected.sources
    if repairs_out is not None:
        repairs_out[:] = projected.repairs
    return projected.messages


@dataclass(frozen=True)
class Projected:
    """One projection: the messages, one source per message, and the repairs (empty when
    the projection was made without them)."""

    messages: list[dict[str, Any]]
    sources: list[tuple[int, int] | None]
    repairs: list[dict[str, Any]]


class Projection:
    """A projection kept between steps, so that a step costs what is new (LOOP-1).

    ``extend`` reads records once, in seq order, as they are written; ``project`` then
    returns what ``project_records`` would return for every record extended so far (a
    property test holds the two equal for any history cut anywhere), re-reading only the
    output that is not settled yet (see ``context.output_pass``). The options are
    ``project_records``'s; ``repairs`` says whether repairs are collected.

    Successive results share the messages of their settled prefix: callers treat every
    message as read-only (the adapters copy before they change anything).
    """

    def __init__(self, *, screen_tools: Collection[str] = DEFAULT_SCREEN_TOOLS,
                 tool_result_limit: int = DEFAULT_TOOL_RESULT_LIMIT,
                 start_view: Sequence[Mapping[str, Any]] | None = None, start_watermark: int | None = None,
                 instance: str | None = None, repairs: bool = False, answer_limit: int | None = None,
                 image_budget: ImageBudget | None = DEFAULT_IMAGE_BUDGET) -> None:
        if tool_result_limit < 1:
            raise ValueError("tool_result_limit must be a positive number of characters")
        if start_view is not None or start_watermark is not None:
            if start_watermark is None or isinstance(start_watermark, bool) or not isinstance(start_watermark, int):
                raise ValueError("start_view needs an integer start_watermark")
        self._reader = _Reader(tool_result_limit, instance, repairs=repairs, answer_limit=answer_limit)
        self._screen_tools = frozenset(screen_tools)
        self._repairs = repairs
        self._settled = Settled()
        self._images = ImageBudgetPass(image_budget) if image_budget is not None else None
        if start_watermark is not None:
            with _gc_paused():
                self._reader.load_view(start_view or [], start_watermark)

    def extend(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Read more records (SPEC §3 dicts, in seq order, after every record read so far)."""
        with _gc_paused():
            for record in records:
                self._reader.read(record)

    @property
    def unsettled(self) -> int:
        """How many items read so far the next ``project`` reads again (the rest is settled)."""
        reader = self._reader
        settled = self._settled.items if self._settled.generation == (reader.generation, reader.reopened) else 0
        return len(self._reader.items) - settled

    def project(self, open_runs: Collection[Any] | None = None) -> Projected:
        """The messages the next request reads; ``open_runs`` as in ``project_records``."""
        return self._project(open_runs)

    def _project(self, open_runs: Collection[Any] | None, once: bool = False, track: bool = True) -> Projected:
        # ``once``: the last projection of this object (project_records): nothing is kept;
        # ``track``: sources are wanted.
        reader = self._reader
        if open_runs is None:
            open_runs = {reader.closures.latest_run} if reader.any_read else set()
        if self._settled.generation != (reader.generation, reader.reopened):
            # A checkpoint replaced what was read, or a resumed run made ended calls pending.
            self._settled = Settled(generation=(reader.generation, reader.reopened))
        repairs: list[dict[str, Any]] | None = [] if self._repairs else None
        with _gc_paused():
            out, sources = assemble(reader.items, reader.closures, reader.notes or {}, open_runs,
                                    self._screen_tools, self._settled, repairs, once, track)
            if self._images is not None:  # RUN-13: the newest images within the budget
                changed = self._images.apply(out, self._settled, len(self._settled.out))
                why = "past the images one request may carry (the newest are kept); each named in a note (RUN-13)"
                repairs = None if repairs is None else repairs + [note("image_left_out", why, None, position=p)
                                                                  for p in changed]
        return Projected(out, sources, repairs or [])


@dataclass(frozen=True)
class CallStates:
    """CTX-36: the tool calls of a history whose outcome nobody has reported, each once, as
    ``{"id", "name", "arguments"}`` with the id the records hold (the view renumbers ids,
    and renumbers them again after every compaction; the records' id never changes)."""

    pending: tuple[dict[str, str], ...]  # in a run still going: a result may yet come
    unknown: tuple[dict[str, str], ...]  # settled without an outcome: a placeholder, or status unknown


def tool_call_states(records: Iterable[Mapping[str, Any]], *, open_runs: Collection[Any] | None = None,
                     instance: str | None = None) -> CallStates:
    """The calls of ``records`` still pending and those whose outcome is unknown (CTX-36).

    Read from the records, never from a view, so a call stays listed however often the
    view around it was summarized: the same reading and pairing as ``project_records``
    (same ``open_runs`` and ``instance``), except that a checkpoint replaces nothing. A
    call is *pending* when the projection leaves it out as still running (CTX-2),
    *unknown* when it gets the unknown-outcome placeholder (CTX-3; a late result is shown
    beside it, CTX-4, and the call stays marked unknown) or its result says ``unknown``
    (RUN-6); calls of a cut stream never ran (CTX-6). One call is in one list, once.
    """
    reader = _Reader(DEFAULT_TOOL_RESULT_LIMIT, instance)
    with _gc_paused():
        for record in records:
            if isinstance(record, dict) and record.get("kind") == rec.COMPACTION:
                record = {**record, "kind": "checkpoint_not_applied"}  # still a record of its run
            reader.read(record)
    runs = open_runs if open_runs is not None else ({reader.closures.latest_run} if reader.any_read else set())
    calls: list[Call] = []
    entries: list[Call | Result] = []
    for tag, payload, read_calls, _, _, _ in reader.items:
        if tag == ITEM_ASSISTANT:
            calls.extend(read_calls)
            entries.extend(read_calls)
        elif tag == ITEM_RESULT:
            entries.append(payload)
    pair(entries, reader.closures)
    pending: list[dict[str, str]] = []
    unknown: list[dict[str, str]] = []
    for call in calls:
        described = {"id": call.raw_id or "", "name": call.name, "arguments": call.arguments}
        if call.answer is not None:
            if call.answer.status == "unknown":
                unknown.append(described)
            continue
        outcome = call_outcome(call, reader.closures, runs)
        if outcome == "unknown":
            unknown.append(described)
        elif not call.from_partial:
            pending.append(described)
    return CallStates(tuple(pending), tuple(unknown))
