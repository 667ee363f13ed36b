"""What a person reads when a run stops with an error (LOOP-3: a clear error, never silence).

The run loop stores a structured error ``{"code", "message", "retryable"}``; the code
picks a title and a hint written for the person in the chat, the message (already safe
to show: providers' bodies and keys never reach it) is shown under them. The same table
is handed to the browser so live errors and reloaded ones read the same.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class ErrorText:
    title: str
    hint: str


ERROR_TEXTS: dict[str, ErrorText] = {
    "rate_limited": ErrorText("Rate-limited by the model provider",
                              "The provider is refusing requests for a while. Wait a minute, then resume the run."),
    "quota_exceeded": ErrorText("The provider account is out of quota",
                                "Waiting will not help: an admin needs to check the provider's billing."),
    "context_overflow": ErrorText("Context overflow: the conversation is too long for the model",
                                  "Start a new session, or ask an admin to use a model with a larger window."),
    "context_window": ErrorText("The model's server keeps less context than its connection says",
                                "An admin needs to change this agent's model connection in the console, as "
                                "described below; asking again before that fails the same way."),
    "empty_answer": ErrorText("The model returned an empty answer",
                              "Ask again to send the same question once more. If it keeps happening, tell an "
                              "admin: the model may need another output limit, or another model."),
    "provider_unavailable": ErrorText("The model provider is down or not answering",
                                      "Nothing is lost. Resume the run in a minute."),
    "stream_cut": ErrorText("The model server interrupted the answer",
                            "Servers that answer one request at a time cut an answer when another request "
                            "waits. It was asked again several times; nothing is lost. Resume the run in a "
                            "minute, when the server is less busy."),
    "provider_error": ErrorText("The model provider returned an error",
                                "Resume the run to try again; if it keeps failing, tell an admin."),
    "auth": ErrorText("The model provider refused the API key",
                      "An admin needs to update the key of this agent's model connection."),
    "limit_reached": ErrorText("The run reached one of its limits",
                               "Ask a narrower question, or ask an admin to raise the agent's limits."),
    "invalid_request": ErrorText("The request could not be built",
                                 "Nothing was sent to the model. This is a bug and has been logged."),
    "internal_error": ErrorText("Something went wrong on our side",
                                "Nothing is lost. Resume the run to continue."),
}
# What the chat says while the loop retries (a ``run_error`` with ``retrying_in``): what
# happened and what it does about it, in place of the failure's title.
RETRY_TEXTS: dict[str, str] = {
    "stream_cut": "The model server interrupted the answer (it serves one request at a time)",
    "provider_unavailable": "The model server did not answer",
    "rate_limited": "The model provider asked us to slow down",
    "empty_answer": "The model returned an empty answer",  # LOOP-10: asked once more
}
FALLBACK = ErrorText("The run failed", "Resume the run to try again; if it keeps failing, tell an admin.")

# Errors of the API itself (asking, stopping, resuming), by JSON error code.
REQUEST_ERRORS: dict[str, str] = {
    "run_active": "An answer is still running in this session. Wait for it, stop it, or add a supplement.",
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
    code = str(error.get("code") or "internal_error")
    text = ERROR_TEXTS.get(code, FALLBACK)
    return {"code": code, "title": text.title, "hint": text.hint, "message": str(error.get("message") or "")}


def error_table() -> dict[str, Any]:
    """Everything the browser needs to word errors exactly as the server does."""
    return {"runs": {code: asdict(text) for code, text in ERROR_TEXTS.items()}, "fallback": asdict(FALLBACK),
            "requests": REQUEST_ERRORS, "retries": RETRY_TEXTS}


def retry_status(data: dict[str, Any]) -> str:
    """The chat's status line while a call is retried (the browser words it the same way):
    what happened, and that it is asked again -- at once, or in how many seconds."""
    code = str(data.get("code") or "")
    what = RETRY_TEXTS.get(code) or ERROR_TEXTS.get(code, FALLBACK).title
    seconds = data.get("retrying_in") or 0
    when = "asking once more…" if code == "empty_answer" and not seconds else \
        "asking again now…" if not seconds else f"asking again in {seconds:g} s…"
    return f"{what} — {when} Nothing is lost."
