"""LOOP-8 in the logs: no log line of a process carries a secret of a run it executes.

A run's redactor covers what the run writes; a log line is written by whatever raises — a
tool whose exception quotes what the model made up (``httpx.InvalidURL: Invalid IPv6
address: '[sk-…]'``, in the message and again in the traceback), a library's message.
``SecretsFilter`` sits on every handler: ``settings.LOGGING`` puts it on the web's and the
worker's (Django's and uvicorn's own included), and ``agentloom.celery`` on the handlers a Celery
worker puts in their place when it starts. It redacts a record's message with its
arguments, its formatted traceback and its stack with the secrets of every run the process
is executing, in every form the redactor knows (``secrets_kept_from_logs``, held by the loop
and by a manual compaction for as long as they execute, and by a tool's thread for as long
as it runs, which may be past its run's end: ``secrets_hold``).

Every record also loses the credentials an absolute URL in it may carry, known or not: its
user name and password (``https://user:sk-…@host``) and the values of its query and fragment
(``?key=sk-…``), where people paste keys and libraries print them (``url_credentials_scrub``).
Only a record that holds such a URL is changed.

The record is changed in place (the traceback is formatted once, then kept as text), so
every handler after the first sees it redacted too. With no run under way the filter costs
one global read per record.

A filter runs outside logging's own error handling: what it raises reaches the code that
logged, often inside an ``except`` block of a tool thread or of the loop. So the filter
never raises: a record it cannot check (an argument whose ``str`` and ``repr`` both fail, a
traceback that cannot be formatted) is written as one plain line saying so, never as it
was and never dropped.
"""
from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from core.redaction import REDACTED, Redactor

WITHHELD = "[log line withheld: it could not be checked for secrets]"

_lock = threading.Lock()
_held: dict[object, tuple[str, ...]] = {}  # one entry per holder (a run, a tool thread): its secrets
_known: tuple[str, ...] = ()  # all of them, sorted
_redactor: Redactor | None = None  # for ``_known``, rebuilt when it changes
_TRACEBACKS = logging.Formatter()


def _rebuild() -> None:
    global _known, _redactor
    known = tuple(sorted({secret for secrets in _held.values() for secret in secrets}))
    if known != _known:  # a tool thread holding its run's secrets again costs nothing
        _known, _redactor = known, (Redactor(list(known)) if known else None)


def secrets_hold(secrets: Iterable[str]) -> object:
    """Keep ``secrets`` out of every log record of this process until ``secrets_release``
    with the token returned (any thread may release it)."""
    token = object()
    with _lock:
        _held[token] = tuple(secrets)
        _rebuild()
    return token


def secrets_release(token: object) -> None:
    with _lock:
        _held.pop(token, None)
        _rebuild()


def secrets_held() -> tuple[str, ...]:
    """Every secret the process keeps out of its logs now (those of every run under way)."""
    return _known


def redacted_now(value: Any) -> Any:
    """``value`` — a text, or a JSON value such as a Sentry event, breadcrumb or log — with
    the secrets the process keeps out of its logs now redacted, values and keys alike: for
    a sink that is not a logging handler and so never meets the filter (docs/operations.md)."""
    redactor = _redactor
    return value if redactor is None else redactor.content(value)


@contextmanager
def secrets_kept_from_logs(secrets: Iterable[str]) -> Iterator[None]:
    """While the block runs, no log record of this process (any thread) carries ``secrets``."""
    token = secrets_hold(secrets)
    try:
        yield
    finally:
        secrets_release(token)


def _exception(exc_info: object) -> tuple[type[BaseException], BaseException, object] | None:
    """The exception a record carries, whatever shape it came in: logging resolves
    ``exc_info=True`` to ``sys.exc_info()`` (``(None, None, None)`` outside an ``except``),
    but a record made by hand or by another library may hold True or the exception itself."""
    if isinstance(exc_info, BaseException):
        return type(exc_info), exc_info, exc_info.__traceback__
    if isinstance(exc_info, tuple) and len(exc_info) == 3 and isinstance(exc_info[1], BaseException):
        return exc_info  # type: ignore[return-value]
    return None


