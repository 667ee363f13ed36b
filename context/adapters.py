"""CTX-11: from the projected OpenAI-shaped list to one provider's request body.

Each adapter works on its own copy of every message (nested content parts and call
blocks are shared, never changed in place: a rule that changes content builds a new
list), applies that provider's rules, and the result is
checked with validate_request in that provider's mode before it is returned: a body this
module hands out has passed CTX-10, and one that would not is an error, never a request.

Dialects (``ProviderSpec.dialect`` says which one a provider speaks): ``openai``
(chat completions: OpenAI and every compatible server — Ollama, vLLM, llama.cpp, LM
Studio, OpenRouter), ``deepseek`` (reasoning_content and same-role merging) and
``anthropic`` (an OpenAI-shaped body whose messages follow Anthropic's turn rules). The
output-limit field is the provider's (``ProviderSpec.output_limit_field``), passed in.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from context.attachments import image_note
from context.kept import same_until
from context.records import EMPTY_RESULT_TEXT, is_image_part, is_text_part
from context.validate import Problem, RequestValidator, check_dialect

IMAGE_UNSUPPORTED_NOTE = "[image omitted: this model cannot read images]"
CONTINUE_NOTE = "[Continue from where the conversation left off.]"
HISTORY_START_NOTE = "[The conversation history below starts with an assistant turn.]"
SYSTEM_NOTE_PREFIX = "[System note]\n"


class RequestValidationError(ValueError):
    """A built request failed CTX-10. It is a bug: log ``problems`` and fail the run."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        summary = "; ".join(f"#{p.index} {p.rule}: {p.message}" for p in problems[:5])
        super().__init__(f"request failed validation ({len(problems)} problems): {summary}")


