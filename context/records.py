"""The record format of SPEC §3 and the small helpers every projector stage shares.

A *record* is a plain dict ``{"seq", "run", "instance", "kind", "message", ...}``; its
``message`` follows the OpenAI chat-completions shapes. Nothing here touches a database:
records come in as data and the engine never changes them (CTX-1).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any

# Kinds that become chat messages. Everything else -- including kinds added later that
# nobody taught the projector about -- projects to nothing, because metadata must never
# gain a chat role merely because it was saved (SPEC §3).
USER = "user"
SUPPLEMENT = "supplement"
ASSISTANT = "assistant"
TOOL_RESULT = "tool_result"
DELEGATION_RESULT = "delegation_result"
COMMAND = "command"
COMPACTION = "compaction"
RUN_STATUS = "run_status"
# A run_status record with this status reopens its run: a resumed run (RUN-4, RUN-6)
# continues, so results written after it answer the calls the run left pending, instead
# of reading as late results of a run that had ended (CTX-4).
RUN_REOPENED = "resumed"

METADATA_KINDS = frozenset(
    {"run_status", "model_change", "label", "extension_state", "context", "compaction_summary",
     "compaction_undone",  # CTX-51: who undid which compaction, for the chat's marker
     "pin"}  # CTX-50: who pinned or unpinned which message
)
RESULT_KINDS = frozenset({TOOL_RESULT, DELEGATION_RESULT})

CHAT_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_DECODER = json.JSONDecoder()
RESULT_STATUSES = frozenset({"ok", "error", "cancelled", "timeout", "unknown", "denied"})  # denied: TOOL-9

# Texts the model reads. They are plain language on purpose: the model must understand
# them without knowing anything about the platform.
SUPPLEMENT_PREFIX = "[Supplement: the user sent this while the previous request was running]\n"
INTERRUPTED_SUFFIX = "\n\n[interrupted: this response was cut off before it finished]"
EMPTY_RESULT_TEXT = "(the tool returned no output)"
UNKNOWN_OUTCOME_TEXT = (
    "[unknown outcome] No result was recorded for this call: the run that made it ended "
    "before the tool reported back. The action may or may not have happened. Do not assume "
    "it succeeded; check the actual state before relying on it or repeating it."
)
LATE_RESULT_HEADER = (
    "[late tool result] The result of the earlier call {call_id} ({name}) arrived after its "
    "run had ended (record seq {seq}, status {status}). The call above is still marked "
    "unknown; this is what the tool reported afterwards:"
)
COMMAND_HEADER = "[Command run by the user]"
# LOOP-7: the result of a call the person's Stop kept from starting (it did not run); the
# artifact ledger reads it as ``denied`` (CTX-49).
NOT_STARTED_TEXT = "[cancelled] The user stopped the run before this tool started; it did not run."
UNKNOWN_STATUS_LINE = "[tool status: unknown]"  # how a result recorded with status unknown opens


def is_role(value: Any) -> bool:
    """True for a chat role the engine knows (and never raises on unhashable junk)."""
    return isinstance(value, str) and value in CHAT_ROLES


def is_text_part(part: Any) -> bool:
    """Return True for an OpenAI ``{"type": "text", "text": str}`` content part."""
    return isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)


def is_image_part(part: Any) -> bool:
    """Return True for an OpenAI ``image_url`` content part (a data URL or a link)."""
    return isinstance(part, dict) and part.get("type") == "image_url"


def content_text(content: Any, *, image: str | Callable[[dict[str, Any]], str] = "[image]",
                 separator: str = "\n") -> str:
    """The readable text of an OpenAI-style ``content``: a string as it is; of a part list,
    the text parts in order, each image as ``image`` (a note, or a function of the part
    that writes one) and any other part as ``[its type]``, joined by ``separator``.

    The one place content becomes text: the summarizer's input, the completion check's
    evidence, ``read_record``, the demo model, the chat transcript and the console all
    read it through here.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False, default=str)
    pieces: list[str] = []
    for part in content:
        if is_text_part(part):
            pieces.append(part["text"])
        elif is_image_part(part):
            pieces.append(image(part) if callable(image) else image)
        elif isinstance(part, dict):
            pieces.append(f"[{part.get('type', 'part')}]")
        elif isinstance(part, str):
            pieces.append(part)
    return separator.join(pieces)


def copy_part(part: Mapping[str, Any]) -> dict[str, Any]:
    """Copy a content part so the output never aliases record dicts (strings are shared:
    they are immutable, and copying a screenshot's data URL would be pure waste)."""
    return {k: copy.deepcopy(v) if isinstance(v, (dict, list)) else v for k, v in part.items()}


