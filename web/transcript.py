"""From a run's source records to what the chat shows (SPEC §3: how each kind is displayed).

Display is not projection: this never decides what a model sees. A finished run is
rendered from its main-instance records — questions, supplements, answers (Markdown,
rendered and sanitised here), tool steps with their results and durations, and its end
(stopped, interrupted, failed with a worded error). A run that is still working shows
only what the person wrote; the browser builds the rest from the run's events and swaps
in this rendering when the run ends.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from context.records import content_text
from sessions.models import Run, SessionMessage
from sessions.run_errors import RunErrorCode
from web.attachments import AttachmentView, attachment_views
from web.deltas import text_from_deltas as text_from_deltas  # its home; imported from here too
from web.errors import error_explain
from web.folded import FOLDED_NOTICE, folded_count, folded_seqs
from web.markdown import RenderBudget
from web.memory_words import memory_step_words
from web.step_text import arguments_pretty, duration_label, result_images
from web.summaries import summary_by_code
from web.tool_labels import tool_label

# An answer the output limit stopped (finish reason ``length``): the model's own limit, or
# the platform's bound on a provider that ignored it. What happened; Continue is beside it.
OUTPUT_LIMIT_NOTE = "The answer was cut at this agent's output limit."
# The first words of a run that continues the cut answer above it (it has no question).
CONTINUED_NOTICE = "Continued from the answer above."


def output_limit_note(limit: Any, *, cause: Any = None, answer_tokens: Any = None) -> str:
    """What a cut answer says: the limit it was cut at, when its record knows it; or, when
    it stopped far below that limit (``cause`` ``context_filled``, CAT-12), that the
    server's context filled — never "cut at N tokens" for an answer that was not."""
    if cause == "context_filled":
        written = (f" after about {answer_tokens:,} tokens" if _positive(answer_tokens) else "")
        limit_words = f" of {limit:,} tokens" if _positive(limit) else ""
        return (f"The answer stopped{written} because the model server's context window filled up (the "
                f"conversation and the answer share it), not at this agent's output limit{limit_words}. "
                "Continue asks for the rest; if it stops again, compact the conversation or ask your admin to "
                "check the model's context window.")
    if _positive(limit):
        return f"The answer was cut at {limit:,} tokens (this agent's output limit)."
    return OUTPUT_LIMIT_NOTE


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
RESUMED_NOTICE = "Resumed."
COMPACTED_NOTICE = ("Earlier messages were summarized to fit the model's context window. "
                    "The full history is still kept.")
PLAN_STATUS_LABELS = {"pending": "to do", "in_progress": "in progress", "done": "done"}
RESULT_PREVIEW_CHARS = 4_000
ARGUMENTS_PREVIEW_CHARS = 2_000

STEP_STATUS_LABELS = {"ok": "done", "error": "error", "cancelled": "cancelled", "timeout": "timed out",
                      "unknown": "outcome unknown", "denied": "not run (denied)", None: "no result"}


@dataclass
class Bubble:
    """Something the person wrote: the question, or a supplement."""

    kind: str  # "user" | "supplement"
    text: str
    queued: bool = False
    attachments: list[AttachmentView] = field(default_factory=list)  # a question's files (RUN-13)
    seq: int | None = field(default=None, compare=False)  # its record, for the pin control (CTX-50)


@dataclass
class Answer:
    html: str
    partial: bool = False
    cut_at_limit: bool = False  # stopped by its output limit
    output_limit: int | None = None  # the limit it was cut at, in tokens
    kind: str = "answer"
    length_cause: str | None = None  # CAT-12: "context_filled" when the server's window, not the limit, ended it
    answer_tokens: int | None = None
    seq: int | None = field(default=None, compare=False)  # its record, for the pin control (CTX-50)

    @property
    def limit_note(self) -> str:
        return output_limit_note(self.output_limit, cause=self.length_cause, answer_tokens=self.answer_tokens)


@dataclass
class Thinking:
    text: str
    kind: str = "thinking"


