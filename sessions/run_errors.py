"""The one shape of a run's error: stored on the run row, announced in its events.

A run that fails or is interrupted carries a :class:`RunError` — what went wrong in
words a person understands, a code the screen reads, and whether resuming may help.
It is built one way (here), stored one way (``to_dict`` on ``Run.error`` and in the
``run_finished`` event) and announced one way (``event``: the same fields, plus what a
retry adds). Its code is one of :class:`RunErrorCode`, which carries the words the chat
shows for it and whether resuming may help: adding a code is adding a member there.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any


@dataclass(frozen=True)
class RunError:
    """``code`` is a :class:`RunErrorCode`'s value (a stored error of an earlier version may
    carry one no longer known: the chat words it as :data:`UNKNOWN_TITLE`)."""

    code: str
    message: str
    retryable: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The stored shape: ``{"code", "message", "retryable"}``."""
        return {"code": self.code, "message": self.message, "retryable": self.retryable}

    def event(self, **extra: Any) -> dict[str, Any]:
        """A ``run_error`` event's data: the stored shape, plus what the moment adds (a retry's
        ``retrying_in``, ``attempt`` and ``reset``; which instance it came from)."""
        return {**self.to_dict(), **extra}

    @classmethod
    def from_provider(cls, error: Any) -> RunError:
        """A provider's refusal or fault (``models_catalog.errors.ProviderError``): its
        code and words; retryable as its code is (unless it is permanent, for a code the
        enum does not know)."""
        code = RunErrorCode.find(error.code)
        return cls(error.code, str(error), retryable=code.retryable if code else not error.permanent)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunError:
        """A stored error read back (a missing ``retryable`` reads as resumable, as the
        screen has always read it)."""
        return cls(str(data.get("code") or "error"), str(data.get("message") or ""),
                   retryable=data.get("retryable") is not False)


# How the chat says a call is asked again without waiting, unless a code says otherwise.
ASKING_AGAIN = "asking again now…"


class RunErrorCode(Enum):
    """Every code a run's error may carry, with the words the chat shows for it (LOOP-3).

    ``title`` says what happened and ``hint`` what the person should do next, in plain
    words; ``retryable`` is whether resuming the run may help (the Resume button, and
    ``run_resume``'s refusal otherwise); ``retrying`` is what the chat says while the loop
    asks again by itself (a ``run_error`` with ``retrying_in``), ``at_once`` how it says it
    asks again without waiting; ``ended`` is the status line once a run ended so (else the
    failure's), and ``asks_again`` that resuming sends the same question once more (the
    button reads "Ask again"). A provider's refusals carry their class's code
    (``models_catalog.errors``); the rest are the run loop's. The chat is handed this table
    (``web.errors.error_table``); nothing else words a code.
    """

    title: str
    hint: str
    retryable: bool
    retrying: str
    at_once: str
    ended: str
    asks_again: bool

    def __new__(cls, code: str, title: str, hint: str, retryable: bool, retrying: str = "",
                at_once: str = "", ended: str = "", asks_again: bool = False) -> RunErrorCode:
        member = object.__new__(cls)
        member._value_ = code
        member.title, member.hint, member.retryable = title, hint, retryable
        member.retrying, member.at_once = retrying, at_once or ASKING_AGAIN
        member.ended, member.asks_again = ended, asks_again
        return member

    @classmethod
    def find(cls, code: str) -> RunErrorCode | None:
        """The member a stored code names; None for a code no longer (or never) known."""
        return next((member for member in cls if member.value == code), None)

    def error(self, message: str) -> RunError:
        """A run error of this code, saying ``message`` (already safe to show)."""
        return RunError(self.value, message, retryable=self.retryable)

    # --- the model provider's answers (``models_catalog.errors``) ---
    RATE_LIMITED = ("rate_limited", "Rate-limited by the model provider",
                    "The provider is refusing requests for a while. Wait a minute, then resume the run.", True,
                    "The model provider asked us to slow down")
    QUOTA_EXCEEDED = ("quota_exceeded", "The provider account is out of quota",
                      "Waiting will not help: an admin needs to check the provider's billing.", False)
    CONTEXT_OVERFLOW = ("context_overflow", "Context overflow: the conversation is too long for the model",
                        "Start a new session, or ask an admin to use a model with a larger window.", False)
    PROVIDER_UNAVAILABLE = ("provider_unavailable", "The model provider is down or not answering",
                            "Nothing is lost. Resume the run in a minute.", True, "The model server did not answer")
    STREAM_CUT = ("stream_cut", "The model server interrupted the answer",
                  "Servers that answer one request at a time cut an answer when another request waits. It was "
                  "asked again several times; nothing is lost. Resume the run in a minute, when the server is "
                  "less busy.", True, "The model server interrupted the answer (it serves one request at a time)")
    PROVIDER_ERROR = ("provider_error", "The model provider returned an error",
                      "Ask again; if it keeps failing, tell an admin.", False)
    AUTH = ("auth", "The model provider refused the API key",
            "An admin needs to update the key of this agent's model connection.", False)
    INVALID_REQUEST = ("invalid_request", "The request could not be built",
                       "Nothing was sent to the model. This is a bug and has been logged.", False)
    RESPONSE_TOO_LARGE = ("response_too_large", "The model's answer was larger than we accept",
                          "Ask for a shorter answer, or ask an admin to lower the agent's output limit.", False)
    UNSAFE_URL = ("unsafe_url", "The model connection's address is not allowed",
                  "An admin needs to point this agent's model connection at an allowed address.", False)
    REDIRECT_REFUSED = ("redirect_refused", "The model's server answered with a redirect",
                        "Redirects are not followed: an admin needs to set the connection's base URL to the "
                        "address it redirects to.", False)
    BASE_URL_REQUIRED = ("base_url_required", "The model connection has no base URL",
                         "An admin needs to set the base URL of this agent's model connection.", False)
    INVALID_URL = ("invalid_url", "The model connection's base URL is not valid",
                   "An admin needs to correct the base URL of this agent's model connection.", False)
    UNKNOWN_PROVIDER = ("unknown_provider", "The model connection names a provider this platform does not know",
                        "An admin needs to pick a provider for this agent's model connection.", False)
    # A background summary no longer wanted (CTX-45): the preparation's, never a run's own.
    DISCARDED = ("discarded", "The prepared summary was no longer needed",
                 "Nothing to do: the conversation goes on without it.", False)
    # --- the run loop's ---
    CONTEXT_WINDOW = ("context_window", "The model's server keeps less context than its connection says",
                      "An admin needs to change this agent's model connection in the console, as described "
                      "below; asking again before that fails the same way.", False, "", "",
                      "The model's server refused a request this long — see the message above for what to change.")
    EMPTY_ANSWER = ("empty_answer", "The model returned an empty answer",
                    "Ask again to send the same question once more. If it keeps happening, tell an admin: the "
                    "model may need another output limit, or another model.", True,
                    "The model returned an empty answer", "asking once more…",  # LOOP-10
                    "The model returned an empty answer — Ask again to send the question once more.", True)
    LIMIT_REACHED = ("limit_reached", "The run reached one of its limits",
                     "Ask a narrower question, or ask an admin to raise the agent's limits.", False)
    ENDPOINT_CHANGED = ("endpoint_changed", "The agent's model connection changed since it was published",
                        "An admin needs to publish the agent again; then ask again.", False)
    INTERNAL_ERROR = ("internal_error", "Something went wrong on our side",
                      "Nothing is lost. Resume the run to continue.", True)
    INTERRUPTED = ("interrupted", "The run was interrupted", "Nothing is lost. Resume the run to continue.", True)
    NOT_A_MEMBER = ("not_a_member", "The session's owner is no longer a member of its space",
                    "Nothing more can run in this session.", False)
    QUEUE_UNAVAILABLE = ("queue_unavailable", "The run could not be queued",
                         "Nothing is lost. Resume the run in a moment.", True)


