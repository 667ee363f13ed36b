"""Why a run stops early. Each carries the structured, user-facing error of the run row."""
from __future__ import annotations

from typing import Any


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


class ContextRefused(Exception):
    """The provider refused an action request as longer than its window (CAT-3): the loop
    learns the window, compacts and retries once before it gives up."""

    def __init__(self, error: Any, *, estimate: int) -> None:
        super().__init__(str(error))
        self.error, self.estimate = error, estimate
