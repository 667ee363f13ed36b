"""CTX-11 for Anthropic's native Messages API: projected messages in, a request body out.

``build_anthropic_body(messages, model=..., max_tokens=...)`` takes the same projected,
OpenAI-shaped list every other dialect gets and returns a ``POST /v1/messages`` body:

1. **Before adapting** (on the OpenAI shapes): call ids that Anthropic would refuse
   (outside ``^[a-zA-Z0-9_-]+$``), or that an earlier group already used, are rewritten
   together with the results that answer them (CTX-5); arguments that are not a JSON
   object are wrapped in one (CTX-6); each assistant message's opaque ``reasoning`` is set
   aside so the adapter cannot drop it.
2. **The Anthropic mode of CTX-11** (``adapters.adapt_messages``): system text only at the
   start, a user turn first, blank text dropped, tool images moved into the user turn
   after the results, a continuation note when the history ends on the assistant; then
   ``validate_request(..., "anthropic")`` (CTX-10) on that OpenAI-shaped list.
3. **Native turns**: ``system`` top-level; user and assistant turns only, consecutive
   same-role messages merged into one turn; every ``tool_result`` first in the user turn
   after its ``tool_use``; images as ``base64`` (data URLs) or ``url`` image blocks; tools
   as ``{name, description, input_schema}``; ``max_tokens`` always.
4. **Thinking blocks** (an assistant message's ``reasoning`` list of signed ``thinking`` /
   ``redacted_thinking`` blocks) go back byte-identical, first in their turn, when
   ``keep_thinking`` says the same model continues; otherwise they are dropped. A list
   with anything that is not a complete signed block is dropped whole: blocks are never
   synthesized or repaired (a model only accepts its own, unmodified).
5. **Prompt caching**: at most four ``cache_control`` breakpoints on the stable prefix
   (see :func:`place_cache_breakpoints`).
6. **The native check** (``anthropic_validate.anthropic_body_problems``): a body that
   fails it raises :class:`~context.adapters.RequestValidationError`, as the other
   dialects do; nothing invalid is ever returned for sending.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from context.adapters import CONTINUE_NOTE, RequestValidationError, adapt_rules
from context.anthropic_turns import THINKING_KEY, native_tools, native_turns
from context.anthropic_validate import (
    ANTHROPIC_ID_RE,
    MAX_CACHE_BREAKPOINTS,
    TurnChecker,
)
from context.ids import is_portable_id
from context.kept import same_until
from context.records import parse_arguments, wrap_invalid_arguments
from context.validate import RequestValidator

CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}


def _fresh_id(old: str, taken: set[str]) -> str:
    """A call id Anthropic accepts, derived from ``old`` so it reads alike, unused so far."""
    stem = re.sub(r"[^a-zA-Z0-9_-]", "_", old)[:32] or "call"
    candidate, n = stem, 1
    while candidate in taken or not is_portable_id(candidate):
        n += 1
        candidate = f"{stem}_{n}"
    return candidate


def prepare_messages(messages: Sequence[Mapping[str, Any]], taken: set[str] | None = None) -> list[dict[str, Any]]:
    """Step 1: ids rewritten with their pairs, arguments made objects, reasoning set aside.

    The rewriting depends only on what comes before a message, so the same history gives
    the same ids from request to request (what a prompt cache needs). ``taken`` holds the
    ids earlier messages use (it is extended): messages that follow others already
    prepared, from a message that is no tool result, continue from it.
    """
    out: list[dict[str, Any]] = []
    taken = set() if taken is None else taken
    renamed: dict[str, list[str]] = {}  # old id -> new ids of the open group, in call order
    for message in messages:
        message = dict(message)
        role = message.get("role")
        if role != "tool":
            renamed = {}
        if role == "assistant":
            if "reasoning" in message:
                message[THINKING_KEY] = message["reasoning"]
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                message["tool_calls"] = [_prepare_call(call, taken, renamed) for call in calls]
        elif role == "tool":
            old = message.get("tool_call_id")
            queue = renamed.get(old) if isinstance(old, str) else None
            if queue:
                message["tool_call_id"] = queue.pop(0)
        out.append(message)
    return out


def _prepare_call(call: Any, taken: set[str], renamed: dict[str, list[str]]) -> Any:
    if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
        return call  # malformed: left for the validator to name
    call = dict(call)
    function = dict(call["function"])
    arguments, is_object = parse_arguments(function.get("arguments"))
    function["arguments"] = arguments if is_object else wrap_invalid_arguments(arguments)
    call["function"] = function
    old = call.get("id")
    if isinstance(old, str) and old:
        new = old if ANTHROPIC_ID_RE.fullmatch(old) and is_portable_id(old) and old not in taken \
            else _fresh_id(old, taken)
        renamed.setdefault(old, []).append(new)
        call["id"] = new
        taken.add(new)
    return call


def place_cache_breakpoints(
    *,
    system: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    turns: list[dict[str, Any]],
    summary: tuple[int, int] | None,
) -> list[dict[str, Any]]:
    """Mark at most four blocks with ``cache_control`` on the stable prefix; return the
    marked blocks of ``turns``. A marked block is a marked copy, in a copy of its turn:
    turns may share their blocks with an earlier body (``AnthropicBuilder``).

    The cache reads the longest prefix (tools → system → messages) that ends at an
    earlier breakpoint, so the marks go where the prefix stops changing:

    1. the end of tools + system (the last system block, else the last tool): stable for
       the whole session;
    2. the latest compaction summary: stable until the next compaction;
    3. the end of the conversation: the next request (this one plus the answer and the
       results) reads everything before it from the cache;
    4. the end of the previous request (the user turn before the last answer), so that a
       turn that added many blocks (parallel tool calls) still finds the previous entry:
       the cache looks back only about 20 blocks from a breakpoint.
    """
    spots: list[tuple[Any, int]] = []  # ("system" | "tools" | turn index, block index)
    if system:
        spots.append(("system", len(system) - 1))
    elif tools:
        spots.append(("tools", len(tools) - 1))
    if summary is not None:
        spots.append(summary)
    if turns:
        spots.append((len(turns) - 1, len(turns[-1]["content"]) - 1))
    if len(turns) >= 3 and turns[-3]["role"] == "user":
        spots.append((len(turns) - 3, len(turns[-3]["content"]) - 1))
    done: list[tuple[Any, int]] = []
    marked: list[dict[str, Any]] = []
    for where, index in spots:
        if len(done) == MAX_CACHE_BREAKPOINTS or (where, index) in done:
            continue
        if where == "system" or where == "tools":
            blocks = system if where == "system" else tools
        else:
            blocks = list(turns[where]["content"])
            turns[where] = {**turns[where], "content": blocks}
        if blocks[index].get("type") in ("thinking", "redacted_thinking"):
            continue  # cannot carry cache_control
        blocks[index] = {**blocks[index], "cache_control": dict(CACHE_CONTROL)}
        if blocks is not system and blocks is not tools:
            marked.append(blocks[index])
        done.append((where, index))
    return marked


def build_anthropic_body(
    messages: Sequence[Mapping[str, Any]],
    *,
    model: str,
    max_tokens: int,
    tools: Sequence[Mapping[str, Any]] | None = None,
    stream: bool = True,
    supports_images: bool | None = None,
    keep_thinking: bool = False,
    cache: bool = True,
    native_types: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A native Messages API body for ``model`` from projected OpenAI-shaped ``messages``.

    ``max_tokens`` is the connection's ``max_output_tokens`` (always sent). ``tools`` are
    OpenAI-style tool schemas. ``supports_images`` False turns images into notes.
    ``keep_thinking`` must be True only when the model that wrote the stored thinking
    blocks is the model called now (a model accepts only its own blocks). ``cache``
    places the prompt-cache breakpoints. ``native_types``: tools offered as one of
    Anthropic's own types, by name (``{"memory": "memory_20250818"}``, MEM-2).

    Raises RequestValidationError when the result would break CTX-10 (in Anthropic mode
    on the OpenAI shapes, then on the native body), ValueError for a bad ``max_tokens``.
    The caller's messages and tools are never modified.
    """
    return AnthropicBuilder().build(messages, model=model, max_tokens=max_tokens, tools=tools, stream=stream,
                                    supports_images=supports_images, keep_thinking=keep_thinking, cache=cache,
                                    native_types=native_types)