def normalize_content(content: Any) -> str | list[dict[str, Any]] | None:
    """Return message content as a string, a fresh list of known parts, or None.

    Unknown part types (audio, files, provider extensions) become a short text note: the
    model is told something was there rather than the request carrying a part that some
    provider would reject.
    """
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    parts: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, str):
            parts.append({"type": "text", "text": part})
        elif is_text_part(part) or is_image_part(part):
            parts.append(copy_part(part))
        elif isinstance(part, dict):
            parts.append({"type": "text", "text": f"[unsupported content part: {part.get('type')}]"})
    return parts


def content_is_empty(content: str | list[dict[str, Any]] | None) -> bool:
    """True when content carries no text (ignoring whitespace) and no image."""
    if content is None:
        return True
    if isinstance(content, str):
        return not content.strip()
    return not any(is_image_part(p) or (is_text_part(p) and p["text"].strip()) for p in content)


def prefix_content(content: str | list[dict[str, Any]], prefix: str) -> str | list[dict[str, Any]]:
    """Put ``prefix`` before the content, keeping the content's shape."""
    if isinstance(content, str):
        return prefix + content
    return [{"type": "text", "text": prefix.rstrip("\n")}, *content]


def shows_unknown_outcome(message: Mapping[str, Any]) -> bool:
    """True for a view's tool message that says its call's outcome is unknown: the CTX-3
    placeholder, or a result recorded with status ``unknown`` (RUN-6), whose first line the
    projector renders as ``[tool status: unknown]``."""
    if message.get("role") != "tool":
        return False
    content = message.get("content")
    if isinstance(content, str):
        return content == UNKNOWN_OUTCOME_TEXT or content.startswith(UNKNOWN_STATUS_LINE + "\n")
    return bool(isinstance(content, list) and content and is_text_part(content[0])
                and content[0]["text"] == UNKNOWN_STATUS_LINE)


def suffix_content(content: str | list[dict[str, Any]] | None, suffix: str) -> str | list[dict[str, Any]]:
    """Put ``suffix`` after the content, keeping the content's shape."""
    if content is None:
        return suffix.lstrip("\n")
    if isinstance(content, str):
        return content + suffix
    return [*content, {"type": "text", "text": suffix.lstrip("\n")}]


def parse_arguments(raw: Any) -> tuple[str, bool]:
    """Return ``(arguments_json, is_object)`` for a call's ``function.arguments``.

    Providers send arguments as a JSON string; some importers store the parsed object. A
    string that is not a JSON object is reported so the caller can decide (CTX-6).
    """
    if isinstance(raw, dict):
        return json.dumps(raw, ensure_ascii=False), True
    if raw is None:
        return "", False
    if not isinstance(raw, str):
        return json.dumps(raw, ensure_ascii=False), False
    text = raw if raw[:1] == "{" else raw.lstrip()
    if text[:1] != "{":
        return raw, False  # only an object is acceptable, and an object starts with "{"
    try:
        value, end = _DECODER.raw_decode(text)
    except (ValueError, RecursionError):
        # Nesting deeper than the decoder can follow ("{"a": [[[[…") is not arguments any
        # tool can take; it is wrapped like any other malformed JSON instead of stopping the
        # projection of the whole session at every step.
        return raw, False
    return raw, isinstance(value, dict) and (end == len(text) or text[end:].isspace())


def wrap_invalid_arguments(raw: str) -> str:
    """The JSON object that stands in for arguments the model got wrong (CTX-6)."""
    return json.dumps({"invalid_json_arguments": raw}, ensure_ascii=False)


def is_valid_chat_message(message: Any) -> bool:
    """Structural check for a message stored inside a checkpoint or a starting view.

    A checkpoint replaces history, so it is trusted only when every message in it has a
    known role and content and calls of the right types (CTX-9).
    """
    if not isinstance(message, dict) or not is_role(message.get("role")):
        return False
    content = message.get("content")
    if content is not None and not isinstance(content, (str, list)):
        return False
    if isinstance(content, list) and not all(isinstance(p, (dict, str)) for p in content):
        return False
    calls = message.get("tool_calls")
    if calls is not None:
        if message["role"] != "assistant" or not isinstance(calls, list):
            return False
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                return False
    if message["role"] == "tool" and not isinstance(message.get("tool_call_id"), str):
        return False
    return True


def checkpoint_messages(record: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """Return a compaction record's messages when it is a usable checkpoint, else None.

    Usable means: ``message.messages`` is a list of well-formed chat messages and
    ``message.covered_seq`` is an integer below the record's own seq. Anything else is
    malformed and is ignored rather than trusted, because trusting it would silently
    replace real history with garbage.
    """
    message = record.get("message")
    if not isinstance(message, dict):
        return None
    messages = message.get("messages")
    covered = message.get("covered_seq")
    seq = record.get("seq")
    if not isinstance(messages, list) or not all(is_valid_chat_message(m) for m in messages):
        return None
    if isinstance(covered, bool) or not isinstance(covered, int) or covered < 0:
        return None
    if isinstance(seq, int) and not isinstance(seq, bool) and covered >= seq:
        return None
    return messages
