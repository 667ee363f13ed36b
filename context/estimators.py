"""CTX-24: token estimators with versioned ids, and a per-message estimate cache.

``tiktoken-<encoding>-v1`` counts BPE tokens. It is the exact count for OpenAI models
(o200k_base or cl100k_base by model id) and the *proxy* for every other model (o200k_base):
a real tokenizer is far closer to any other real tokenizer than a byte count is, and the
difference is corrected by calibration against the provider's own counts
(``context.calibration``, CTX-25), with a safety factor until the first count arrives.
tiktoken's two vocabularies ship inside this package (``context/vocab/``), so this works
offline on a fresh machine with nothing beside the repository.

``dense-o200k-v1`` is that proxy for models whose tokenizer is unknown: o200k_base for
ordinary text, but text a small or English-centred tokenizer splits much finer than o200k
does -- CJK and other non-Latin scripts, digits, hex, base64 -- is counted per character
class, with weights measured on the real tokenizers of self-hosted families (SmolLM2,
Gemma 3, Llama 3, Qwen2.5, Mistral, DeepSeek; ``tests/context/data/dense_counts.json``).
Without them o200k times the proxy prior under-counted CJK prose up to 3.3 times (SmolLM2
on Korean) and digit strings 2 times, enough for a first request to overflow a small
server's window.

``bytes-v1`` counts UTF-8 bytes of the JSON of each message and tool schema plus fixed
overheads. Every token covers at least one byte, so it never undercounts a BPE tokenizer;
it overcounts about four times on English text. It is the fallback when tiktoken cannot
load (one warning per encoding): estimation never crashes a run.

An estimate is only comparable with estimates of the same id: a checkpoint or view made
with another estimator is re-estimated, never trusted.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import re
import threading
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from context.dense_text import dense_runs
from context.kept import same_until
from context.records import is_image_part, is_text_part

log = logging.getLogger(__name__)

BYTES_V1 = "bytes-v1"
# The tokenizer that stands in for models whose own tokenizer is unknown (CTX-24).
PROXY_ENCODING = "o200k_base"
VOCAB_DIR = Path(__file__).resolve().parent / "vocab"
# bytes-v1 constants. They are part of the estimator's definition: changing any of them
# means a new id (bytes-v2), because stored estimates were made with these.
BYTES_MESSAGE_OVERHEAD = 16
BYTES_TOOL_OVERHEAD = 32
BYTES_REQUEST_OVERHEAD = 8
BYTES_IMAGE_UNITS = 2_048  # an image costs what the provider bills, not its base64 length

# tiktoken-*-v1 constants, after OpenAI's published chat accounting: a few tokens of
# framing per message and per call; a high-detail image tops out near 1,105 tokens.
TIKTOKEN_MESSAGE_OVERHEAD = 4
TIKTOKEN_CALL_OVERHEAD = 8
TIKTOKEN_TOOL_OVERHEAD = 8
TIKTOKEN_REQUEST_OVERHEAD = 3
TIKTOKEN_IMAGE_TOKENS = 1_105

DENSE_V1 = "dense-o200k-v1"  # its weights: context/dense_text.py

_O200K_MODELS = re.compile(r"^(gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o\d)(\b|[-.:_]|$)")
_CL100K_MODELS = re.compile(r"^(gpt-4|gpt-3\.5|gpt-35|text-embedding-3|text-embedding-ada-002)(\b|[-.:_]|$)")


class Estimator(Protocol):
    """What the budget code needs from an estimator."""

    @property
    def id(self) -> str:
        """Names the estimator (and its version): figures are comparable only under one id."""

    def message(self, message: Mapping[str, Any]) -> int:
        """Estimated units for one message."""

    def tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Estimated units for the tool schemas of a request."""

    def request(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None) -> int:
        """Estimated units for a whole request."""


def _without_images(message: Mapping[str, Any]) -> tuple[Mapping[str, Any], int]:
    content = message.get("content")
    if not isinstance(content, list) or not any(is_image_part(p) for p in content):
        return message, 0
    images = sum(1 for p in content if is_image_part(p))
    stripped = dict(message)
    stripped["content"] = [p for p in content if not is_image_part(p)]
    return stripped, images