def record_redact(record: logging.LogRecord, redactor: Redactor) -> None:
    """Redact one record in place: the message as formatted with its arguments, the
    traceback (formatted here, then kept only as text) and the stack. May raise (an
    argument that cannot be turned into text): ``SecretsFilter`` withholds that record."""
    try:
        message = record.getMessage()
    except Exception:  # a broken format string: keep its parts, redacted
        message = f"{record.msg!r} % {record.args!r}"
    record.msg, record.args = redactor.text(message), None
    exception = _exception(record.exc_info)
    if exception is not None and not record.exc_text:
        record.exc_text = _TRACEBACKS.formatException(exception)  # type: ignore[arg-type]
    record.exc_info = None  # the exception's arguments are where the secret was; anything else is no traceback
    if record.exc_text:
        record.exc_text = redactor.text(record.exc_text)
    if record.stack_info:
        record.stack_info = redactor.text(record.stack_info)


# An absolute URL as log lines write one: a scheme, then anything up to a space or a quote.
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>`]+")
_USERINFO = re.compile(r"^([^:/?#]+://)[^/?#]*@")


def _values_redacted(part: str, *, bare: bool) -> str:
    """``a=1&key=sk-…`` → ``a=[REDACTED]&key=[REDACTED]``; a bare item too when ``bare``
    (in a query it is a value, ``?sk-…``; in a fragment, an anchor)."""
    items = []
    for item in part.split("&"):
        name, equals, value = item.partition("=")
        items.append(f"{name}={REDACTED}" if equals and value else REDACTED if bare and item and not equals else item)
    return "&".join(items)


def _url_scrubbed(match: re.Match[str]) -> str:
    url = _USERINFO.sub(rf"\1{REDACTED}@", match.group(), count=1)
    url, hashed, fragment = url.partition("#")
    url, asked, query = url.partition("?")
    return (url + asked + _values_redacted(query, bare=True) + hashed + _values_redacted(fragment, bare=False))


def url_credentials_scrub(text: str) -> str:
    """``text`` with each absolute URL's user name and password and its query and fragment
    values replaced by ``[REDACTED]`` (names, hosts and paths are kept)."""
    return _URL.sub(_url_scrubbed, text) if "://" in text else text


def record_scrub_urls(record: logging.LogRecord) -> None:
    """Scrub the URLs of one record in place (``url_credentials_scrub``), its traceback's
    too; a record without one is left as it was."""
    try:
        message = record.getMessage()
    except Exception:  # a broken format string: its parts, as record_redact keeps them
        message = f"{record.msg!r} % {record.args!r}"
    if "://" in message:
        scrubbed = url_credentials_scrub(message)
        if scrubbed != message:
            record.msg, record.args = scrubbed, None
    exception = _exception(record.exc_info)
    if exception is not None and not record.exc_text:
        record.exc_text = _TRACEBACKS.formatException(exception)  # type: ignore[arg-type]
    if record.exc_text and "://" in record.exc_text:
        scrubbed = url_credentials_scrub(record.exc_text)
        if scrubbed != record.exc_text:
            record.exc_text, record.exc_info = scrubbed, None  # the exception still holds the URL


def _withhold(record: logging.LogRecord) -> None:
    """What is left of a record that could not be checked: when, where and how grave it
    was (the formatter's fields), and that its text was withheld."""
    record.msg, record.args = WITHHELD, None
    record.exc_info, record.exc_text, record.stack_info = None, None, None
    record.message = WITHHELD


class SecretsFilter(logging.Filter):
    """A handler's filter that lets every record through, redacted (LOOP-8), its URLs
    without credentials. It never raises and never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        redactor = _redactor
        try:
            if redactor is not None:
                record_redact(record, redactor)
            record_scrub_urls(record)
        except Exception:
            _withhold(record)
        return True


def filter_install(logger: logging.Logger) -> None:
    """Put the filter on each of ``logger``'s handlers that lacks it (Celery replaces the
    handlers ``settings.LOGGING`` made when a worker starts)."""
    for handler in logger.handlers:
        if not any(isinstance(f, SecretsFilter) for f in handler.filters):
            handler.addFilter(SecretsFilter())
