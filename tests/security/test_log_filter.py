"""LOOP-8, the log filter itself: it never raises into the code that logs, never drops a
record, and sits on every handler the web and the worker write with.

A handler's filter runs outside logging's own error handling: what it raises comes out of
``logger.warning`` — inside the ``except`` block of a tool thread or of the loop, where it
would crash what was only reporting a failure. Every record below is handled by a real
``StreamHandler`` (the process's own console, or one of the tests') and read back as
written, with the decoders of ``tests.security.leaks``.
"""
from __future__ import annotations

import io
import logging
import os
import subprocess
import sys

import pytest
from django.core import mail
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.log_redaction import WITHHELD, SecretsFilter, redacted_now, secrets_kept_from_logs
from tests.conftest import REPO
from tests.security.leaks import leaks, process_log, written_forms

KEY = "sk-log-filter-key-0123456789abcdef"
FORMS = written_forms(KEY)
EVERY_FORM = " ".join(FORMS.values())
CI = os.environ.get("HYPOTHESIS_PROFILE") == "ci"


class Unprintable:
    """An argument that cannot become text: its ``str`` and its ``repr`` both raise (a
    half-built object, a proxy to a closed connection)."""

    def __str__(self) -> str:
        raise RuntimeError(f"no text for {KEY}")

    def __repr__(self) -> str:
        raise RuntimeError(f"no repr for {KEY}")


class Reprless:
    """An argument with a text but no ``repr``: a broken format string falls back to repr."""

    def __str__(self) -> str:
        return f"the key {KEY}"

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class Recording(logging.StreamHandler):
    """A real stream handler that also counts what it wrote and what it could not."""

    def __init__(self) -> None:
        super().__init__(io.StringIO())
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
        self.addFilter(SecretsFilter())
        self.written = 0
        self.failed: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        self.written += 1

    def handleError(self, record: logging.LogRecord) -> None:  # logging's own: it prints the record's arguments
        self.failed.append(record)

    def text(self) -> str:
        return self.stream.getvalue()


def test_loop8_a_log_line_whose_argument_cannot_become_text_is_withheld_and_the_caller_goes_on(caplog):
    caplog.set_level(logging.INFO)
    log = logging.getLogger("tools")
    with process_log() as written, secrets_kept_from_logs([KEY]):
        try:
            raise ValueError(f"Invalid IPv6 address: '[{KEY}]'")
        except ValueError:
            log.exception("tool %s raised with %s", "http_fetch", Unprintable())  # raised out of here before
            log.warning("then %s", "the next line")  # the except block carried on
        log.warning("broken format %d", Reprless())  # a broken format string whose fallback repr raises
    assert written.getvalue().count(WITHHELD) == 2
    assert "then the next line" in written.getvalue()
    assert "Traceback" not in written.getvalue()  # withheld whole, traceback included
    assert leaks({"process log": written.getvalue(), "captured log": caplog.text}, KEY) == {}


def test_loop8_exc_info_without_an_exception_is_written_and_never_raises(caplog):
    handler = Recording()
    log = logging.getLogger("agentloom.loop8.noexc")
    log.addHandler(handler)
    try:
        with secrets_kept_from_logs([KEY]):
            log.warning("no exception here, key %s", KEY, exc_info=True)  # noqa: LOG014 (the case: no exception)
            # Records another library made by hand: exc_info left True, or the exception itself.
            for exc_info in (True, ValueError(f"bad {KEY}"), ("not", "a triple")):
                record = logging.LogRecord("lib", logging.ERROR, __file__, 1, "made by hand: %s", (KEY,), None)
                record.exc_info = exc_info  # type: ignore[assignment]
                handler.handle(record)  # a TypeError came out of here before
    finally:
        log.removeHandler(handler)
    assert handler.written == 4 and handler.failed == []
    assert handler.text().count("[REDACTED]") >= 5 and "ValueError: bad [REDACTED]" in handler.text()
    assert leaks({"log": handler.text()}, KEY) == {}