class BytesEstimator:
    """``bytes-v1``: UTF-8 bytes of compact JSON plus fixed overheads."""

    id = BYTES_V1

    def message(self, message: Mapping[str, Any]) -> int:
        """Bytes of the message's JSON, an overhead, and a fixed amount per image."""
        stripped, images = _without_images(message)
        body = json.dumps(stripped, ensure_ascii=False, separators=(",", ":"))
        return len(body.encode("utf-8")) + BYTES_MESSAGE_OVERHEAD + images * BYTES_IMAGE_UNITS

    def tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Bytes of each tool schema's JSON plus a per-tool overhead."""
        return sum(
            len(json.dumps(t, ensure_ascii=False, separators=(",", ":")).encode("utf-8")) + BYTES_TOOL_OVERHEAD
            for t in tools
        )

    def request(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None) -> int:
        """Sum over messages and tools plus a request overhead."""
        return BYTES_REQUEST_OVERHEAD + sum(self.message(m) for m in messages) + self.tools(tools or ())


class TiktokenEstimator:
    """``tiktoken-<encoding>-v1``: BPE tokens of the text a provider would read."""

    def __init__(self, encoding: Any) -> None:
        self._encoding = encoding
        self.id = f"tiktoken-{encoding.name}-v1"

    def _count(self, text: str) -> int:
        # Text that happens to spell a special token ("<|endoftext|>") is ordinary text here.
        return len(self._encoding.encode(text, disallowed_special=()))

    def text(self, text: str) -> int:
        """Units of one text alone, without any message framing."""
        return self._count(text)

    def _content(self, content: Any) -> int:
        if content is None:
            return 0
        if isinstance(content, str):
            return self._count(content)
        total = 0
        for part in content if isinstance(content, list) else [content]:
            if is_text_part(part):
                total += self._count(part["text"])
            elif is_image_part(part):
                total += TIKTOKEN_IMAGE_TOKENS
            else:
                total += self._count(json.dumps(part, ensure_ascii=False))
        return total

    def message(self, message: Mapping[str, Any]) -> int:
        """Tokens of role, content, calls and ids plus OpenAI's per-message framing."""
        total = TIKTOKEN_MESSAGE_OVERHEAD + self._count(str(message.get("role", "")))
        total += self._content(message.get("content"))
        for key in ("name", "tool_call_id", "reasoning_content"):
            value = message.get(key)
            if isinstance(value, str):
                total += self._count(value)
        total += self._reasoning(message.get("reasoning"))
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            total += TIKTOKEN_CALL_OVERHEAD + self._count(str(call.get("id", "")))
            total += self._count(str(function.get("name", ""))) + self._count(str(function.get("arguments", "")))
        return total

    def _reasoning(self, reasoning: Any) -> int:
        # Thinking sent back (an assistant message's opaque ``reasoning``: Anthropic's signed
        # thinking blocks, or a provider's plain text) is input the model reads again: its
        # text counts, and a redacted block's encrypted data counts as the text it is.
        # Signatures are not read by the model and are not counted.
        if isinstance(reasoning, str):
            return self._count(reasoning)
        if not isinstance(reasoning, list):
            return 0
        total = 0
        for block in reasoning:
            if isinstance(block, Mapping):
                for key in ("thinking", "text", "data"):
                    value = block.get(key)
                    if isinstance(value, str):
                        total += self._count(value)
            elif isinstance(block, str):
                total += self._count(block)
        return total

    def tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of each tool schema's JSON plus a per-tool overhead."""
        return sum(self._count(json.dumps(t, ensure_ascii=False)) + TIKTOKEN_TOOL_OVERHEAD for t in tools)

    def request(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None) -> int:
        """Sum over messages and tools plus the reply priming."""
        return TIKTOKEN_REQUEST_OVERHEAD + sum(self.message(m) for m in messages) + self.tools(tools or ())


class DenseEstimator(TiktokenEstimator):
    """``dense-o200k-v1``: the proxy for an unknown tokenizer. Ordinary text is counted
    with o200k_base; dense runs (hex, base64, digits, CJK, other non-Latin scripts) by
    their characters times ``DENSE_WEIGHTS`` (``context.dense_text``). Framing and overheads are tiktoken-v1's."""

    def __init__(self, encoding: Any) -> None:
        super().__init__(encoding)
        if encoding.name != PROXY_ENCODING:
            raise ValueError(f"{DENSE_V1} counts with {PROXY_ENCODING}, not {encoding.name}")
        self.id = DENSE_V1

    def _count(self, text: str) -> int:
        plain, units = dense_runs(text, lambda part: TiktokenEstimator._count(self, part))
        if plain is None:
            return super()._count(text)  # nothing dense: exactly tiktoken's count
        # What is left is counted as one text, each dense run standing as one space, so a
        # word's tokens do not depend on where the dense runs around it were cut.
        return super()._count(" ".join(plain)) + math.ceil(units)


