"""The window of a local server that publishes none, asked with one request (CAT-8).

Some OpenAI-compatible servers say nothing about their window: llama-cpp-python's server
lists ``owned_by: "me"`` and no figure, and has no ``/props``. Their window is learned
from how they answer **one probe**: a non-streamed chat request whose prompt is longer
than any window such a server plausibly runs with (:data:`PROBE_UNITS` tokens) and
``max_tokens: 1``:

* a refusal that names the window — llama-cpp-python's 400 "This model's maximum context
  length is N tokens. However, you requested M tokens (P in the messages, 1 in the
  completion)…" (``llama_cpp/server/errors.py``), llama-server's 400
  ``exceed_context_size_error`` with ``n_ctx`` and ``n_prompt_tokens``, vLLM's "maximum
  context length is N tokens" — gives the window, source ``probe_refusal``
  (the figures are read by :func:`models_catalog.errors.overflow_error`, the reader every
  chat refusal goes through);
* an answer whose usage shows the prompt truncated — Ollama keeps the last ``num_ctx``
  tokens and answers: ``prompt_tokens`` far below what was sent is the window, source
  ``probe_truncation``;
* anything else (an answer that took the whole prompt, a refusal without a figure, a
  time-out) teaches nothing: the platform default stays, flagged for the admin, and the
  note says what the server did.

Bounded and safe for a server that runs one request at a time: one request per
discovery, never streamed (a one-at-a-time server ends a running stream when another
request waits), on a connection of its own that is closed after it (a server that
refused may close it a few milliseconds later: nothing is sent on it again), with a
short time bound and a small body (:data:`PROBE_UNITS` two-byte units, about 600 kB).
A server that would really take the whole prompt would have to read it; the time bound
ends the wait and nothing is learned (such a window is larger than any local default).
Only ever used for ``openai_compatible`` connections to loopback or private addresses
(``window_probe_allowed``): a hosted provider's or a public address's window is never
probed.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from models_catalog.address_rules import address_problem
from models_catalog.errors import ContextOverflowError, ProviderError, UnsafeURLError, error_from_status
from models_catalog.http import HttpLimits, Resolver, check_url
from models_catalog.providers.base import ListingContext, RawModel
from models_catalog.providers.events import as_dict
from models_catalog.providers.model_lists import positive_int

PROBE_REFUSAL = "probe_refusal"
PROBE_TRUNCATION = "probe_truncation"
# Longer than any window a local server plausibly runs with (llama-cpp-python's default is
# 2,048, llama.cpp's and Ollama's a few thousand; 128k is the largest common training length).
PROBE_UNITS = 300_000
# " a", " b"…: one token each in every tokenizer we know (BPE pre-tokenizers split at the
# space; SentencePiece has "▁a"), so the prompt is at least PROBE_UNITS tokens.
_UNIT_LETTERS = "abcdefghijklmnopqrstuvwxyz"
# A prompt the server reports as this share of what was sent, or less, was truncated.
TRUNCATED_SHARE = 0.5
PROBE_LIMITS = HttpLimits(connect_timeout=5.0, read_timeout=30.0, write_timeout=20.0, total_timeout=40.0,
                          max_response_bytes=256 * 1024)


@dataclass(frozen=True)
class ProbeOutcome:
    """What one probe taught: the window (None: nothing), how, and the admin's words."""

    window: int | None
    source: str | None
    note: str


def probe_text(units: int = PROBE_UNITS) -> str:
    """The probe's prompt: ``units`` one-token words."""
    letters = _UNIT_LETTERS
    return "".join(" " + letters[i % len(letters)] for i in range(units))


def probe_body(model: str, *, units: int = PROBE_UNITS) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": probe_text(units)}],
            "max_tokens": 1, "stream": False, "temperature": 0}


