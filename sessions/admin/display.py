"""How the console shows decrypted records and model-call messages (run events: ``timeline``).

Plain Python, no Django: dict in, small frozen dataclasses out, which the templates render
(auto-escaped). Nothing here decides who may see what; the views do, and audit it.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from context.compaction.state import is_runtime_state_message
from context.records import content_text as records_content_text
from context.surrogates import json_loads_clean
from context.usage import UsageFigures, usage_figures
from sessions.admin.attachments import FileView, file_views, shortened
from sessions.admin.summary_check import CheckVerdict, check_verdict
from sessions.selectors.model_calls import SentEntry

# What a long text shows before its "Show all": enough to recognise it, small enough for
# a page of 200 records to stay readable.
HEAD_CHARS = 1_500
HEAD_LINES = 24


@dataclass(frozen=True)
class Text:
    """One piece of text, cut for display when long: ``full`` is set only when ``head`` is cut."""

    label: str
    head: str
    full: str | None
    chars: int
    mono: bool = False


@dataclass(frozen=True)
class ToolCallView:
    call_id: str
    name: str
    arguments: Text


@dataclass(frozen=True)
class MessageView:
    """A record's (or a sent message's) content, readably: role, status, texts, tool calls."""

    role: str
    kind: str
    status: str = ""
    badges: tuple[str, ...] = ()
    texts: tuple[Text, ...] = ()
    tool_calls: tuple[ToolCallView, ...] = ()
    tool_call_id: str = ""
    tool_name: str = ""
    attachments: tuple[FileView, ...] = ()  # a question's files (RUN-13)

    @property
    def kind_differs(self) -> bool:
        """Whether the record kind says more than the role ("tool" / "tool_result" does; "user" / "user" does not)."""
        return bool(self.kind) and self.kind != self.role.replace(" ", "_")


def text(value: str, *, label: str = "", mono: bool = False, head_chars: int = HEAD_CHARS,
         head_lines: int = HEAD_LINES) -> Text:
    """A Text whose head is at most ``head_chars`` characters and ``head_lines`` lines (cut on
    a line end when one is near); ``full`` keeps the whole text when the head is cut."""
    line_end = -1
    for _ in range(head_lines):
        line_end = value.find("\n", line_end + 1)
        if line_end < 0:
            break
    limit = min(head_chars, line_end) if line_end >= 0 and value[line_end + 1:].strip() else head_chars
    if len(value) <= limit:
        return Text(label=label, head=value, full=None, chars=len(value), mono=mono)
    cut = value.rfind("\n", max(0, limit - 200), limit + 1)
    head = value[: cut if cut > 0 else limit].rstrip() + " …"
    return Text(label=label, head=head, full=value, chars=len(value), mono=mono)


def as_json(value: Any) -> str:
    """Pretty JSON for people, inline data shortened; never fails (odd values are shown with ``repr``)."""
    try:
        return json.dumps(shortened(value), indent=2, ensure_ascii=False, sort_keys=False, default=repr)
    except (TypeError, ValueError):
        return repr(value)


def _image_note(part: dict[str, Any]) -> str:
    image = part.get("image_url")
    url = image.get("url", "") if isinstance(image, dict) else str(image or "")
    if url.startswith("data:"):
        media = url[5:].split(";", 1)[0] or "image"
        # base64: four characters carry three bytes
        size = len(url.split(",", 1)[-1]) * 3 // 4
        return f"[image: {media}, {size / 1024:.0f} KB inline]"
    return f"[image: {url[:200]}]" if url else "[image]"


def content_text(content: Any) -> str:
    """The text of an OpenAI-style content, images as a note of their type and size."""
    return records_content_text(content, image=_image_note)


def _arguments(raw: Any) -> Text:
    if isinstance(raw, str):
        try:
            parsed = json_loads_clean(raw)  # an escape in stored arguments would decode to a lone surrogate
        except (ValueError, RecursionError):  # nested past the decoder's depth is shown as text too
            # The model's own malformed arguments (CTX-6): show them exactly as sent.
            return text(raw, label="arguments (not JSON)", mono=True)
        return text(as_json(parsed), mono=True)
    return text(as_json(raw), mono=True)


def _tool_calls(calls: Any) -> tuple[ToolCallView, ...]:
    views = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        if not isinstance(function, dict):
            function = {}
        views.append(ToolCallView(call_id=str(call.get("id", "")), name=str(function.get("name", "?")),
                                  arguments=_arguments(function.get("arguments", ""))))
    return tuple(views)


# Keys a known message shape explains itself; anything else is listed as "other fields".
_CHAT_KEYS = {"role", "content", "tool_calls", "tool_call_id", "name", "status", "reasoning", "reasoning_content",
              "partial", "supplement", "attachments"}


def _others(message: dict[str, Any], known: set[str]) -> tuple[Text, ...]:
    rest = {key: value for key, value in message.items() if key not in known}
    return (text(as_json(rest), label="other fields", mono=True),) if rest else ()


def message_view(message: Any, *, kind: str = "") -> MessageView:
    """A record's ``message`` (SPEC §3 record kinds) or a message sent to a model, for people."""
    if not isinstance(message, dict):
        return MessageView(role=kind or "?", kind=kind, texts=(text(as_json(message), mono=True),))
    role = str(message.get("role") or kind or "?")
    kind = kind or role
    if kind == "run_status":
        texts = [text(str(message.get("reason", "")), label="reason")] if message.get("reason") else []
        if message.get("error"):
            texts.append(text(as_json(message["error"]), label="error", mono=True))
        return MessageView(role="run status", kind=kind, status=str(message.get("status", "")),
                           texts=(*texts, *_others(message, {"status", "reason", "error"})))
    if kind == "command":
        texts = [text(f"$ {message.get('command', '')}", mono=True)]
        if message.get("output"):
            texts.append(text(str(message["output"]), label="output", mono=True))
        excluded = ("excluded from the model",) if message.get("exclude") else ()
        exit_code = message.get("exit_code")
        return MessageView(role="command", kind=kind, status="" if exit_code is None else f"exit {exit_code}",
                           badges=excluded,
                           texts=(*texts, *_others(message, {"command", "output", "exit_code", "exclude"})))
    if kind == "compaction":
        messages = message.get("messages") or []
        texts = [text(str(message.get("summary", "")), label="summary")] if message.get("summary") else []
        texts.append(text(as_json(messages), label=f"view after the checkpoint ({len(messages)} messages)",
                          mono=True, head_chars=600))
        covers = (f"covers up to #{message['covered_seq']}",) if message.get("covered_seq") is not None else ()
        return MessageView(role="checkpoint", kind=kind, badges=covers,
                           texts=(*texts, *_others(message, {"messages", "summary", "covered_seq"})))
    if kind == "compaction_summary":
        texts = [text(str(message.get("summary") or ""), label="summary")]
        if message.get("metrics"):
            texts.append(text(as_json(message["metrics"]), label="metrics", mono=True, head_chars=600))
        return MessageView(role="compaction summary", kind=kind,
                           texts=(*texts, *_others(message, {"summary", "metrics"})))
    if "role" not in message and "content" not in message:
        # Metadata kinds (label, model_change, context, extension_state…): never a chat role.
        return MessageView(role=kind, kind=kind, texts=(text(as_json(message), mono=True),))

    badges: list[str] = []
    if message.get("partial"):
        badges.append("interrupted")
    if message.get("supplement") or kind == "supplement":
        badges.append("supplement")
    if is_runtime_state_message(message):  # CTX-36, CTX-49: written by the platform, not by the person
        badges.append("runtime state: by the platform")
    texts = []
    body = content_text(message.get("content"))
    if body:
        texts.append(text(body, mono=role == "tool"))
    reasoning = message.get("reasoning") or message.get("reasoning_content")
    if reasoning:
        texts.append(text(reasoning if isinstance(reasoning, str) else as_json(reasoning), label="reasoning",
                          head_chars=300))
    calls = _tool_calls(message.get("tool_calls"))
    if not body and not calls and not reasoning:
        texts.append(Text(label="", head="(empty)", full=None, chars=0))
    is_result = role == "tool"
    if message.get("name") and not is_result:
        badges.append(f"name: {message['name']}")
    return MessageView(
        role=role, kind=kind, status=str(message.get("status") or ""), badges=tuple(badges),
        texts=(*texts, *_others(message, _CHAT_KEYS)), tool_calls=calls,
        tool_call_id=str(message.get("tool_call_id") or "") if is_result else "",
        tool_name=str(message.get("name") or "") if is_result else "",
        attachments=file_views(message.get("attachments")),
    )