def encoding_for_model(model_id: str | None) -> str | None:
    """The tiktoken encoding of an OpenAI model id, or None when it is not one we know:
    o200k_base for gpt-4o, gpt-4.1, gpt-5 and o-series ids; cl100k_base for older ones."""
    if not model_id:
        return None
    model = model_id.lower()
    if _O200K_MODELS.match(model):
        return "o200k_base"
    if _CL100K_MODELS.match(model):
        return "cl100k_base"
    return None


_vocab_lock = threading.Lock()


def _load_encoding(name: str) -> Any:
    """Load an encoding from the vocabularies shipped in ``context/vocab``.

    tiktoken finds a vocabulary in the folder ``TIKTOKEN_CACHE_DIR`` names, under the
    SHA-1 of its download URL, and checks its SHA-256 before use; the shipped files are
    named that way, so pointing the variable at them for the load is all it takes, and
    nothing is ever downloaded. The variable is restored at once (under a lock: another
    thread loading at the same moment must not see it half-changed).
    """
    import tiktoken  # lazy: importing the engine must not pay for (or need) tiktoken

    with _vocab_lock:
        before = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(VOCAB_DIR)
        try:
            return tiktoken.get_encoding(name)
        finally:
            if before is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = before


_encodings: dict[str, Any] = {}
_warned: set[str] = set()


def _encoding(encoding_name: str) -> Any:
    if encoding_name not in _encodings:
        _encodings[encoding_name] = _load_encoding(encoding_name)
    return _encodings[encoding_name]


def tiktoken_estimator(encoding_name: str) -> TiktokenEstimator:
    """A tiktoken estimator for ``encoding_name``; raises if the vocabulary cannot load."""
    return TiktokenEstimator(_encoding(encoding_name))


def dense_estimator() -> DenseEstimator:
    """``dense-o200k-v1``; raises if o200k_base's vocabulary cannot load."""
    return DenseEstimator(_encoding(PROXY_ENCODING))


def get_estimator(model_id: str | None = None, *, exact_tokenizer: bool = True) -> Estimator:
    """The estimator for a model: the tokenizer its id names when the provider counts
    with it (``exact_tokenizer``, OpenAI), else the proxy ``dense-o200k-v1``.

    Whether a figure is exact or a proxy's is ``estimate_is_exact``; calibration decides
    how far to trust it (``context.calibration``). If tiktoken or its vocabulary cannot be
    loaded, one warning is logged and ``bytes-v1`` is returned.
    """
    exact = encoding_for_model(model_id) if exact_tokenizer else None
    encoding = exact or PROXY_ENCODING
    try:
        return tiktoken_estimator(encoding) if exact else dense_estimator()
    except Exception as exc:  # noqa: BLE001 - any loader failure must degrade, never crash
        if encoding not in _warned:
            _warned.add(encoding)
            log.warning("tiktoken %s unavailable (%s: %s); falling back to %s",
                        encoding, type(exc).__name__, exc, BYTES_V1)
        return BytesEstimator()


def estimate_is_exact(estimator_id: str, model_id: str | None, *, exact_tokenizer: bool) -> bool:
    """Whether ``estimator_id`` counts with the model's own tokenizer (so no safety factor
    is needed before the provider's first count)."""
    encoding = encoding_for_model(model_id) if exact_tokenizer else None
    return encoding is not None and estimator_id == f"tiktoken-{encoding}-v1"


def estimator_by_id(estimator_id: str) -> Estimator:
    """Rebuild an estimator from the id stored with a checkpoint or view."""
    if estimator_id == BYTES_V1:
        return BytesEstimator()
    if estimator_id == DENSE_V1:
        return dense_estimator()
    found = re.fullmatch(r"tiktoken-(\w+)-v1", estimator_id)
    if found:
        return tiktoken_estimator(found.group(1))
    raise ValueError(f"unknown estimator id {estimator_id!r}")


_DICT = object()
_LIST = object()