def is_private_endpoint(base_url: str, *, resolver: Resolver | None = None) -> bool:
    """Whether ``base_url`` reaches only loopback or private addresses (never probed
    otherwise: a public address may be a hosted provider that bills the probe)."""
    try:
        target = check_url(base_url, allow_private=True, resolver=resolver)
    except ProviderError:
        return False
    for address in target.addresses:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        if address_problem(str(ip), allow_private=False) is None:  # a public address
            return False
    return bool(target.addresses)


def probe_window(ctx: ListingContext, model: str, *, units: int = PROBE_UNITS,
                 limits: HttpLimits | None = None) -> ProbeOutcome:
    """Send the one probe for ``model`` and read the window from the answer.

    Never raises for what the server answers (a probe that teaches nothing leaves the
    default); an address the guard refuses still raises :class:`UnsafeURLError`.
    """
    limits = limits or PROBE_LIMITS
    url = ctx.url("/chat/completions")
    headers = {**ctx.headers(), "Content-Type": "application/json", "Connection": "close"}
    try:
        # Its own connection, closed after it, so nothing else is ever sent on a socket the
        # server is about to close after a refusal.
        response = ctx.client.post(url, json=probe_body(model, units=units), headers=headers,
                                   timeout=limits.httpx_timeout())
        body = response.content[:limits.max_response_bytes]
        status = response.status_code
        response.close()
    except httpx.TimeoutException:
        return ProbeOutcome(None, None, f"The server did not answer a {units:,}-token probe within "
                                        f"{limits.read_timeout:g} s; its window was not learned.")
    except httpx.HTTPError:
        return ProbeOutcome(None, None, "The server cut the connection of the window probe; "
                                        "its window was not learned.")
    if status >= 300:
        error = error_from_status(status, headers=response.headers, body=body, provider_label=ctx.label)
        if isinstance(error, UnsafeURLError):
            raise error
        if isinstance(error, ContextOverflowError) and error.window:
            return ProbeOutcome(error.window, PROBE_REFUSAL,
                                f"The server refused a {units:,}-token probe, saying its window is "
                                f"{error.window:,} tokens.")
        said = "a context refusal without a figure" if isinstance(error, ContextOverflowError) else f"HTTP {status}"
        return ProbeOutcome(None, None, f"The server answered the window probe with {said}; "
                                        "its window was not learned.")
    try:
        payload = as_dict(response.json())
    except ValueError:
        payload = {}
    prompt = positive_int(as_dict(payload.get("usage")).get("prompt_tokens"))
    if prompt and prompt <= units * TRUNCATED_SHARE:
        # Ollama's habit: the prompt cut to the context it keeps, answered without a word.
        return ProbeOutcome(prompt, PROBE_TRUNCATION,
                            f"The server silently cut a {units:,}-token probe to {prompt:,} tokens: "
                            f"its window is {prompt:,}.")
    return ProbeOutcome(None, None, "The server answered the window probe without saying its window; "
                                    "it was not learned.")


def probe_unknown_window(ctx: ListingContext, models: list[RawModel], *, unknown: Callable[[RawModel], bool],
                         prefer: str | None, limits: HttpLimits) -> None:
    """Ask the server, with one probe, the window of the one model whose window no list or
    native API gave and that ``unknown`` says nothing else knows (no manifest entry, a chat
    model) — ``prefer`` when it is one of them, else the first; the others are told they
    were not asked. The figure is kept as what the server keeps per request."""
    candidates = [raw for raw in models if not raw.context_window and not raw.server_context_window and unknown(raw)]
    if not candidates:
        return
    chosen = next((raw for raw in candidates if raw.id == prefer), candidates[0])
    outcome = probe_window(ctx, chosen.id, limits=limits)
    if outcome.window:
        chosen.server_context_window, chosen.server_context_source = outcome.window, outcome.source
    else:
        chosen.notes.append(outcome.note)
    for raw in candidates:
        if raw is not chosen:
            raw.notes.append("This server publishes no window and only one model is probed per discovery: "
                             "saving a connection to this model asks the server for its own.")
