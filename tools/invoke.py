"""Running a tool (LOOP-4, TOOL-4): argument checks, its time-out, Stop, and an output cap.

Arguments are checked against the tool's JSON Schema by the ``jsonschema`` library, every
keyword (a server tool's frozen schema and the built-ins' alike) before the tool runs, with
references resolved within the schema only (``toolservers.schemas``, TOOL-6); a
mismatch is a result with ``status: error`` that says which argument and why, so the model
can correct itself. Any exception a tool raises is caught, so a broken tool gives a result
with ``status: error`` and never crashes the run — but for the ownership check's (a tool's
write found the run taken over by another attempt), which ends the execution as it does
for every write (``sessions.services.ownership``).
"""
from __future__ import annotations

import json
import logging
import threading
from functools import lru_cache
from typing import Any

from django.db import connections

from agents.tool_registry import (
    Tool,
    ToolCancelled,
    ToolContext,
    ToolError,
    ToolOutcome,
    ToolOutcomeUnknown,
    ToolResult,
)
from context.surrogates import replace_lone_surrogate_escapes, replace_lone_surrogates
from context.truncation import cap_for_storage, structured_for_storage
from core.log_redaction import secrets_held, secrets_hold, secrets_release
from sessions.services.ownership import RunNotOwned
from toolservers.schemas import SchemaReferenceError, arguments_error, schema_validator

logger = logging.getLogger("tools")

UNKNOWN_AFTER_TIMEOUT = (" It was told to stop, but it may or may not have taken effect: check before relying on "
                         "it, and do not simply repeat it.")


@lru_cache(maxsize=512)
def _validator(schema_text: str) -> Any:
    """A compiled validator per schema (compiling costs far more than validating). The
    library is loaded at the first call, not when every process starts."""
    return schema_validator(json.loads(schema_text))


def _where(error: Any) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"at argument {path.lstrip('.')!r}: " if path else ""


def check_arguments(tool: Tool, raw: str) -> dict[str, Any]:
    """The parsed arguments, or ``ToolError`` saying what does not match the schema."""
    try:
        arguments = json.loads(raw or "{}")
    except ValueError:
        raise ToolError("The arguments are not valid JSON.") from None
    if not isinstance(arguments, dict):
        raise ToolError("The arguments must be a JSON object.")
    from jsonschema import SchemaError

    try:
        validator = _validator(json.dumps(tool.parameters, sort_keys=True))
        error = arguments_error(validator, arguments)
    except SchemaError:
        raise ToolError(f"The tool {tool.name!r} has an input schema that is not valid JSON Schema, so it cannot "
                        "be called; an admin should look at its server.") from None
    except SchemaReferenceError as exc:
        # TOOL-6: a version frozen before listings were checked; the call is refused, the run goes on.
        raise ToolError(f"The tool {tool.name!r} cannot be called: {exc}. An admin should look at its "
                        "server.") from None
    if error is not None:
        raise ToolError(f"The arguments do not match the tool's schema: {_where(error)}{error.message[:500]}.")
    return arguments


def tool_invoke(tool: Tool, raw_arguments: str, context: ToolContext, *, poll: float = 0.05,
                cancel_grace: float = 2.0) -> ToolOutcome | None:
    """Run a tool with its time-out, watching for cancellation.

    Returns the outcome, or None when the run was cancelled and the tool did not stop
    within ``cancel_grace`` or could not know its effect: no result is invented (LOOP-7;
    the projector later shows it as an unknown outcome, CTX-3).
    """
    # The arguments are the model's JSON text (or an imported transcript's): an escape in it
    # would decode to a lone surrogate in the tool's hands, and in whatever it echoes.
    outcome = _outcome(tool, replace_lone_surrogate_escapes(raw_arguments or ""), context, poll=poll,
                       cancel_grace=cancel_grace)
    if outcome is None:
        return None
    # Every tool's result enters the run here (built-in, server, http_fetch): text from
    # outside, with no lone surrogate past this point. The same objects when there is none.
    return ToolOutcome(outcome.status, replace_lone_surrogates(outcome.content),
                       replace_lone_surrogates(outcome.structured), outcome.structured_omitted)


def _outcome(tool: Tool, raw_arguments: str, context: ToolContext, *, poll: float,
             cancel_grace: float) -> ToolOutcome | None:
    try:
        arguments = check_arguments(tool, raw_arguments)
    except ToolError as exc:
        return ToolOutcome("error", str(exc))
    box: dict[str, Any] = {}
    # LOOP-8: the thread may outlive this call (a time-out, a Stop past the grace period)
    # and its run, and still log what it raises: it keeps the secrets the process keeps
    # out of its logs now (its run's among them) until it ends. Held here and released
    # by the thread, so no moment of the thread's life is uncovered.
    held = secrets_hold(secrets_held())

    def target() -> None:
        try:
            box["content"] = tool.run(arguments, context)
        except ToolCancelled:
            box["cancelled"] = True
        except ToolOutcomeUnknown as exc:
            box["unknown"] = exc.message
        except ToolError as exc:
            box["error"] = str(exc)
        except RunNotOwned:  # a write of the tool found the run taken over: not the tool's failure
            box["lost"] = True
        except Exception as exc:  # a broken tool must not crash the run (LOOP-4)
            logger.exception("tool %s raised", tool.name)
            box["error"] = f"The tool failed: {type(exc).__name__}."
        finally:
            connections.close_all()  # a tool that read the database leaves no connection behind
            secrets_release(held)

    worker = threading.Thread(target=target, name=f"tool-{tool.name}", daemon=True)
    try:
        worker.start()
    except BaseException:
        secrets_release(held)
        raise
    waited = 0.0
    worked = 0.0  # the time-out's clock: it stops while a server waits for the person (TOOL-10)
    asking = context.services.get("asking")
    cancelled_at: float | None = None
    while worker.is_alive():
        worker.join(poll)
        waited += poll
        if asking is None or not asking.is_set():
            worked += poll
        if cancelled_at is None and context.services.get("should_cancel", lambda: False)():
            context.cancel_event.set()
            cancelled_at = waited
        if cancelled_at is not None and waited - cancelled_at >= cancel_grace and worker.is_alive():
            return None
        if cancelled_at is None and worked >= tool.timeout_seconds and worker.is_alive():
            context.cancel_event.set()
            note = "" if tool.idempotent else UNKNOWN_AFTER_TIMEOUT
            return ToolOutcome("timeout", f"The tool did not finish within {tool.timeout_seconds:g} seconds.{note}")
    if box.get("lost"):
        raise RunNotOwned()  # the loop's RunLost: this worker writes nothing more of the run
    if "unknown" in box:
        return None if cancelled_at is not None or not box["unknown"] else ToolOutcome("unknown", box["unknown"])
    if box.get("cancelled") or (cancelled_at is not None and "content" not in box):
        return ToolOutcome("cancelled", "Stopped by the user before the tool finished.")
    if "error" in box:
        return ToolOutcome("error", box["error"])
    value = box.get("content", "")
    if isinstance(value, ToolResult):
        structured, omitted = structured_for_storage(value.structured, tool.output_limit)
        return ToolOutcome("ok", cap_for_storage(value.content, tool.output_limit), structured, omitted)
    return ToolOutcome("ok", cap_for_storage(value, tool.output_limit))