# --- The context inspector --------------------------------------------------------------------


@dataclass(frozen=True)
class SentMessage:
    index: int
    estimate: int | None
    view: MessageView


@dataclass(frozen=True)
class SentTool:
    name: str
    description: str
    parameters: Text


@dataclass(frozen=True)
class CallFigures:
    """CTX-25: our estimate beside the provider's own prompt count; ``usage`` splits what
    the provider billed into uncached input, cache read, cache written and output."""

    estimated: int
    prompt_tokens: int | None
    completion_tokens: int | None
    ratio: float | None
    per_message_sum: int | None
    usage: UsageFigures = UsageFigures()

    @property
    def ratio_tone(self) -> str:
        # An estimate below the real count is the dangerous side (the request may overflow).
        if self.ratio is None:
            return ""
        if self.ratio > 1.10:
            return "under"
        if self.ratio < 0.80:
            return "over"
        return "close"


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def call_figures(*, estimated: int, usage: Any, estimates: Sequence[Any]) -> CallFigures:
    usage = usage if isinstance(usage, dict) else {}
    prompt = _int_or_none(usage.get("prompt_tokens", usage.get("input_tokens")))
    completion = _int_or_none(usage.get("completion_tokens", usage.get("output_tokens")))
    numbers = [e for e in estimates if _int_or_none(e) is not None]
    ratio = prompt / estimated if prompt is not None and estimated > 0 else None
    return CallFigures(estimated=estimated, prompt_tokens=prompt, completion_tokens=completion, ratio=ratio,
                       per_message_sum=sum(numbers) if numbers else None, usage=usage_figures(usage))


