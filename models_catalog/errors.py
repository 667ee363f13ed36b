"""One small error hierarchy for the model-provider boundary (LOOP-3, CAT-5).

Every error says whether it is *permanent* (retrying cannot help: bad key, invalid
request, context overflow, unsafe URL) or *transient* (429, 5xx, time-outs, dropped
streams). Only transient errors are retried (see ``client.call_with_retries``).

Messages are written for the person reading them in the UI. They never contain the
provider's response body (it may echo prompts, other tenants' data or our key) nor the
API key: the body is inspected here to pick the right class and then thrown away.
"""
from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any


class ProviderError(Exception):
    """Base class: a provider call failed. ``str(err)`` is safe to show to users."""

    default_code = "provider_error"
    default_permanent = True

    def __init__(
        self,
        message: str,
        *,
        permanent: bool | None = None,
        code: str | None = None,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = self.default_permanent if permanent is None else permanent
        self.code = code or self.default_code
        self.status = status
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        return not self.permanent

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, status={self.status!r}, message={self.message!r})"


class AuthenticationError(ProviderError):
    default_code = "auth"


class InvalidRequestError(ProviderError):
    default_code = "invalid_request"


class ContextOverflowError(InvalidRequestError):
    """The request was larger than the model's window: compaction, not a retry, is the fix.

    ``prompt_tokens`` and ``window`` are the provider's own figures when its message had
    them (CAT-3 learns the real window from them; CTX-25 learns a calibration sample).
    """

    default_code = "context_overflow"

    def __init__(self, message: str, *, prompt_tokens: int | None = None, window: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.prompt_tokens, self.window = prompt_tokens, window


class QuotaExceededError(ProviderError):
    """A 429 that is about billing (OpenAI ``insufficient_quota``): waiting will not help."""

    default_code = "quota_exceeded"


class RateLimitedError(ProviderError):
    default_code = "rate_limited"
    default_permanent = False


class ProviderUnavailableError(ProviderError):
    """5xx, time-outs, refused or reset connections, a stream cut short, garbage in a stream."""

    default_code = "provider_unavailable"
    default_permanent = False


class StreamCutError(ProviderUnavailableError):
    """The answer stream ended -- ``[DONE]`` or a clean close -- without the provider saying
    the answer was complete (no finish reason). llama-cpp-python's server, which runs one
    request at a time, ends the running stream exactly so when another request waits: the
    answer was interrupted, not finished, and is asked again with back-off (LOOP-3). Read as
    a complete answer it was an empty one, and a cut summary was logged ``ok`` (issue #45)."""

    default_code = "stream_cut"


class ResponseTooLargeError(ProviderError):
    """The response exceeded the size bound; asking again would return the same size."""

    default_code = "response_too_large"


class UnsafeURLError(ProviderError):
    """The URL is refused by the outbound guard (scheme, address, port, credentials)."""

    default_code = "unsafe_url"


# Phrases providers use for "your prompt does not fit". Matched case-insensitively
# against the error code, type and message of the body; never echoed.
_OVERFLOW_MARKERS = re.compile(
    r"maximum context length|context_length_exceeded|context length|context window"
    r"|exceed_context_size|available context size"
    r"|too many tokens|prompt is too long|input tokens exceed|tokens exceed"
    r"|reduce the length of the messages|exceeds the model's maximum|string_above_max_length",
    re.IGNORECASE,
)
# Where providers put the figures of an overflow (read as numbers only, never echoed):
# OpenAI and vLLM "maximum context length is 8192 tokens. However, your messages resulted
# in 9000 tokens" / "you requested 9500 tokens (9000 in the messages, 500 in the
# completion)" / "your request has 9000 input tokens"; llama.cpp "request (4476 tokens)
# exceeds the available context size (4096 tokens)" plus n_prompt_tokens / n_ctx fields;
# Anthropic "prompt is too long: 210000 tokens > 200000 maximum".
_N = r"(\d[\d,]*)"
_WINDOW_PATTERNS = (re.compile(rf"maximum context length is {_N}", re.I),
                    re.compile(rf"available context size \({_N} tokens?\)", re.I),
                    re.compile(rf"tokens? > {_N} maximum", re.I))
_PROMPT_PATTERNS = (re.compile(rf"\({_N} in the messages", re.I),
                    re.compile(rf"resulted in {_N} tokens", re.I),
                    re.compile(rf"request has {_N} input tokens", re.I),
                    re.compile(rf"request \({_N} tokens?\) exceeds", re.I),
                    re.compile(rf"prompt is too long: {_N} tokens", re.I))
_QUOTA_MARKERS = re.compile(r"insufficient_quota|exceeded your current quota|billing", re.IGNORECASE)
_BODY_SNIFF_LIMIT = 64 * 1024


def parse_retry_after(value: str | None, *, now: Callable[[], float] = time.time) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date.

    Returns None when absent or unparseable, never a negative number.
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - now()
    if seconds != seconds or seconds in (float("inf"), float("-inf")):  # NaN / inf
        return None
    return max(0.0, seconds)


def _first_number(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        found = pattern.search(text)
        if found:
            return int(found.group(1).replace(",", ""))
    return None


def _body_number(body: bytes, key: str) -> int | None:
    try:
        data = json.loads(body[:_BODY_SNIFF_LIMIT].decode("utf-8", errors="replace"))
    except ValueError:
        return None
    err = data.get("error", data) if isinstance(data, dict) else None
    value = err.get(key) if isinstance(err, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def overflow_error(text: str, body: bytes, *, status: int | None = None) -> ContextOverflowError:
    """The overflow error with the provider's figures, when its answer carries them."""
    prompt = _body_number(body, "n_prompt_tokens") or _first_number(_PROMPT_PATTERNS, text)
    window = _body_number(body, "n_ctx") or _first_number(_WINDOW_PATTERNS, text)
    details = [str(status)] if status is not None else []
    if prompt:
        details.append(f"the provider counted {prompt:,} tokens")
    if window:
        details.append(f"its window is {window:,}")
    where = f" ({'; '.join(details)})" if details else ""
    return ContextOverflowError(f"The request is larger than the model's context window{where}.",
                                status=status, prompt_tokens=prompt, window=window)


def _error_text(body: bytes) -> str:
    """The machine-readable parts of an error body, for classification only."""
    snippet = body[:_BODY_SNIFF_LIMIT]
    try:
        data = json.loads(snippet.decode("utf-8", errors="replace"))
    except ValueError:
        return snippet.decode("utf-8", errors="replace")
    parts: list[str] = []
    err = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(err, dict):
        for key in ("code", "type", "message", "status", "param"):
            if err.get(key) is not None:
                parts.append(str(err[key]))
    elif err is not None:
        parts.append(str(err))
    if isinstance(data, dict) and isinstance(data.get("detail"), (str, list)):
        parts.append(str(data["detail"]))  # FastAPI / vLLM style
    return " ".join(parts)


def error_from_status(
    status: int,
    *,
    headers: Mapping[str, str] | None = None,
    body: bytes = b"",
    provider_label: str = "The model provider",
) -> ProviderError:
    """Map an HTTP error status (and the body's error code) to the hierarchy.

    401/403 auth; 400/413/422 invalid or context overflow; 404 invalid (model or path);
    408/409/425/5xx unavailable; 429 rate limited (or quota exceeded: permanent);
    3xx refused because redirects are never followed; any other 4xx invalid.
    """
    headers = headers or {}
    text = _error_text(body) if body else ""
    retry_after = parse_retry_after(_header(headers, "retry-after"))
    if 300 <= status < 400:
        return InvalidRequestError(
            f"{provider_label} answered with a redirect ({status}), which is not followed. "
            "Check the base URL.",
            code="redirect_refused",
            status=status,
        )
    if status in (401, 403):
        return AuthenticationError(
            f"{provider_label} rejected the credentials ({status}). Check the API key and its permissions.",
            status=status,
        )
    if status == 429:
        if _QUOTA_MARKERS.search(text):
            return QuotaExceededError(
                f"{provider_label} reports that the account's quota or billing limit is exhausted (429).",
                status=status,
            )
        wait = f" Retry after {retry_after:g} s." if retry_after is not None else ""
        return RateLimitedError(
            f"{provider_label} is rate limiting requests (429).{wait}", status=status, retry_after=retry_after
        )
    if status in (400, 413, 422) and _OVERFLOW_MARKERS.search(text):
        return overflow_error(text, body, status=status)
    if status == 404:
        return InvalidRequestError(
            f"{provider_label} does not know this model or endpoint (404). Check the model id and base URL.",
            status=status,
        )
    if status in (408, 409, 425) or status >= 500:
        return ProviderUnavailableError(
            f"{provider_label} is temporarily unavailable ({status}).", status=status, retry_after=retry_after
        )
    return InvalidRequestError(f"{provider_label} rejected the request as invalid ({status}).", status=status)


def error_from_payload(payload: Any, *, provider_label: str = "The model provider") -> ProviderError:
    """Classify an ``{"error": {...}}`` object that arrived inside a 200 stream."""
    body = json.dumps(payload).encode() if not isinstance(payload, bytes) else payload
    status = None
    err = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(err, dict):
        for key in ("status", "code"):
            value = err.get(key)
            if isinstance(value, int) and 100 <= value < 600:
                status = value
                break
            # Three ASCII digits: "²".isdigit() is True and int() refuses it (a provider's body is input too).
            if isinstance(value, str) and len(value) == 3 and value.isascii() and value.isdigit() \
                    and 100 <= int(value) < 600:
                status = int(value)
                break
    text = _error_text(body)
    if status is None:
        if _OVERFLOW_MARKERS.search(text):
            return overflow_error(text, body)
        return ProviderUnavailableError(f"{provider_label} reported an error in the middle of the answer.")
    return error_from_status(status, body=body, provider_label=provider_label)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    getter = getattr(headers, "get", None)
    value = getter(name) if getter else None
    if value is None:
        for key, val in headers.items():
            if key.lower() == name:
                return val
    return value