@dataclass
class Step:
    """One tool call and, once it came, its result."""

    call_id: str
    name: str
    arguments: str
    status: str | None = None
    result: str = ""
    result_omitted: int = 0
    duration_ms: int | None = None
    images: list[str] = field(default_factory=list)  # data URLs of the result's images (TOOL-4)
    kind: str = "step"
    seq: int | None = field(default=None, compare=False)  # the result's record, for the pin control (CTX-50)
    folded_seq: int | None = None  # CTX-47: the record of a result a compaction folded for the model
    label: str = ""  # what the chat calls the tool (``web.tool_labels``); its wire name when empty
    approval: str = ""  # TOOL-9: what was decided when the call asked (``web.approval_cards``)
    words: str = ""  # MEM-4: a memory call in words ("Saved to memory: …", ``web.memory_words``)

    @property
    def shown_name(self) -> str:
        return self.words or self.label or self.name

    @property
    def status_label(self) -> str:
        return STEP_STATUS_LABELS.get(self.status, self.status or "no result")

    @property
    def status_class(self) -> str:
        return self.status or "none"

    @property
    def duration_label(self) -> str:  # a denied call never ran: no time to show (TOOL-9)
        return "" if self.status == "denied" else duration_label(self.duration_ms)


@dataclass
class Notice:
    text: str
    tone: str = "quiet"  # "quiet" | "stopped"
    kind: str = "notice"
    cut_at_limit: bool = False  # the output limit came before any text


@dataclass
class Summary:
    """Where earlier messages were summarized: the summary the model reads from here on,
    which is the person's own data and opens from the marker. Kind ``folded``: a compaction
    that only folded older tool results (CTX-47); ``text`` says so."""

    text: str
    kind: str = "summary"
    # CTX-50: pinned messages (record seqs) this compaction summarized for lack of room.
    pins_summarized: list[int] = field(default_factory=list)
    folded: int = 0  # CTX-47: tool results folded to notes at the same compaction, before the summary
    seq: int = field(default=0, compare=False)  # of its record: what an undo names (CTX-51, ``web.undone``)
    by_code: bool = False  # CTX-48: written by the platform from the records, not by the model


@dataclass
class PlanStep:
    step: str
    status: str

    @property
    def status_label(self) -> str:
        return PLAN_STATUS_LABELS.get(self.status, self.status)


@dataclass
class ErrorBox:
    code: str
    title: str
    hint: str
    message: str
    kind: str = "error"
    resolved: bool = field(default=False, init=False)  # resumed, then answered: settled, not a live error


@dataclass
class RunView:
    run: Run
    items: list[Any] = field(default_factory=list)
    live: bool = False
    resumable: bool = False
    continuable: bool = False  # the session's latest run, its answer cut at the output limit
    last_seq: int = 0
    plan: list[PlanStep] = field(default_factory=list)
    supplements: dict[str, str] = field(default_factory=dict)  # a working run's, by id
    approvals: list[Any] = field(default_factory=list)  # a waiting run's calls (web.approval_cards)

    @property
    def asks_again(self) -> bool:
        """Resuming sends the same question once more (its error's code says so: the button
        reads "Ask again")."""
        code = RunErrorCode.find(str((self.run.error or {}).get("code") or ""))
        return code is not None and code.asks_again

    @property
    def plan_done(self) -> int:
        return sum(step.status == "done" for step in self.plan)


def _clip(text: str, limit: int) -> tuple[str, int]:
    if len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def run_is_continuable(run: Run, items: list[Any]) -> bool:
    """Mirrors ``answer_was_cut`` (sessions.services.questions): completed, and its last
    item is an answer (or the note of one) that the output limit cut."""
    return run.status == Run.Status.COMPLETED and bool(items) and bool(getattr(items[-1], "cut_at_limit", False))


def run_is_resumable(run: Run) -> bool:
    """Mirrors the resume service's rule (RUN-4): stopped, interrupted, or failed for a reason a retry can fix."""
    if run.status in (Run.Status.CANCELLED, Run.Status.INTERRUPTED):
        return True
    return run.status == Run.Status.FAILED and (run.error or {}).get("retryable") is not False