def _images_to_notes(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every image as a note; an attached file's image and its label (RUN-13) as one note
    naming the file."""
    out: list[dict[str, Any]] = []
    for part in content:
        if not is_image_part(part):
            out.append(part)
            continue
        named = image_note(out[-1]["text"]) if out and is_text_part(out[-1]) else None
        if named is not None:
            out[-1] = {"type": "text", "text": named}
        else:
            out.append({"type": "text", "text": IMAGE_UNSUPPORTED_NOTE})
    return out


def _place_images(messages: list[dict[str, Any]], images_ok: bool) -> list[dict[str, Any]]:
    """Tool messages may carry text only, so their images move to a user message placed
    right after the tool group; for a text-only model every image becomes a note."""
    out: list[dict[str, Any]] = []
    held: list[tuple[str, list[dict[str, Any]]]] = []

    def flush() -> None:
        """Emit the held images as one user message after the tool group."""
        if held:
            parts: list[dict[str, Any]] = []
            for call_id, images in held:
                parts.append({"type": "text", "text": f"Images returned by tool call {call_id}:"})
                parts.extend(images)
            out.append({"role": "user", "content": parts})
            held.clear()

    for message in messages:
        content = message.get("content")
        if message["role"] != "tool":
            flush()
            if not images_ok and isinstance(content, list):
                message["content"] = _images_to_notes(content)
        elif isinstance(content, list) and any(is_image_part(p) for p in content):
            if images_ok:
                images = [p for p in content if is_image_part(p)]
                text = [p for p in content if not is_image_part(p)]
                text.append({"type": "text", "text": f"[{len(images)} image(s) attached in the next user message]"})
                held.append((message["tool_call_id"], images))
                message["content"] = text
            else:
                message["content"] = _images_to_notes(content)
        out.append(message)
    flush()
    return out


def _reasoning(messages: list[dict[str, Any]], mode: str, thinking: bool) -> None:
    """DeepSeek thinking mode needs reasoning_content back on every assistant message that
    made tool calls (empty when there was none); plain answers may drop it. Everyone else
    gets no reasoning at all: opaque thinking blocks are passed back byte-identical or not
    at all, and this OpenAI-shaped transport cannot carry them byte-identical."""
    for message in messages:
        message.pop("reasoning", None)
        if mode == "deepseek" and thinking and message["role"] == "assistant" and message.get("tool_calls"):
            if not isinstance(message.get("reasoning_content"), str):
                message["reasoning_content"] = ""
        else:
            message.pop("reasoning_content", None)


def _as_parts(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def _join(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, str) and isinstance(b, str):
        return f"{a}\n\n{b}"
    return _as_parts(a) + _as_parts(b)


def _merge_runs(messages: list[dict[str, Any]], roles: frozenset[str]) -> list[dict[str, Any]]:
    """Merge consecutive messages of the same role (for ``roles``). An assistant message
    with tool calls is never merged into, since its results must follow it directly."""
    out: list[dict[str, Any]] = []
    for message in messages:
        previous = out[-1] if out else None
        role = message["role"]
        if previous is not None and previous["role"] == role and role in roles and not previous.get("tool_calls"):
            merged = dict(message)
            merged["content"] = _join(previous.get("content"), message.get("content"))
            out[-1] = merged
        else:
            out.append(message)
    return out


def _drop_blank_text(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Remove whitespace-only text; a message left empty goes, except a tool result,
    which must stay to answer its call and says it was empty instead."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str) and not content.strip():
            content = None
        elif isinstance(content, list):
            content = [p for p in content if not (is_text_part(p) and not p["text"].strip())] or None
        elif content is not None and not isinstance(content, str):
            content = None
        if content is None and message["role"] == "tool":
            content = EMPTY_RESULT_TEXT
        message["content"] = content
        if content is None and not message.get("tool_calls"):
            continue  # nothing left to send
        out.append(message)
    return out


def _anthropic(messages: list[dict[str, Any]], continuing: bool = False) -> list[dict[str, Any]]:
    """System text only at the start, a user turn first, no two assistant turns in a row.
    ``continuing``: these messages follow a turn already adapted (no start rules)."""
    out: list[dict[str, Any]] = []
    leading = not continuing
    for message in messages:
        if message["role"] in ("system", "developer"):
            if not leading:
                message = {"role": "user", "content": _join(SYSTEM_NOTE_PREFIX.rstrip("\n"), message.get("content"))}
        else:
            leading = False
        out.append(message)
    first = next((i for i, m in enumerate(out) if m["role"] not in ("system", "developer")), None)
    if first is not None and out[first]["role"] != "user" and not continuing:
        out.insert(first, {"role": "user", "content": HISTORY_START_NOTE})
    return _merge_runs(out, frozenset({"assistant"}))


def _flatten(messages: list[dict[str, Any]]) -> None:
    # Several servers accept content arrays only on user messages; a text-only list says
    # the same thing as its joined text.
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and all(is_text_part(p) for p in content):
            message["content"] = "\n".join(p["text"] for p in content) if content else None


def string_contents(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` as servers that render them through a chat template read them (issue #45).

    llama-cpp-python's server answers **500** to an assistant turn whose ``content`` is
    null (the turn that only calls tools, OpenAI's own form), to the ``developer`` role
    and to a list of parts outside a user turn: its templates concatenate strings and know
    the classic roles only. Such a turn is sent with ``""``, ``developer`` as ``system``, a
    text-only list as its joined text (a list with images stays: only a user turn carries
    one, and that the servers read). New dicts where something changes; the others are
    the caller's own objects (read-only, as everywhere in this module)."""
    return [string_message(message) for message in messages]


def string_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """One message of ``string_contents``: a new dict if it changes, else ``message`` itself,
    so the identity checks of the steps after it (estimates, call log) still hold."""
    content = message.get("content")
    changed: dict[str, Any] = {}
    if content is None:
        changed["content"] = ""
    elif isinstance(content, list) and all(is_text_part(p) for p in content):
        changed["content"] = "\n".join(p["text"] for p in content)
    if message.get("role") == "developer":
        changed["role"] = "system"
    if not changed and isinstance(message, dict):
        return message
    return {**message, **changed}


def adapt_messages(
    messages: Sequence[Mapping[str, Any]],
    *,
    dialect: str,
    supports_images: bool | None = None,
    thinking: bool = False,
) -> list[dict[str, Any]]:
    """Return new messages following ``dialect``'s rules (CTX-11); ``messages`` are left
    as they were, and their parts are shared with the result (treat both as read-only).

    ``supports_images`` None means the provider's default: DeepSeek models read text
    only, the others are assumed to read images. The result never ends on an assistant
    turn: a short continuation note is added when the history does.
    """
    mode = check_dialect(dialect)
    images_ok = supports_images if supports_images is not None else mode != "deepseek"
    out = adapt_rules(messages, mode, images_ok, thinking)
    if out and out[-1]["role"] == "assistant":
        out.append({"role": "user", "content": CONTINUE_NOTE})
    return out


def adapt_rules(messages: Sequence[Mapping[str, Any]], mode: str, images_ok: bool, thinking: bool,
           continuing: bool = False) -> list[dict[str, Any]]:
    """Every rule of ``adapt_messages`` but the closing continuation note; ``continuing``
    says the messages follow others already adapted (``RequestBuilder``)."""
    # A copy of each message, not of everything in it: no rule below changes a part or a
    # call block in place, and deep-copying the whole history made each step cost O(n).
    out = _place_images([dict(m) for m in messages], images_ok)
    _reasoning(out, mode, thinking)
    out = _drop_blank_text(out)
    if mode == "anthropic":
        out = _anthropic(out, continuing)
    elif mode == "deepseek":
        out = _merge_runs(out, frozenset({"system", "user", "assistant"}))
    _flatten(out)
    return out


def build_request_body(
    messages: Sequence[Mapping[str, Any]],
    *,
    dialect: str,
    model: str,
    max_output_tokens: int,
    output_limit_field: str = "max_tokens",
    tools: Sequence[Mapping[str, Any]] | None = None,
    stream: bool = True,
    supports_images: bool | None = None,
    thinking: bool = False,
    stream_usage: bool = True,
) -> dict[str, Any]:
    """Build a chat-completions request body in ``dialect`` from projected messages, with
    the output limit in the provider's ``output_limit_field`` (CTX-11). ``stream_usage``
    asks for usage in a stream's last chunk (``ProviderSpec.stream_usage_option``): the
    body says so itself, so the call log holds what the provider received.

    Raises RequestValidationError when the result would break CTX-10 (nothing invalid is
    ever returned for sending) and ValueError for an unknown dialect or a bad limit.
    DeepSeek reasoner models are always in thinking mode.
    """
    return RequestBuilder().build(messages, dialect=dialect, model=model, max_output_tokens=max_output_tokens,
                                  output_limit_field=output_limit_field, tools=tools, stream=stream,
                                  supports_images=supports_images, thinking=thinking, stream_usage=stream_usage)


class RequestBuilder:
    """``build_request_body`` for the successive requests of one conversation: when a
    request's messages extend the previous request's (the same message objects, then new
    ones), only the new ones are adapted and validated (LOOP-1: a step costs what is new).

    The result is always ``build_request_body``'s (a property test holds them equal): the
    new messages are adapted on their own only where no rule reaches across the seam — the
    first new message is no tool result (its images would join the held ones), the
    messages either side of the seam have different roles (nothing merges), and for the
    ``anthropic`` rules a turn other than system text came before. Otherwise, or when
    the options change, everything is built afresh. The first message (the system text,
    rebuilt every step) is compared by value, the rest by identity: the caller treats the
    messages it passes as read-only, as the projector's output is.

    With ``string_contents`` the messages kept are also the same objects as in the previous
    body, the ones ``string_message`` changed included (steps after the body — estimates,
    the call log — recognise them by identity).
    """

    def __init__(self) -> None:
        self._key: tuple[Any, ...] | None = None
        self._inputs: list[Mapping[str, Any]] = []
        self._adapted: list[dict[str, Any]] = []  # without the closing continuation note
        self._validator: RequestValidator | None = None
        self._opened = False  # a turn other than system text has been adapted
        self._strung: list[dict[str, Any]] | None = None  # string_contents of _adapted, when asked
        self.reused = 0  # messages the last build took from the one before (for tests)

    def build(self, messages: Sequence[Mapping[str, Any]], *, dialect: str, model: str, max_output_tokens: int,
              output_limit_field: str = "max_tokens", tools: Sequence[Mapping[str, Any]] | None = None,
              stream: bool = True, supports_images: bool | None = None, thinking: bool = False,
              stream_usage: bool = True, string_contents: bool = False) -> dict[str, Any]:
        """The request body, as ``build_request_body`` builds it (same arguments, same errors);
        ``string_contents``: its messages passed through ``string_message`` (issue #45)."""
        mode = check_dialect(dialect)
        if isinstance(max_output_tokens, bool) or not isinstance(max_output_tokens, int) or max_output_tokens < 1:
            raise ValueError("max_output_tokens must be a positive integer")
        thinking = thinking or (mode == "deepseek" and "reasoner" in model)
        images_ok = supports_images if supports_images is not None else mode != "deepseek"
        adapted, validator = self._extend(messages, (mode, images_ok, thinking))
        if string_contents:
            kept = self._strung if self.reused and self._strung is not None else []
            self._strung = kept + [string_message(m) for m in adapted[len(kept):]]
            adapted = list(self._strung)
        else:
            self._strung = None
        if adapted and adapted[-1]["role"] == "assistant":
            adapted.append({"role": "user", "content": CONTINUE_NOTE})
            validator = validator.copy()
            validator.feed(adapted[-1:])
        problems = validator.problems()
        if problems:
            raise RequestValidationError(problems)
        body: dict[str, Any] = {"model": model, "messages": adapted}
        body[output_limit_field] = max_output_tokens
        if tools:
            body["tools"] = copy.deepcopy(list(tools))
        body["stream"] = stream
        if stream and stream_usage:
            # Usage arrives in the last chunk only when asked for; CTX-25 needs it.
            body["stream_options"] = {"include_usage": True}
        return body

    def _extend(self, messages: Sequence[Mapping[str, Any]], key: tuple[Any, ...]) -> tuple[list[dict[str, Any]],
                                                                                            RequestValidator]:
        mode, images_ok, thinking = key
        known = len(self._inputs)
        self.reused = 0
        if (key == self._key and self._validator is not None and 0 < known <= len(messages)
                and messages[0] == self._inputs[0]
                and same_until(messages, self._inputs, 1) == known):
            fresh = messages[known:]
            # The seam is checked on the input first (a tool result would join the held
            # images), then on the adapted side (nothing merges), before anything is reused.
            opens_clean = (not fresh or (isinstance(fresh[0], Mapping) and fresh[0].get("role") != "tool")) and (
                mode != "anthropic" or self._opened)
            added = adapt_rules(fresh, mode, images_ok, thinking, continuing=True) if opens_clean else []
            if opens_clean and (not added or not self._adapted or self._adapted[-1]["role"] != added[0]["role"]):
                validator = self._validator.copy()
                validator.feed(added)
                self.reused = known
                return self._remember(messages, key, self._adapted + added, validator, added)
        adapted = adapt_rules(messages, mode, images_ok, thinking)
        validator = RequestValidator(mode, thinking=thinking if mode == "deepseek" else False)
        validator.feed(adapted)
        self._opened = False
        return self._remember(messages, key, adapted, validator, adapted)

    def _remember(self, messages: Sequence[Mapping[str, Any]], key: tuple[Any, ...], adapted: list[dict[str, Any]],
                  validator: RequestValidator, added: list[dict[str, Any]]) -> tuple[list[dict[str, Any]],
                                                                                     RequestValidator]:
        self._key, self._inputs, self._adapted, self._validator = key, list(messages), adapted, validator
        self._opened = self._opened or any(m["role"] not in ("system", "developer") for m in added)
        return list(adapted), validator
