"""CTX-24: the dense runs of a text, for ``dense-o200k-v1`` (``context.estimators``).

A small or English-centred tokenizer splits some text far finer than o200k_base does: CJK
and other non-Latin scripts, digits, hex, base64. ``dense_runs`` finds those runs and
weighs them per character class; the rest of the text is left for o200k to count.
"""
from __future__ import annotations

import re
from collections.abc import Callable

# dense-o200k-v1's weights, in tokens per character *of the proxy*: a figure is an
# estimate times the proxy prior (1.3, ``context.calibration.PROXY_PRIOR``), so a weight
# is about the largest rate measured on any real tokenizer divided by 1.3 (the spaces and
# punctuation around a run are counted by o200k besides; the tests check every measured
# sample's figure against its real counts: tests/context/test_ctx24_dense.py). The
# rates (tokens per character of the class, worst tokenizer; docs/context-engine.md
# "Dense text"): Hangul 2.83 per syllable and other CJK 1.86 (SmolLM2's byte-level BPE:
# a 3-byte character is 2 or 3 tokens), Cyrillic 0.89 per letter (SmolLM2), digits 1.0
# (every tokenizer but Llama 3's and DeepSeek's splits digits one by one), hex and UUIDs
# 0.94, base64 0.81 (SmolLM2, Mistral's SentencePiece). Characters of scripts nobody
# measured (3- and 4-byte: Devanagari, Thai, emoji...) weigh their UTF-8 bytes, which no
# byte-level or byte-fallback tokenizer exceeds. Part of the id: changing one means v2.
DENSE_WEIGHTS = {"hangul": 2.15, "cjk": 1.50, "script2": 0.70, "digit": 0.82, "hex": 0.75, "base64": 0.65}
DENSE_BYTE_WEIGHT = 1 / 1.3  # per UTF-8 byte of an unmeasured script's character

_CJK = "\u2e80-\u2fdf\u3000-\u30ff\u3100-\u312f\u3190-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
_HANGUL = "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"
_WORD = "0-9A-Za-z+/=_-"
# One pass finds every dense run, skipping ordinary ASCII text at C speed (Latin letters
# with accents too, left to o200k): a run of word characters is looked
# at only from its first digit (and then extended back to the word's start), which finds
# every hex word and every base64 run with a digit. Base64 without any digit (one run in
# fifteen of 16 characters) is left to o200k, which splits base64 about as finely as its
# weight (docs/context-engine.md "Dense text").
# No named groups here: with them the regex engine tries every alternative at every
# position (six times slower on English); the kind of a run is read from its first
# character, and a non-Latin run is split by script with ``_SCRIPTS``, which reads only it.
_DENSE = re.compile(f"[0-9][{_WORD}]*|[^\\x00-\\u036f]+")
_SCRIPTS = re.compile(
    f"(?P<hangul>[{_HANGUL}]+)"
    f"|(?P<cjk>[{_CJK}]+)"
    # Two-byte scripts: Greek, Cyrillic, Armenian, Hebrew, Arabic, Syriac, Thaana.
    r"|(?P<script2>[\u0370-\u07ff]+)"
    # Anything else from three bytes up: scripts nobody measured, emoji.
    f"|(?P<wide>[^\\x00-\\u07ff{_HANGUL}{_CJK}]+)"
)
_WORD_CHARS = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz+/=_-")
_HEX_WORD = re.compile(r"(?=.*[a-fA-F])[0-9a-fA-F]+(?:-[0-9a-fA-F]+)*")
_BASE64_WORD = re.compile(r"(?=.*[a-z])(?=.*[A-Z])[A-Za-z0-9+/]{16,}={0,2}")
_DIGITS = re.compile(r"[0-9]+")
_DIGIT_CHARS = frozenset("0123456789")


def dense_runs(text: str, count: Callable[[str], int]) -> tuple[list[str] | None, float]:
    """The text outside dense runs (its pieces, in order) and the dense runs' weight in
    proxy units; ``(None, 0.0)`` when there is no dense run. ``count`` is o200k's count,
    used so a hex or base64 word never weighs less than the same word read as an ordinary
    word with digits."""
    units = 0.0
    plain: list[str] = []
    start = 0
    for run in _DENSE.finditer(text):
        begin, end = run.start(), run.end()
        found = run.group()
        if found[0] in _DIGIT_CHARS:
            while begin > start and text[begin - 1] in _WORD_CHARS:  # back to the word's start
                begin -= 1
            found = text[begin:end]
            digits = sum(len(d) for d in _DIGITS.findall(found)) * DENSE_WEIGHTS["digit"]
            kind = ("hex" if len(found) >= 8 and _HEX_WORD.fullmatch(found)
                    else "base64" if _BASE64_WORD.fullmatch(found) else "")
            if kind:
                # Never less than the same word counted as an ordinary word with digits,
                # so a word that grows into hex or base64 never costs less than before.
                units += max(len(found) * DENSE_WEIGHTS[kind], digits + count(_DIGITS.sub(" ", found)))
            else:  # an ordinary word with digits: the digits per digit, the rest as text
                units += digits
                plain.append(text[start:begin])
                plain.append(_DIGITS.sub(" ", found))
                start = end
                continue
        else:
            for part in _SCRIPTS.finditer(found):
                kind = part.lastgroup or ""
                if kind == "wide":
                    units += len(part.group().encode("utf-8")) * DENSE_BYTE_WEIGHT
                else:
                    units += len(part.group()) * DENSE_WEIGHTS[kind]
        plain.append(text[start:begin])
        start = end
    if not plain:
        return None, 0.0
    plain.append(text[start:])
    return plain, units
