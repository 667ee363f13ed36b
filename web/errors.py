"""What a person reads when a run stops with an error (LOOP-3: a clear error, never silence).

The run loop stores a structured error ``{"code", "message", "retryable"}``; the code's
words (``sessions.run_errors.RunErrorCode``: a title and a hint written for the person in
the chat) are shown, and the message (already safe to show: providers' bodies and keys
never reach it) under them. The same words are handed to the browser (``error_table``) so
live errors and reloaded ones read the same; the chat's script has none of its own.
"""
from __future__ import annotations

from typing import Any

from sessions.run_errors import UNKNOWN_HINT, UNKNOWN_TITLE, RunErrorCode

# Errors of the API itself (asking, stopping, resuming), by JSON error code.
REQUEST_ERRORS: dict[str, str] = {
    # The chat attaches to the running answer and says so itself (chat.js, attachAfterRefusal);
    # these words are for when it could not show that answer.
    "run_active": "An answer is already running in this session (asked from another tab or device), and this "
                  "page could not show it. Copy your text, then reload the page to follow the answer.",
    "rate_limited": "You are asking too quickly. Wait a moment and send again.",
    "not_resumable": "This run cannot be resumed.",
    "not_continuable": "Only the latest answer, cut before its end, can be continued. Ask a new question instead.",
    "run_not_active": "That run has already finished. Send your text as a new question instead.",
    "not_authenticated": "You have been logged out. Reload the page to log in again.",
    "network": "The server could not be reached. Check your connection and try again.",
}


def error_explain(error: dict[str, Any] | None) -> dict[str, str]:
    """A run's structured error → ``{code, title, hint, message}`` for a template or the browser."""
    error = error or {}
    code = str(error.get("code") or RunErrorCode.INTERNAL_ERROR.value)
    known = RunErrorCode.find(code)
    return {"code": code, "title": known.title if known else UNKNOWN_TITLE,
            "hint": known.hint if known else UNKNOWN_HINT, "message": str(error.get("message") or "")}


def error_table() -> dict[str, Any]:
    """Everything the browser needs to word errors exactly as the server does: every run
    error code's words (``RunErrorCode``), those of a code it does not know, and the API's."""
    return {"runs": {code.value: {"title": code.title, "hint": code.hint, "retryable": code.retryable,
                                  "retrying": code.retrying, "at_once": code.at_once, "ended": code.ended}
                     for code in RunErrorCode},
            "fallback": {"title": UNKNOWN_TITLE, "hint": UNKNOWN_HINT},
            "fallback_code": RunErrorCode.INTERNAL_ERROR.value, "requests": REQUEST_ERRORS}


def retry_status(data: dict[str, Any]) -> str:
    """The chat's status line while a call is retried (the browser words it the same way):
    what happened, and that it is asked again -- at once, or in how many seconds."""
    known = RunErrorCode.find(str(data.get("code") or ""))
    what = (known.retrying or known.title) if known else UNKNOWN_TITLE
    seconds = data.get("retrying_in") or 0
    when = f"asking again in {seconds:g} s…" if seconds else \
        known.at_once if known else RunErrorCode.INTERNAL_ERROR.at_once
    return f"{what} — {when} Nothing is lost."