def sent_messages(entries: Sequence[SentEntry]) -> list[SentMessage]:
    """Each message a model call sent with its own estimate (None when not kept, e.g.
    summary calls), in the order it was sent (``selectors.model_call_entries``)."""
    return [SentMessage(index=i, estimate=entry.estimated_tokens, view=message_view(entry.message))
            for i, entry in enumerate(entries)]


def sent_tools(schemas: Sequence[dict[str, Any]]) -> list[SentTool]:
    tools = []
    for tool in schemas:
        spec = tool.get("function", tool) if isinstance(tool, dict) else {}
        spec = spec if isinstance(spec, dict) else {}
        tools.append(SentTool(name=str(spec.get("name", "?")), description=str(spec.get("description", "")),
                              parameters=text(as_json(spec.get("parameters", {})), mono=True, head_chars=400)))
    return tools


# --- Compaction metrics (CTX-41) --------------------------------------------------------------


def metric_number(value: Any) -> int | None:
    """A figure from the metrics when it is a number (not a flag), else None."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Segment:
    index: int
    first_seq: int | None
    last_seq: int | None
    messages: int | None


def token_figure(metrics: dict[str, Any], when: str, meaning: str) -> int | None:
    """CTX-41: ``tokens_<when>_<meaning>`` (``estimated`` or ``calibrated``) of a snapshot's
    metrics. Snapshots saved before the figures had one name per meaning hold a bare
    ``tokens_<when>``: one number (whichever the engine judged then) or an
    ``{estimated, calibrated}`` pair; either still reads."""
    value = metrics.get(f"tokens_{when}_{meaning}")
    value = metrics.get(f"tokens_{when}") if value is None else value
    return metric_number(value.get(meaning, value.get("value")) if isinstance(value, dict) else value)


@dataclass(frozen=True)
class CompactionFigures:
    """A compaction's figures for the console. The token figures are calibrated — what the
    threshold and the target were compared with — beside our estimator's own count."""

    trigger: str
    tokens_before_calibrated: int | None
    tokens_after_calibrated: int | None
    tokens_before_estimated: int | None
    tokens_after_estimated: int | None
    threshold: int | None
    target: int | None
    target_reached: bool | None
    summary_calls: int | None
    retries: int | None
    summary_chars: int | None
    duration_ms: int | None
    estimator_id: str
    segments: tuple[Segment, ...] = field(default_factory=tuple)
    # CTX-47: the tiers that ran ("mask", "summary"), the results folded and what each tier removed.
    tiers: tuple[str, ...] = ()
    masked_results: int | None = None
    mask_tokens_removed: int | None = None
    summary_tokens_removed: int | None = None
    pins_kept: int | None = None  # CTX-50: pins quoted verbatim, and those summarized for lack of room
    pins_summarized: int | None = None
    verdict: CheckVerdict = CheckVerdict(None, "", ())  # CTX-48: the summary check's, and who wrote it

    @property
    def saved_percent(self) -> int | None:
        """How much smaller the view became, in percent of the tokens before."""
        before, after = self.tokens_before_calibrated, self.tokens_after_calibrated
        if before and after is not None:
            return round(100 * (1 - after / before))
        return None

    @property
    def duration_text(self) -> str:
        if self.duration_ms is None:
            return "–"
        if self.duration_ms < 1_000:
            return f"{self.duration_ms} ms"
        return f"{self.duration_ms / 1_000:.1f} s"


