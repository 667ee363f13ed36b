"""LOOP-8 in the logs: no log line of a process carries a secret of a run it executes.

A run's redactor covers what the run writes; a log line is written by whatever raises — a
tool whose exception quotes what the model made up (``httpx.InvalidURL: Invalid IPv6
address: '[sk-…]'``, in the message and again in the traceback), a library's message.
``SecretsFilter`` sits on every handler: ``settings.LOGGING`` puts it on the web's and the
worker's, and ``agentloom.celery`` on the handlers a Celery worker puts in their place when
it starts. It redacts a record's message with its arguments, its formatted traceback and
its stack with the secrets of every run the process is executing, in every form the
redactor knows (``secrets_kept_from_logs``, held by the loop for as long as a run executes).

The record is changed in place (the traceback is formatted once, then kept as text), so
every handler after the first sees it redacted too. With no run under way the filter costs
one global read per record.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from agentloom.runloop.redaction import Redactor

_lock = threading.Lock()
_held: dict[object, tuple[str, ...]] = {}  # one entry per run under way: its secrets
_redactor: Redactor | None = None  # all of them, rebuilt when a run starts or ends
_TRACEBACKS = logging.Formatter()


def _rebuild() -> None:
    global _redactor
    known = sorted({secret for secrets in _held.values() for secret in secrets})
    _redactor = Redactor(known) if known else None


@contextmanager
def secrets_kept_from_logs(secrets: Iterable[str]) -> Iterator[None]:
    """While the block runs, no log record of this process (any thread) carries ``secrets``."""
    token = object()
    with _lock:
        _held[token] = tuple(secrets)
        _rebuild()
    try:
        yield
    finally:
        with _lock:
            del _held[token]
            _rebuild()


def record_redact(record: logging.LogRecord, redactor: Redactor) -> None:
    """Redact one record in place: the message as formatted with its arguments, the
    traceback (formatted here, then kept only as text) and the stack."""
    try:
        message = record.getMessage()
    except Exception:  # a broken format string: keep its parts, redacted
        message = f"{record.msg!r} % {record.args!r}"
    record.msg, record.args = redactor.text(message), None
    if record.exc_info and record.exc_info[0] is not None:
        if not record.exc_text:
            record.exc_text = _TRACEBACKS.formatException(record.exc_info)
        record.exc_info = None  # the exception's arguments are where the secret was
    if record.exc_text:
        record.exc_text = redactor.text(record.exc_text)
    if record.stack_info:
        record.stack_info = redactor.text(record.stack_info)


class SecretsFilter(logging.Filter):
    """A handler's filter that lets every record through, redacted (LOOP-8)."""

    def filter(self, record: logging.LogRecord) -> bool:
        redactor = _redactor
        if redactor is not None:
            record_redact(record, redactor)
        return True


def filter_install(logger: logging.Logger) -> None:
    """Put the filter on each of ``logger``'s handlers that lacks it (Celery replaces the
    handlers ``settings.LOGGING`` made when a worker starts)."""
    for handler in logger.handlers:
        if not any(isinstance(f, SecretsFilter) for f in handler.filters):
            handler.addFilter(SecretsFilter())