# What the chat says of a stored code it does not know (an earlier version's).
UNKNOWN_TITLE = "The run failed"
UNKNOWN_HINT = "Resume the run to try again; if it keeps failing, tell an admin."


def window_refused(*, connection: str, server_window: int | None, output_limit: int, safety_margin: int,
                   after_summary: bool) -> RunError:
    """The model's server refused a request as longer than its context window and the run
    cannot get under it: what the server keeps, and what an admin changes where (the
    connection's figures are frozen into the agent when it is published, so it is published
    again). Never resumable: a resume keeps the figures the run froze (RUN-4)."""
    keeps = f"keeps {server_window:,} tokens of context" if server_window else \
        "keeps less context than its connection says"
    if after_summary:
        said = f"The model's server refused the request even with earlier messages summarized: it {keeps}."
    else:
        said = (f"The model's server {keeps}: too little for this agent's output limit of {output_limit:,} tokens "
                f"plus its safety margin of {safety_margin:,}.")
    window = f" ({server_window:,})" if server_window else ""
    return RunErrorCode.CONTEXT_WINDOW.error(f"{said} In the console, open Model connections → “{connection}”, set the "
                    f"context window to what the server keeps{window} and the output limit well below it, then "
                                             "publish the agent again and ask again.")


INTERNAL_ERROR = RunErrorCode.INTERNAL_ERROR.error("Something went wrong on our side; you can resume the run.")
COULD_NOT_START = RunErrorCode.INTERNAL_ERROR.error("The run could not start on our side; an operator has the details.")
INTERRUPTED = RunErrorCode.INTERRUPTED.error("The worker running this stopped; resume to continue.")
SHUT_DOWN = RunErrorCode.INTERRUPTED.error("The worker running this was shut down; resume to continue.")
# Resuming sends the same question once more: the empty answer is not kept as a record
# (the call log keeps it, outcome ``empty``), so the model reads what it read before.
# LOOP-10: the first empty answer is asked once more at once (said in the chat with
# ``EMPTY_ANSWER_RETRY``); only a second one ends the run, saying it was asked twice.
EMPTY_ANSWER = RunErrorCode.EMPTY_ANSWER.error("The model returned an empty answer twice (it was asked once more): "
                                               "no text and no tool call.")
EMPTY_ANSWER_RETRY = RunErrorCode.EMPTY_ANSWER.error("The model returned an empty answer; asking it once more.")
NOT_A_MEMBER = RunErrorCode.NOT_A_MEMBER.error("This session's owner is no longer a member of its space.")
QUEUE_UNAVAILABLE = RunErrorCode.QUEUE_UNAVAILABLE.error(
    "The task queue is unavailable, so this could not start; resume it in a moment.")


class RunNotOwned(Exception):
    """The run is no longer this worker's (ended, reaped, resumed by another attempt):
    nothing of the write was written, and the worker must stop and write nothing more
    (``sessions.services.ownership`` raises it; the run loop knows it as ``RunLost``)."""