def compaction_figures(metrics: Any, *, estimator_id: str = "") -> CompactionFigures:
    """The CTX-41 metrics of a snapshot, tolerant of missing keys (older snapshots have fewer)."""
    m = metrics if isinstance(metrics, dict) else {}
    segments = []
    for position, raw in enumerate(m.get("segments") or []):
        raw = raw if isinstance(raw, dict) else {}
        consumed = raw.get("consumed")
        first = last = None
        if isinstance(consumed, (list, tuple)) and len(consumed) == 2:
            first, last = _int_or_none(consumed[0]), _int_or_none(consumed[1])
        index = _int_or_none(raw.get("index"))
        segments.append(Segment(index=position if index is None else index, first_seq=first, last_seq=last,
                                messages=_int_or_none(raw.get("messages"))))
    reached = m.get("target_reached")
    return CompactionFigures(
        trigger=str(m.get("trigger") or "?"),
        tokens_before_calibrated=token_figure(m, "before", "calibrated"),
        tokens_after_calibrated=token_figure(m, "after", "calibrated"),
        tokens_before_estimated=token_figure(m, "before", "estimated"),
        tokens_after_estimated=token_figure(m, "after", "estimated"),
        threshold=metric_number(m.get("threshold", m.get("trigger_tokens"))),
        target=metric_number(m.get("target", m.get("target_tokens"))),
        target_reached=reached if isinstance(reached, bool) else None,
        summary_calls=_int_or_none(m.get("summary_calls")),
        retries=_int_or_none(m.get("retries")),
        summary_chars=_int_or_none(m.get("summary_chars")),
        duration_ms=_int_or_none(m.get("duration_ms")),
        estimator_id=str(m.get("estimator_id") or estimator_id),
        segments=tuple(segments),
        # A snapshot from before CTX-47 was made by the summary tier alone.
        tiers=tuple(str(t) for t in m["tiers"]) if isinstance(m.get("tiers"), list) else ("summary",),
        masked_results=_int_or_none(m.get("masked_results")),
        mask_tokens_removed=metric_number(m.get("mask_tokens_removed")),
        summary_tokens_removed=metric_number(m.get("summary_tokens_removed")),
        pins_kept=_int_or_none(m.get("pins_kept")),
        pins_summarized=_int_or_none(m.get("pins_summarized")),
        verdict=check_verdict(m),
    )

