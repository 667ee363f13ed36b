"""Why a run stops early. Each carries the structured, user-facing error of the run row."""
from __future__ import annotations


class RunCancelled(Exception):
    """The user pressed Stop; the loop ends at the next safe point (LOOP-7)."""


class RunStopped(Exception):
    """The run cannot continue: a limit, a provider fault, an overflow, an invalid request."""

    def __init__(self, code: str, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.code, self.message, self.retryable = code, message, retryable

    def to_error(self) -> dict:
        return {"code": self.code, "message": self.message, "retryable": self.retryable}


class RunLost(Exception):
    """This worker no longer owns the run (reaped as interrupted, or resumed elsewhere):
    it stops at once and writes nothing more."""
