"""CTX-34, CTX-37: the messages a compacted view is made of, and its assembly (the
runtime-state block of CTX-36 is state.py's).

Every message here is a plain OpenAI-shaped ``{"role": "user", "content": str}``: no
extra keys, which strict providers reject and which the projector does not carry
through a checkpoint anyway. The continuation summary and the runtime-state block are
recognised by their fixed opening words instead (and, in ``compact()``, by coming from
no record), so the next compaction treats an earlier summary as a summary and never as
a user's task.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from context.adapters import adapt_messages
from context.validate import Problem, validate_request

CONTINUATION_HEADER = "This session is being continued from an earlier conversation that ran out of context."
_CONTINUATION_INTRO = (
    " The summary below was written by the platform from the earlier part of that conversation. It is a "
    "record of past events, not a new message from the user, and it gives no instructions.\n\n<summary>\n"
)
_SUMMARY_END = "\n</summary>\n\n"
CLOSING_WITH_ANCHOR = ("The user's current request is restated verbatim in the next message. The most recent "
                       "messages follow it verbatim. Continue the work from where it left off.")
CLOSING = "The most recent messages follow verbatim. Continue the work from where it left off."


def continuation_message(summary: str, *, restated_anchor: bool = False) -> dict[str, Any]:
    """Wrap a cleaned summary in the continuation preamble (CTX-34).

    ``restated_anchor`` says, in the closing line, that the user's current request is
    restated in the next message; ``assemble_view`` sets it to match what it places, and
    the next compaction reads it to leave that restatement out of the summarizer input
    (the summary already accounts for it).
    """
    closing = CLOSING_WITH_ANCHOR if restated_anchor else CLOSING
    return {"role": "user", "content": CONTINUATION_HEADER + _CONTINUATION_INTRO + summary + _SUMMARY_END + closing}


def is_continuation_message(message: Any) -> bool:
    """True for a message made by ``continuation_message``."""
    if not isinstance(message, Mapping) or message.get("role") != "user":
        return False
    content = message.get("content")
    return (isinstance(content, str) and content.startswith(CONTINUATION_HEADER + _CONTINUATION_INTRO)
            and content.endswith((_SUMMARY_END + CLOSING, _SUMMARY_END + CLOSING_WITH_ANCHOR)))


def continuation_summary(message: Mapping[str, Any]) -> str:
    """The summary inside a continuation message (``is_continuation_message`` must hold)."""
    content: str = message["content"]
    body = content[len(CONTINUATION_HEADER + _CONTINUATION_INTRO):]
    return body[: body.rindex(_SUMMARY_END)]


def restates_anchor(message: Mapping[str, Any]) -> bool:
    """True when a continuation message says the next message restates the user's request."""
    return is_continuation_message(message) and message["content"].endswith(CLOSING_WITH_ANCHOR)


def assemble_view(
    *,
    summary_message: Mapping[str, Any] | None,
    task_anchor: Mapping[str, Any] | None,
    runtime_state_message: Mapping[str, Any] | None,
    retained: Sequence[Mapping[str, Any]],
    pins: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Build a compacted view after the system message (CTX-37), as fresh copies.

    Order: continuation summary -> task anchor -> placed pins (CTX-50, ``pins.pin_message``:
    user messages that quote, so no pair is broken) -> runtime-state block -> retained groups.
    The anchor is placed only when the retained groups do not already hold an equal
    message (it would be there twice); a continuation summary's closing line is set to
    say whether the anchor follows it. The caller checks the result against CTX-10
    (``view_problems``).
    """
    place_anchor = task_anchor is not None and not any(m == task_anchor for m in retained)
    out: list[dict[str, Any]] = []
    if summary_message is not None:
        if is_continuation_message(summary_message):
            summary_message = continuation_message(continuation_summary(summary_message), restated_anchor=place_anchor)
        out.append(copy.deepcopy(dict(summary_message)))
    if place_anchor and task_anchor is not None:  # (place_anchor already says it is not None)
        out.append(copy.deepcopy(dict(task_anchor)))
    out.extend(copy.deepcopy(dict(m)) for m in pins)
    if runtime_state_message is not None:
        out.append(copy.deepcopy(dict(runtime_state_message)))
    out.extend(copy.deepcopy(dict(m)) for m in retained)
    return out


def view_problems(system: Mapping[str, Any], messages: Sequence[Mapping[str, Any]],
                  dialect: str = "openai") -> list[Problem]:
    """CTX-10 for a view: the problems of the request it becomes in ``dialect``.

    The view is adapted as ``build_request_body`` would (images moved out of tool
    messages, same-role merging for DeepSeek, …) and validated in that dialect.
    """
    adapted = adapt_messages([system, *messages], dialect=dialect)
    return validate_request(adapted, dialect)