def _status_item(message: dict[str, Any]) -> Notice | ErrorBox | None:
    status = message.get("status")
    if status == Run.Status.CANCELLED:
        return Notice("You stopped this answer.", tone="stopped")
    if status == Run.Status.INTERRUPTED:
        return Notice("This run was interrupted: the worker running it stopped. Nothing is lost; resume to continue.",
                      tone="stopped")
    if status == Run.Status.FAILED:
        return ErrorBox(**error_explain(message.get("error")))
    if status == "resumed":
        return Notice(RESUMED_NOTICE)
    return None


def _stopped_once(items: list[Any]) -> None:
    """A stopped answer says so once, in the notice that follows it: not also under the text."""
    for item in reversed(items):
        if isinstance(item, Answer):
            item.partial = False
            return
        if not isinstance(item, (Thinking, Step)):
            return


def _spent_newest_first(records: list[SessionMessage], budget: RenderBudget) -> dict[tuple[int, str], str]:
    """What each text of ``records`` shows within the page's budget, decided from the newest
    record back (the end of the page is what a person reads): keyed by (index, part)."""
    shown: dict[tuple[int, str], str] = {}
    for index in range(len(records) - 1, -1, -1):
        record = records[index]
        message = record.message if isinstance(record.message, dict) else {}
        if record.kind in ("user", "supplement"):
            shown[(index, "text")] = budget.text_with_note(content_text(message.get("content")))
        elif record.kind == "assistant":
            text = content_text(message.get("content"))
            if text.strip():
                shown[(index, "html")] = budget.answer_html(text)
            reasoning = message.get("reasoning")
            if isinstance(reasoning, str) and reasoning.strip():
                shown[(index, "reasoning")] = budget.text_with_note(reasoning)
        elif record.kind == "compaction_summary":
            shown[(index, "summary")] = budget.text_with_note(content_text(message.get("summary")))
    return shown


def items_from_records(records: Iterable[SessionMessage], *, durations: dict[str, int] | None = None,
                       budget: RenderBudget | None = None, folded: set[int] | None = None) -> list[Any]:
    """A finished run's main-instance records → display items, in record order. Their texts
    spend ``budget`` (the page's; a fresh one when none is given), newest first; a step whose
    result's seq is in ``folded`` (CTX-47; by default the records' own folds) is marked."""
    durations = durations or {}
    records = list(records)
    folded = folded_seqs(records) if folded is None else folded
    shown = _spent_newest_first(records, budget or RenderBudget())
    items: list[Any] = []
    steps: dict[str, Step] = {}
    ended = None
    for index, record in enumerate(records):
        message = record.message if isinstance(record.message, dict) else {}
        kind = record.kind
        if kind in ("user", "supplement"):
            items.append(Bubble(kind=kind, text=shown[(index, "text")], attachments=attachment_views(message),
                                seq=getattr(record, "seq", None)))
        elif kind == "assistant":
            if (index, "reasoning") in shown:
                items.append(Thinking(shown[(index, "reasoning")]))
            text = content_text(message.get("content"))
            at_limit = message.get("finish_reason") == "length"
            if text.strip():
                items.append(Answer(html=shown[(index, "html")], partial=bool(message.get("partial")),
                                    cut_at_limit=at_limit, output_limit=message.get("output_limit"),
                                    length_cause=message.get("length_cause"),
                                    answer_tokens=message.get("answer_tokens"), seq=getattr(record, "seq", None)))
            elif at_limit and not message.get("tool_calls"):  # the limit came before any text
                items.append(Notice(output_limit_note(message.get("output_limit"), cause=message.get("length_cause"),
                                                      answer_tokens=message.get("answer_tokens")),
                                    tone="stopped", cut_at_limit=True))
            for call in message.get("tool_calls") or []:
                if not isinstance(call, dict):
                    continue
                function = call.get("function")
                if not isinstance(function, dict):
                    function = {}
                call_id = str(call.get("id", ""))
                arguments, _ = _clip(arguments_pretty(function.get("arguments", "")), ARGUMENTS_PREVIEW_CHARS)
                name = str(function.get("name", "tool"))
                step = Step(call_id=call_id, name=name, arguments=arguments, duration_ms=durations.get(call_id),
                            words=memory_step_words(name, function.get("arguments", "")))
                steps[call_id] = step
                items.append(step)
        elif kind in ("tool_result", "delegation_result"):
            call_id = str(message.get("tool_call_id", ""))
            found = steps.get(call_id)
            if found is not None:
                step = found
            else:  # a result whose call is outside this run's records (e.g. resolved on resume)
                step = Step(call_id=call_id, name=str(message.get("name", "tool")), arguments="",
                            duration_ms=durations.get(call_id))
                steps[call_id] = step
                items.append(step)
            step.status = message.get("status") or "ok"
            step.seq = getattr(record, "seq", None)
            step.result, step.result_omitted = _clip(content_text(message.get("content"), image=""),
                                                     RESULT_PREVIEW_CHARS)
            step.images = result_images(message.get("content"))
            if folded and record.seq in folded:
                step.folded_seq = record.seq
        elif kind == "run_status":
            ended = message.get("status")
            item = _status_item(message)
            if item is not None:
                if message.get("status") == Run.Status.CANCELLED:
                    _stopped_once(items)
                items.append(item)
        elif kind == "compaction":
            items.append(Notice(COMPACTED_NOTICE))
        elif kind == "compaction_summary":
            count = folded_count(message)  # CTX-47: results folded, then summarized or not
            metrics = message.get("metrics")  # CTX-50: pins left out for lack of room
            left_out = [seq for seq in ((metrics.get("pins_summarized_seqs") if isinstance(metrics, dict) else None)
                                        or []) if isinstance(seq, int)]
            # A compaction that only folded (CTX-47) is a marker too: the chat can undo it (CTX-51).
            items.append(Summary(FOLDED_NOTICE, kind="folded", folded=count, seq=record.seq)
                         if count and not message.get("summary") else
                         Summary(shown[(index, "summary")], folded=count, seq=record.seq,
                                 pins_summarized=left_out, by_code=summary_by_code(message)))
        # Everything else (metadata kinds) is not part of the chat.
    if ended == Run.Status.COMPLETED:
        _errors_resolved(items)
    return items


