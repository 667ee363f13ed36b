"""Why a run stops early. Each carries the structured, user-facing error of the run row
(``sessions.run_errors.RunError``: built, stored and announced one way)."""
from __future__ import annotations

from typing import Any

from sessions.run_errors import RunError, RunErrorCode, RunNotOwned, window_refused


class RunCancelled(Exception):
    """The user pressed Stop; the loop ends at the next safe point (LOOP-7)."""


class RunStopped(Exception):
    """The run cannot continue: a limit, a provider fault, an overflow, an invalid request."""

    def __init__(self, error: RunError | RunErrorCode, message: str = "") -> None:
        """``RunStopped(RunErrorCode.X, "what happened")``, or ``RunStopped(error)`` for an
        error already built (``sessions.run_errors``)."""
        self.error = error if isinstance(error, RunError) else error.error(message)
        super().__init__(self.error.message)

    @classmethod
    def of(cls, error: RunError) -> RunStopped:
        return cls(error)

    @classmethod
    def from_provider(cls, error: Any) -> RunStopped:
        """A provider fault the retries could not get past (LOOP-3)."""
        return cls.of(RunError.from_provider(error))


# This worker no longer owns the run (reaped as interrupted, stopped, or resumed by another
# attempt): it stops at once and writes nothing more. Raised by the ownership check every
# write of an execution makes (``sessions.services.ownership``), wherever the write is, so
# one name: the check's own exception, which the loop knows as this.
RunLost = RunNotOwned


class WaitForServer(Exception):
    """The model's server asked for a wait (``Retry-After``) longer than a worker thread is
    held for (``AGENTLOOM_PROVIDER_RETRY_MAX_DELAY``): the run goes back to the queue until
    then and the loop lets go of it (LOOP-3, ``runs.run_wait_for_server``)."""

    def __init__(self, error: Any, *, seconds: float) -> None:
        super().__init__(str(error))
        self.error, self.seconds = error, seconds


class RunWaiting(Exception):
    """TOOL-8: calls of the step wait for a person's approval. The run was moved to
    ``waiting`` with them (``sessions.services.approvals.approvals_wait``); the loop lets
    go of it, and a decision sends it back to the queue."""


class ContextRefused(Exception):
    """The provider refused an action request as longer than its window (CAT-3): the loop
    learns the window, compacts and retries once before it gives up."""

    def __init__(self, error: Any, *, estimate: int, truncated: bool = False) -> None:
        super().__init__(str(error))
        # ``truncated``: not refused but answered on a prompt the server cut (CAT-10).
        self.error, self.estimate, self.truncated = error, estimate, truncated

    def stop(self, *, connection: str, budget: Any, after_summary: bool) -> RunStopped:
        """The run cannot get under the server's window: say what to change, and where."""
        return RunStopped.of(window_refused(connection=connection, server_window=self.error.window,
                                            output_limit=budget.max_output_tokens,
                                            safety_margin=budget.safety_margin_tokens, after_summary=after_summary))