def _freeze(value: Any) -> Any:
    # A hashable mirror of a message. Strings are kept as they are: Python caches a
    # string's hash on the object, so a message whose strings are shared with the previous
    # step is keyed in time proportional to its number of fields, not its length. Tags
    # keep values that compare equal but serialise differently apart ({} vs [], 1 vs
    # True vs 1.0).
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, Mapping):
        return (_DICT, *((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return (_LIST, *(_freeze(v) for v in value))
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, float):
        return ("float", value)
    if isinstance(value, int):
        return value
    return ("repr", repr(value))


class EstimateCache:
    """Per-message estimates keyed by content, so a step estimates only what is new.

    Two layers, both keyed by content, never by object identity (a caller may mutate or
    rebuild its dicts freely; a changed message is never served a stale figure):

    1. Position: each message is compared (``==``) with a private snapshot of the message
       at the same position in the previous request. A tool loop only appends, so nearly
       every message matches, and the comparison is C-level and short-circuits on strings
       shared with the records -- far cheaper than estimating or hashing.
    2. Content: otherwise a hashable mirror of the message looks up earlier estimates
       (after a compaction the positions shift, but the messages are the same).

    Python equality treats ``True == 1 == 1.0``; a message differing from the previous
    step's only by such a type swap at the same position would reuse its figure. Chat
    messages carry no such fields.

    A caller whose messages are read-only — never changed in place once passed, as the run
    loop's projections and request bodies are (LOOP-1) — says so with ``read_only``: its
    track keeps the messages themselves instead of snapshots, and a message that *is*
    the previous request's at its position is a hit without being compared, as Python's
    own containers treat identity as equality. A step then costs what is new.
    """

    def __init__(self, estimator: Estimator, max_entries: int = 200_000) -> None:
        self.estimator = estimator
        self.max_entries = max_entries
        self._cache: dict[Any, int] = {}
        # Layer 1, per track: (snapshots, figures, read_only) of the previous request on that
        # track; a read-only track's snapshots are the caller's messages themselves.
        self._tracks: dict[Hashable, tuple[list[Any], list[int], bool]] = {}
        self.hits = 0
        self.misses = 0

    @property
    def id(self) -> str:
        """The wrapped estimator's id: cached figures are that estimator's figures."""
        return self.estimator.id

    def message(self, message: Mapping[str, Any]) -> int:
        """The estimate of one message, computed at most once per distinct content."""
        key = _freeze(message)
        value = self._cache.get(key)
        if value is not None:
            self.hits += 1
            return value
        self.misses += 1
        value = self.estimator.message(message)
        if len(self._cache) >= self.max_entries:
            # Drop the oldest half; insertion order is age order for a dict.
            for old in list(self._cache)[: self.max_entries // 2]:
                del self._cache[old]
        self._cache[key] = value
        return value

    def messages(self, messages: Sequence[Mapping[str, Any]], track: Hashable = None, *,
                 read_only: bool = False) -> list[int]:
        """Per-message estimates, in order (what the context inspector shows).

        ``track`` names the sequence of requests this one continues (one instance's
        projected view, or its request bodies): layer 1 compares with the previous request
        of the same track, so estimating two differently shaped lists in turn still finds
        every old message in place. ``read_only``: see the class."""
        snapshots, figures, was_read_only = self._tracks.get(track, ((), (), False))
        if was_read_only != read_only:
            snapshots, figures = (), ()
        out: list[int] = []
        new_snapshots: list[Any] = []
        known = len(snapshots)
        position = 0
        while position < len(messages):
            # A read-only track's run of the very same objects is taken whole (``same_until``:
            # no Python step per message kept, issue #46); a snapshot of a track that is not
            # read-only is a copy, never the message itself.
            kept = same_until(messages, snapshots, position) if read_only else position
            if kept > position:
                self.hits += kept - position
                out += figures[position:kept]
                new_snapshots += snapshots[position:kept]
                position = kept
                continue
            message = messages[position]
            if position < known and message == snapshots[position]:
                self.hits += 1
                out.append(figures[position])
                new_snapshots.append(message if read_only else snapshots[position])
            else:
                out.append(self.message(message))
                # A snapshot, not the caller's object: in-place edits must not fool layer 1.
                new_snapshots.append(message if read_only else copy.deepcopy(message))
            position += 1
        self._tracks.pop(track, None)  # re-inserted last: the dict's order is the order of use
        if len(self._tracks) >= 64:
            self._tracks.pop(next(iter(self._tracks)))  # the least recently used: a finished sub-agent's
        self._tracks[track] = (new_snapshots, out, read_only)
        return list(out)

    def tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tool schemas rarely change within a run; they are estimated directly."""
        return self.estimator.tools(tools)

    def request(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None,
                track: Hashable = None, *, read_only: bool = False) -> int:
        """The whole request: equal to the wrapped estimator's full count, by construction."""
        overhead = self.estimator.request([], None)
        return overhead + sum(self.messages(messages, track, read_only=read_only)) + self.tools(tools or ())