@dataclass
class _Built:
    """What a build kept of its messages (without the closing continuation note)."""

    inputs: list[Mapping[str, Any]]
    taken: set[str]  # call ids in use (step 1)
    adapted: list[dict[str, Any]]  # OpenAI shapes, Anthropic mode (step 2)
    validator: RequestValidator
    system: list[dict[str, Any]]  # native (step 3), never marked
    turns: list[dict[str, Any]]
    summary: tuple[int, int] | None
    checker: TurnChecker  # the native check of ``turns`` (step 6)


class AnthropicBuilder:
    """``build_anthropic_body`` for the successive requests of one conversation: when a
    request's messages extend the previous request's (the same message objects, then new
    ones), steps 1–3 and both checks read only the new ones (LOOP-1); the cache marks are
    placed on copies, so nothing kept is ever changed.

    The result is always ``build_anthropic_body``'s (a property test holds them equal):
    the new messages are taken on their own only where no rule reaches across the seam —
    the first new message is no tool result, a turn other than system text came before,
    and the turns either side of the seam differ in role (in both shapes: nothing merges).
    Otherwise, or when the options change, everything is built afresh. The first message
    (the system text, rebuilt every step) is compared by value, the rest by identity.
    """

    def __init__(self) -> None:
        self._key: tuple[Any, ...] | None = None
        self._kept: _Built | None = None
        self.reused = 0  # messages the last build took from the one before (for tests)

    def build(self, messages: Sequence[Mapping[str, Any]], *, model: str, max_tokens: int,
              tools: Sequence[Mapping[str, Any]] | None = None, stream: bool = True,
              supports_images: bool | None = None, keep_thinking: bool = False, cache: bool = True,
              native_types: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The body, as ``build_anthropic_body`` builds it (same arguments, same errors)."""
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError("max_tokens must be a positive integer")
        built = self._extend(messages, (supports_images, keep_thinking))
        adapted, validator, turns, checker = built.adapted, built.validator, list(built.turns), built.checker
        if adapted and adapted[-1]["role"] == "assistant":
            note = {"role": "user", "content": CONTINUE_NOTE}
            adapted = [*adapted, note]
            validator = validator.copy()
            validator.feed([note])
            _, more, _ = native_turns([note], keep_thinking=keep_thinking)
            turns.extend(more)  # after an assistant turn: a turn of its own
            checker = checker.copy()
            checker.feed(more)
        problems = validator.problems()
        if problems:
            raise RequestValidationError(problems)
        system = list(built.system)
        native = native_tools(tools, native_types)
        marks = place_cache_breakpoints(system=system, tools=native, turns=turns, summary=built.summary) \
            if cache else []
        body: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
        if system:
            body["system"] = system
        body["messages"] = turns
        if native:
            body["tools"] = native
        body["stream"] = stream
        problems = checker.problems(body, marks=marks)
        if problems:
            raise RequestValidationError(problems)
        return body

    def _extend(self, messages: Sequence[Mapping[str, Any]], key: tuple[Any, ...]) -> _Built:
        supports_images, keep_thinking = key
        kept, self.reused = self._kept, 0
        known = len(kept.inputs) if kept is not None else 0
        if (kept is not None and key == self._key and 0 < known <= len(messages)
                and messages[0] == kept.inputs[0]
                and same_until(messages, kept.inputs, 1) == known):
            fresh = messages[known:]
            if not fresh:
                self.reused = known
                return kept
            if isinstance(fresh[0], Mapping) and fresh[0].get("role") != "tool" and kept.turns:
                taken = set(kept.taken)
                added = adapt_rules(prepare_messages(fresh, taken), "anthropic", _images_ok(supports_images), False,
                               continuing=True)
                _, more, summary = native_turns(added, keep_thinking=keep_thinking)
                if (not added or kept.adapted[-1]["role"] != added[0]["role"]) and (
                        not more or kept.turns[-1]["role"] != more[0]["role"]):
                    validator, checker = kept.validator.copy(), kept.checker.copy()
                    validator.feed(added)
                    checker.feed(more)
                    if summary is not None:
                        summary = (summary[0] + len(kept.turns), summary[1])
                    self.reused = known
                    self._kept = _Built(list(messages), taken, kept.adapted + added, validator, kept.system,
                                        kept.turns + more, summary or kept.summary, checker)
                    return self._kept
        taken = set()
        adapted = adapt_rules(prepare_messages(messages, taken), "anthropic", _images_ok(supports_images), False)
        validator = RequestValidator("anthropic")
        validator.feed(adapted)
        system, turns, summary = native_turns(adapted, keep_thinking=keep_thinking)
        checker = TurnChecker()
        checker.feed(turns)
        self._key = key
        self._kept = _Built(list(messages), taken, adapted, validator, system, turns, summary, checker)
        return self._kept


def _images_ok(supports_images: bool | None) -> bool:
    return supports_images if supports_images is not None else True
