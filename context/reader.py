"""The projector's first pass (CTX-9): records in seq order, checkpoints replacing what
came before.

``Reader`` turns each record into a pending *item* -- a plain message, an assistant
message with its calls, a result -- and lets a valid checkpoint replace everything read
so far; the second pass (``context.output_pass``) pairs, numbers and writes them. It
keeps the run closures pairing needs, and, per item, where it came from: a record's seq,
or the trace (CTX-41) a checkpoint's or starting view's message was stored with.
"""

from __future__ import annotations

import copy
import gc
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from context import records as rec
from context.attachments import question_content
from context.output_pass import ITEM_ASSISTANT, ITEM_MESSAGE, ITEM_RESULT, note
from context.pairing import Call, Closures, Result
from context.policy import PLATFORM_MAX_OUTPUT_TOKENS
from context.traces import Trace, traces_from_json
from context.truncation import answer_bound, truncate_content, truncate_text

_VIEW_RUN = object()  # the starting view belongs to no run, so it is never "open"


class Reader:
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
        # checkpoint; origin is the record seq for a message read from a record (what
        # ``sources_out`` reports), and for one from a starting view or a checkpoint the
        # records it stands for, a trace (``context.traces``; empty when not known).
        self.items: list[tuple[int, Any, Any, Any, Any, Any]] = []
        self.closures = Closures()
        self.index = 0
        self.watermark: int | None = None
        self.any_read = False
        self.generation = 0  # checkpoints applied: each one replaces ``items``
        self.reopened = 0  # runs resumed: each one may make ended calls pending again
        self._run: Any = _VIEW_RUN  # run of the previous record, to skip closure bookkeeping

    # -- starting point -------------------------------------------------------------
    def load_view(self, messages: Sequence[Mapping[str, Any]], watermark: int, traces: Any = None) -> None:
        """Start from a reusable view that covers every record with seq <= watermark;
        ``traces``, stored with it, say which records each of its messages stands for."""
        bad = [i for i, m in enumerate(messages) if not rec.is_valid_chat_message(m)]
        if bad:
            raise ValueError(f"start_view has malformed messages at positions {bad}")
        self.watermark = watermark
        known = traces_from_json(traces, len(messages))
        for i, message in enumerate(messages):
            self._read_chat_message(message, ("view",), _VIEW_RUN, watermark, known[i] if known else ())

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
                                 bool(message.get("partial")), seq)
        elif kind == rec.TOOL_RESULT or kind == rec.DELEGATION_RESULT:
            self._read_result(message, ("records", record.get("instance")), run, seq, seq, render_status=True)
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
                        partial: bool, origin: Any) -> None:
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
        self.items.append((ITEM_ASSISTANT, base, calls, run, seq, origin))

    def _read_result(self, message: Mapping[str, Any], scope: Any, run: Any, seq: Any, origin: Any,
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
                        self.index, seq, status, content, bool(message.get("observes_screen")), origin)
        if truncated and self.notes is not None:
            self.notes[id(result)] = [note("truncated", f"the result is longer than the {self.limit:,} characters "
                                                         "the view shows; head and tail kept (CTX-7)", seq)]
        self.items.append((ITEM_RESULT, result, None, run, seq, origin))

    def _read_chat_message(self, message: Mapping[str, Any], scope: Any, run: Any, seq: Any, trace: Trace) -> None:
        """Read one message of a checkpoint or starting view (already model-shaped), which
        stands for the records of ``trace``."""
        role = message["role"]
        if role == "assistant":
            self._read_assistant(message, scope, run, seq, False, trace)
        elif role == "tool":
            self._read_result(message, scope, run, seq, trace, render_status=False)
        else:
            content = rec.normalize_content(message.get("content"))
            if not rec.content_is_empty(content):
                self.items.append((ITEM_MESSAGE, {"role": role, "content": content}, None, run, seq, trace))

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
        # CTX-41: what each message stood for, stored with the checkpoint (not known without).
        known = traces_from_json(record["message"].get("traces"), len(messages))
        for i, message in enumerate(messages):
            self._read_chat_message(message, scope, run, seq, known[i] if known else ())


@contextmanager
def gc_paused() -> Iterator[None]:
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