def _errors_resolved(items: list[Any]) -> None:
    """A run that failed, was resumed and then answered: its earlier errors are over. Each
    says so (and the "Resumed." right after it, which it now says, is left out)."""
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if not isinstance(item, ErrorBox):
            continue
        item.resolved = True
        following = items[index + 1] if index + 1 < len(items) else None
        if isinstance(following, Notice) and following.text == RESUMED_NOTICE:
            del items[index + 1]


def steps_labelled(items: Iterable[Any], labels: Mapping[str, str]) -> None:
    """Each step named as the chat names its tool: ``server · tool`` for the version's server
    tools (``labels``, from what it froze), a built-in by its own name."""
    for item in items:
        if isinstance(item, Step):
            item.label = tool_label(item.name, labels)


def plan_steps(steps: Iterable[dict[str, Any]]) -> list[PlanStep]:
    """The agent's plan (``update_plan``) as the chat lists it."""
    return [PlanStep(step=str(s.get("step", "")), status=str(s.get("status", "pending"))) for s in steps]


def items_written(records: Iterable[SessionMessage]) -> list[Bubble]:
    """The question of a run that is still working, shown above its live area."""
    return [Bubble(kind=r.kind, text=content_text((r.message or {}).get("content")),
                   attachments=attachment_views(r.message), seq=getattr(r, "seq", None))
            for r in records if r.kind == "user"]


def supplements_written(records: Iterable[SessionMessage], *,
                        queued: Iterable[dict[str, Any]] = ()) -> dict[str, str]:
    """The supplements of a run that is still working, by id: taken into its records
    (``supplement-<id>``) or still queued. The browser places each where its run's events
    say it arrived (``supplement_received``), after the step that was answering then —
    where the records put it, which is where the model read it (RUN-5)."""
    written = {str(r.entry_key).removeprefix("supplement-"): content_text((r.message or {}).get("content"))
               for r in records if r.kind == "supplement"}
    written.update({str(item.get("id", "")): str(item.get("content", "")) for item in queued})
    return written
