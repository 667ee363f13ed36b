"""The projector: source records in, the model-visible message list out (SPEC §3).

Reading happens in two passes, as CTX-9 asks. The first pass reads records in seq order,
turning each into a pending item and letting a valid checkpoint replace everything read
so far. The second pass pairs calls with results over the final list, rewrites call ids,
places unknown-outcome placeholders and late results, and trims old screenshots.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from context import records as rec
from context.attachments import DEFAULT_IMAGE_BUDGET, ImageBudget, ImageBudgetPass
from context.media import DEFAULT_SCREEN_TOOLS
from context.output_pass import ITEM_ASSISTANT, ITEM_RESULT, Settled, assemble, note
from context.pairing import Call, Result, call_outcome, pair
from context.reader import Reader, gc_paused
from context.traces import Trace
from context.truncation import DEFAULT_TOOL_RESULT_LIMIT


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
    start_traces: Sequence[Any] | None = None,
    traces_out: list[Trace] | None = None,
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
        start_traces: what each of the view's messages stands for, as stored with it
        (``context.traces``, JSON; ignored unless one per message).
      open_runs: runs still in progress, whose unanswered calls are pending and left out
        (CTX-2). Default: the run that started last, unless a run_status record ended
        it. Unanswered calls of every other run get an unknown-outcome placeholder
        (CTX-3).
      instance: when set, only records of that instance are read.
      sources_out: when a list is given, its contents are replaced by one entry per
        output message: ``(first_seq, last_seq)`` of the record(s) it came from, or None
        for a message from the starting view or a checkpoint and for an unknown-outcome
        placeholder. The output itself is the same with or without it.
      traces_out: likewise, one trace per output message (``context.traces``): the
        records it stands for, through every earlier checkpoint -- a record's message its
        record, a checkpoint's message what the checkpoint stored for it (a record
        ``compaction`` message's ``traces``, one per message), empty for a placeholder and
        when not known. Compaction uses it to say exactly which records each summary
        consumed (CTX-41).
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
                            answer_limit=answer_limit, image_budget=image_budget, start_traces=start_traces)
    with gc_paused():  # one pause for both passes: a collection in between walks every item read
        projection.extend(records)
        projected = projection._project(open_runs, once=True,
                                        track=sources_out is not None or traces_out is not None)
    if sources_out is not None:
        sources_out[:] = projected.sources
    if traces_out is not None:
        traces_out[:] = projected.traces
    if repairs_out is not None:
        repairs_out[:] = projected.repairs
    return projected.messages


@dataclass(frozen=True)
class Projected:
    """One projection: the messages, one source and one trace (CTX-41) per message, and
    the repairs (empty when the projection was made without them)."""

    messages: list[dict[str, Any]]
    sources: list[tuple[int, int] | None]
    repairs: list[dict[str, Any]]
    traces: list[Trace] = field(default_factory=list)


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
                 image_budget: ImageBudget | None = DEFAULT_IMAGE_BUDGET, start_traces: Sequence[Any] | None = None,
                 ) -> None:
        if tool_result_limit < 1:
            raise ValueError("tool_result_limit must be a positive number of characters")
        if start_view is not None or start_watermark is not None:
            if start_watermark is None or isinstance(start_watermark, bool) or not isinstance(start_watermark, int):
                raise ValueError("start_view needs an integer start_watermark")
        self._reader = Reader(tool_result_limit, instance, repairs=repairs, answer_limit=answer_limit)
        self._screen_tools = frozenset(screen_tools)
        self._repairs = repairs
        self._settled = Settled()
        self._images = ImageBudgetPass(image_budget) if image_budget is not None else None
        if start_watermark is not None:
            with gc_paused():
                self._reader.load_view(start_view or [], start_watermark, start_traces)

    def extend(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Read more records (SPEC §3 dicts, in seq order, after every record read so far)."""
        with gc_paused():
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
        # ``track``: sources and traces are wanted.
        reader = self._reader
        if open_runs is None:
            open_runs = {reader.closures.latest_run} if reader.any_read else set()
        if self._settled.generation != (reader.generation, reader.reopened):
            # A checkpoint replaced what was read, or a resumed run made ended calls pending.
            self._settled = Settled(generation=(reader.generation, reader.reopened))
        repairs: list[dict[str, Any]] | None = [] if self._repairs else None
        with gc_paused():
            out, sources, traces = assemble(reader.items, reader.closures, reader.notes or {}, open_runs,
                                    self._screen_tools, self._settled, repairs, once, track)
            if self._images is not None:  # RUN-13: the newest images within the budget
                changed = self._images.apply(out, self._settled, len(self._settled.out))
                why = "past the images one request may carry (the newest are kept); each named in a note (RUN-13)"
                repairs = None if repairs is None else repairs + [note("image_left_out", why, None, position=p)
                                                                  for p in changed]
        return Projected(out, sources, repairs or [], traces)


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
    reader = Reader(DEFAULT_TOOL_RESULT_LIMIT, instance)
    with gc_paused():
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