values = st.one_of(
    st.sampled_from([KEY, *FORMS.values(), f"Bearer {KEY}", 42, 3.5, None, b"sk-bytes", {"k": KEY}, [KEY]]),
    st.builds(Unprintable), st.builds(Reprless), st.text(max_size=20))
templates = st.sampled_from(["plain", "value %s", "%s and %r", "%d items", "%s %s", "100% sure %s", f"{KEY} %s",
                             "%(a)s"])


def _exception() -> tuple:
    try:
        raise ValueError(f"Invalid URL '{EVERY_FORM}'")
    except ValueError:
        return sys.exc_info()


exc_infos = st.sampled_from(["none", "true", "empty", "triple", "instance", "garbage"])
EXC_INFO = {"none": lambda: None, "true": lambda: True, "empty": lambda: (None, None, None), "triple": _exception,
            "instance": lambda: _exception()[1], "garbage": lambda: ("a", "b")}


@settings(max_examples=400 if CI else 200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(template=templates, args=st.lists(values, max_size=3), exc_info=exc_infos,
       stack=st.sampled_from([None, f"Stack (most recent call last):\n  {KEY}"]))
def test_loop8_every_record_is_written_once_never_raises_and_carries_no_form_of_the_key(template, args, exc_info,
                                                                                       stack):
    handler = Recording()
    record_args = {"a": args[0] if args else KEY} if template == "%(a)s" else tuple(args)
    record = logging.LogRecord("any", logging.WARNING, __file__, 1, template, None, None, sinfo=stack)
    record.args = record_args  # as a logger stores them (a lone mapping is the mapping)
    record.exc_info = EXC_INFO[exc_info]()  # type: ignore[assignment]
    with secrets_kept_from_logs([KEY]):
        handler.handle(record)
    assert handler.written == 1 and handler.failed == []
    assert leaks({"log": handler.text()}, KEY) == {}


UNFILTERED = """
import logging, sys
from core.log_redaction import SecretsFilter
def unfiltered():
    loggers = [logging.getLogger(),
               *(l for l in logging.root.manager.loggerDict.values() if isinstance(l, logging.Logger))]
    return sorted(f"{l.name}: {type(h).__name__}" for l in loggers for h in l.handlers
                  if not isinstance(h, logging.NullHandler)  # writes nothing
                  and not any(isinstance(f, SecretsFilter) for f in h.filters))
"""
# As `make run` and the compose file start the web: uvicorn sets up its logging, then loads
# the app, and with it Django, which installs its own handlers before settings.LOGGING.
WEB = UNFILTERED + """
import uvicorn
uvicorn.Config("agentloom.asgi:application").load()
print("unfiltered", unfiltered())
from core.log_redaction import secrets_kept_from_logs
key = sys.argv[1]
with secrets_kept_from_logs([key]):  # a run executing in the web process (AGENTLOOM_TASKS_EAGER)
    logging.getLogger("uvicorn.access").info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:50000", "GET", f"/x?k={key}",
                                             "1.1", 200)
    try:
        raise ValueError(f"Invalid header value {key}")
    except ValueError:
        logging.getLogger("uvicorn.error").exception("Exception in ASGI application")
"""
WORKER = UNFILTERED + """
import django
django.setup()
from agentloom.celery import app
app.log.setup(loglevel="INFO", redirect_stdouts=True)  # as a worker starts: its handlers replace ours
print("unfiltered", unfiltered(), file=sys.__stdout__)
"""


@pytest.mark.parametrize("debug", ["0", "1"])
@pytest.mark.parametrize("process", ["web", "worker"])
def test_loop8_every_handler_of_a_web_or_worker_process_has_the_filter(process, debug):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentloom.settings_test", "DEBUG": debug}
    done = subprocess.run([sys.executable, "-c", WEB if process == "web" else WORKER, KEY], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "unfiltered []" in done.stdout, done.stdout
    if process == "web":  # uvicorn's lines, written while a secret is held: whole, and redacted
        assert '"GET /x?k=[REDACTED] HTTP/1.1" 200' in done.stderr, done.stderr
        assert "ValueError: Invalid header value [REDACTED]" in done.stderr
        assert leaks({"web log": done.stdout + done.stderr}, KEY) == {}


QUIET_WEB = """
import logging, sys
import uvicorn
uvicorn.Config("agentloom.asgi:application", access_log=sys.argv[1] == "on", log_level=sys.argv[2]).load()
logging.getLogger("uvicorn.access").info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:50000", "GET", "/healthz", "1.1", 200)
logging.getLogger("uvicorn.error").info("an info line of the server")
logging.getLogger("uvicorn.error").warning("a warning of the server")
"""


@pytest.mark.parametrize(("access", "level"), [("on", "info"), ("off", "info"), ("on", "warning")])
def test_uvicorns_access_log_and_log_level_switches_survive_djangos_logging_set_up(access, level):
    # `--no-access-log` and `--log-level warning` were undone when Django set up its
    # logging: a load run wrote two access lines per question it was told not to write.
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentloom.settings_test"}
    done = subprocess.run([sys.executable, "-c", QUIET_WEB, access, level], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert ('"GET /healthz HTTP/1.1" 200' in done.stderr) is (access == "on" and level == "info"), done.stderr
    assert ("an info line of the server" in done.stderr) is (level == "info"), done.stderr
    assert "a warning of the server" in done.stderr


@override_settings(ADMINS=[("Ops", "ops@example.org")])
def test_loop8_djangos_error_mail_to_the_admins_carries_no_form_of_the_key():
    # mail_admins sits on the "django" logger, so it runs before the root's console: it
    # needs the filter of its own.
    with secrets_kept_from_logs([KEY]):
        logging.getLogger("django.request").error("Internal Server Error: /api/v1/x %s", KEY, exc_info=_exception())
    assert len(mail.outbox) == 1
    sent = mail.outbox[0]
    # The mail says what failed; its traceback went to the log, redacted (Django builds the
    # mail's from the exception object, which the filter drops: docs/operations.md).
    assert "[REDACTED]" in sent.subject and "Internal Server Error: /api/v1/x [REDACTED]" in sent.body
    assert leaks({"subject": sent.subject, "body": sent.body, "alternatives": str(sent.alternatives)}, KEY) == {}


def test_loop8_runservers_request_lines_carry_no_form_of_the_key():
    (handler,) = [h for h in logging.getLogger("django.server").handlers
                  if not type(h).__module__.startswith("_pytest")]  # the test runner's capture, not ours
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    try:
        with secrets_kept_from_logs([KEY]):
            logging.getLogger("django.server").info('"GET /api/v1/x?key=%s HTTP/1.1" 200 2', KEY)
    finally:
        handler.setStream(previous)
    assert "key=[REDACTED]" in buffer.getvalue()
    assert leaks({"runserver": buffer.getvalue()}, KEY) == {}


def test_loop8_a_sink_that_is_no_handler_redacts_what_it_sends_with_the_secrets_held_now():
    # A Sentry event as its before_send receives it (serialized: dicts, lists, texts), a
    # secret in a message, a parameter, an exception, a frame's local variable and a key.
    event = {"logentry": {"message": "tool %s raised", "formatted": f"tool {KEY} raised", "params": [KEY]},
             "exception": {"values": [{"type": "InvalidURL", "value": f"Invalid IPv6 address: '[{EVERY_FORM}]'",
                                       "stacktrace": {"frames": [{"vars": {"url": f"http://[{KEY}]/", KEY: 1}}]}}]},
             "level": "error"}
    with secrets_kept_from_logs([KEY]):
        sent = redacted_now(event)
    assert sent["level"] == "error" and sent["logentry"]["params"] == ["[REDACTED]"]
    assert leaks({"event": sent}, KEY) == {}
    assert redacted_now(event) is event  # nothing held: passed as it is
