"""The one shape of a run's error: stored on the run row, announced in its events.

A run that fails or is interrupted carries a :class:`RunError` — what went wrong in
words a person understands, a code the screen reads, and whether resuming may help.
It is built one way (here), stored one way (``to_dict`` on ``Run.error`` and in the
``run_finished`` event) and announced one way (``event``: the same fields, plus what a
retry adds). The screen's wording per code lives in ``web/errors.py``.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunError:
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
        code and words; retryable unless it is permanent."""
        return cls(error.code, str(error), retryable=not error.permanent)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunError:
        """A stored error read back (a missing ``retryable`` reads as resumable, as the
        screen has always read it)."""
        return cls(str(data.get("code") or "error"), str(data.get("message") or ""),
                   retryable=data.get("retryable") is not False)


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
    return RunError("context_window", f"{said} In the console, open Model connections → “{connection}”, set the "
                    f"context window to what the server keeps{window} and the output limit well below it, then "
                    "publish the agent again and ask again.")


INTERNAL_ERROR = RunError("internal_error", "Something went wrong on our side; you can resume the run.",
                          retryable=True)
COULD_NOT_START = RunError("internal_error", "The run could not start on our side; an operator has the details.",
                           retryable=True)
INTERRUPTED = RunError("interrupted", "The worker running this stopped; resume to continue.", retryable=True)
SHUT_DOWN = RunError("interrupted", "The worker running this was shut down; resume to continue.", retryable=True)
# Resuming sends the same question once more: the empty answer is not kept as a record
# (the call log keeps it, outcome ``empty``), so the model reads what it read before.
# LOOP-10: the first empty answer is asked once more at once (said in the chat with
# ``EMPTY_ANSWER_RETRY``); only a second one ends the run, saying it was asked twice.
EMPTY_ANSWER = RunError("empty_answer", "The model returned an empty answer twice (it was asked once more): "
                        "no text and no tool call.", retryable=True)
EMPTY_ANSWER_RETRY = RunError("empty_answer", "The model returned an empty answer; asking it once more.",
                              retryable=True)
NOT_A_MEMBER = RunError("not_a_member", "This session's owner is no longer a member of its space.")
QUEUE_UNAVAILABLE = RunError("queue_unavailable",
                             "The task queue is unavailable, so this could not start; resume it in a moment.",
                             retryable=True)


class RunNotOwned(Exception):
    """The run is no longer this worker's (ended, reaped, resumed by another attempt):
    nothing of the write was written, and the worker must stop and write nothing more
    (``sessions.services.ownership`` raises it; the run loop knows it as ``RunLost``)."""
