"""A server that asks the person during a call (MCP elicitation, TOOL-10): what it asked,
what the person answered, and how the question travels from the SDK's event loop to the
thread that made the call.

The SDK calls our ``elicitation_callback`` on the process's MCP event loop
(``toolservers.bridge``), where nothing may touch the database or block. So the callback
only hands the question to the **calling thread** — the tool thread inside
``Connection.call_tool``, which polls its call anyway — through that call's ``Inbox``,
and awaits the answer the thread sets. The thread asks the person (``Asker``: the run
loop's, which records the question, waits for the answer and records it) and keeps the
time the person took off the call's clock.

Which call asked: on the protocol's 2026-07-28 revision the question comes back inside
the call's own result (``InputRequiredResult``) and the SDK answers it in the call's task,
so the call is known exactly (a context variable set by the call). On the earlier
revisions the server sends ``elicitation/create`` as a request of its own, which the SDK
handles in a task of the session: it goes to the call of that session in flight — the
oldest one, when a step calls the same server twice at once.

Pure data and one small class; no Django.
"""
from __future__ import annotations

import asyncio
import contextvars
import queue
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any

ACTIONS = ("accept", "decline", "cancel")
FORM, URL = "form", "url"
MAX_MESSAGE_CHARS = 4_000
# A field whose name or format says it holds a credential is never kept in the record...
SECRET_NAME = re.compile(r"pass(word|phrase|code)?|secret|token|api[ _-]?key|credential|private[ _-]?key|\bpin\b|"
                         r"\botp\b|(access|security|verification|door|auth)[ _-]?code", re.IGNORECASE)
# ... nor a value that looks like one: a known key prefix, a JWT, or a long unbroken mix of
# letters and digits (an order number is kept; a generated key is not).
SECRET_VALUE = re.compile(r"^(sk-|sk_|ghp_|gho_|github_pat_|xox[abpr]-|AKIA|eyJ|Bearer\s)|"
                          r"^(?=[^\s]*\d)(?=[^\s]*[a-z])(?=[^\s]*[A-Z])[^\s]{20,}$")


@dataclass(frozen=True)
class Question:
    """What a server asked: a form (``schema``: a flat object of primitive properties) or a
    URL to open (``url``)."""

    mode: str
    message: str
    schema: dict[str, Any] | None = None
    url: str = ""
    server: str = ""  # the server's name, as the space registered it


@dataclass(frozen=True)
class Answer:
    """The person's answer, as it goes back to the server."""

    action: str
    content: dict[str, Any] | None = None


CANCEL = Answer("cancel")

# Runs on the calling thread and blocks until the person answers (or the wait ends).
Asker = Callable[[Question], Answer]


def question_of(params: Any) -> Question:
    """The SDK's ``ElicitRequestParams`` (form or URL) as a ``Question``."""
    message = str(getattr(params, "message", "") or "")[:MAX_MESSAGE_CHARS]
    if getattr(params, "mode", FORM) == URL:
        return Question(URL, message, url=str(params.url))
    return Question(FORM, message, schema=dict(params.requested_schema or {}))


def secret_field(name: str, schema: dict[str, Any]) -> bool:
    """Whether a form field holds a credential, by its name, title or format."""
    spec = (schema.get("properties") or {}).get(name) or {}
    words = " ".join(str(part) for part in (name, spec.get("title", "")))
    return bool(SECRET_NAME.search(words)) or spec.get("format") == "password" or spec.get("writeOnly") is True


def answer_for_record(content: dict[str, Any] | None, schema: dict[str, Any] | None,
                      redact: Callable[[Any], Any]) -> dict[str, Any] | None:
    """The answer as the records keep it (LOOP-8, like a call's arguments): a credential
    field's value, or a value that looks like a key, is ``[REDACTED]``, and the run's
    known secrets anywhere else too."""
    if content is None:
        return None
    kept = {key: ("[REDACTED]" if value not in (None, "") and (secret_field(key, schema or {}) or (
                isinstance(value, str) and SECRET_VALUE.search(value))) else value)
            for key, value in content.items()}
    return redact(kept)


class Inbox:
    """The questions of one call, from the event loop to the calling thread."""

    def __init__(self) -> None:
        self._items: queue.SimpleQueue[tuple[Question, Future[Answer]]] = queue.SimpleQueue()

    def put(self, question: Question) -> Future[Answer]:
        future: Future[Answer] = Future()
        self._items.put((question, future))
        return future

    def serve(self, ask: Asker | None) -> float:
        """Answer every waiting question on this thread; returns the seconds the person took.
        No asker (a probe, a listing): the question is cancelled, as nobody can answer."""
        spent = 0.0
        while not self._items.empty():
            question, future = self._items.get_nowait()
            started = time.monotonic()
            answer = CANCEL  # the server is never left waiting on a broken asker
            try:
                answer = ask(question) if ask is not None else CANCEL
            finally:
                spent += time.monotonic() - started
                try:
                    future.set_result(answer)
                except InvalidStateError:  # the call was abandoned meanwhile, which cancelled it
                    pass
        return spent


# The call whose task is running (set by the call itself, read by the callback).
current_inbox: contextvars.ContextVar[Inbox | None] = contextvars.ContextVar("current_inbox", default=None)


@dataclass
class CallsInFlight:
    """The inboxes of a connection's calls in flight, oldest first."""

    inboxes: list[Inbox] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, inbox: Inbox) -> None:
        with self.lock:
            self.inboxes.append(inbox)

    def remove(self, inbox: Inbox) -> None:
        with self.lock:
            if inbox in self.inboxes:
                self.inboxes.remove(inbox)

    def route(self) -> Inbox | None:
        inbox = current_inbox.get()
        if inbox is not None:
            return inbox
        with self.lock:
            return self.inboxes[0] if self.inboxes else None


async def answer_on_loop(calls: CallsInFlight, params: Any) -> Answer:
    """The callback's body: hand the question to the asking call's thread, await its answer.
    No call in flight (the question came outside a call): cancelled."""
    inbox = calls.route()
    if inbox is None:
        return CANCEL
    return await asyncio.wrap_future(inbox.put(question_of(params)))


def _primitive(value: Any) -> bool:
    """What an answer's value may be (the protocol's ``ElicitResult.content``)."""
    if isinstance(value, list):
        return all(isinstance(item, str) for item in value)
    return value is None or isinstance(value, (str, int, float, bool))


def content_errors(schema: dict[str, Any] | None, content: Any) -> dict[str, str]:
    """What is wrong with a form's answer, per field (empty: it fits the requested schema).

    The form is a flat object of primitive properties; a field it does not name is refused,
    and the schema's own rules (types, enums, lengths, formats it declares) are checked by
    ``jsonschema``, its references resolved within itself (``toolservers.schemas``)."""
    from jsonschema import SchemaError

    from toolservers.schemas import SchemaReferenceError, schema_validator

    if not isinstance(content, dict):
        return {"content": "must be an object of the form's fields"}
    properties = (schema or {}).get("properties") or {}
    errors = {str(key): "not a field of this form" for key in content if key not in properties}
    errors.update({str(key): "must be a string, number, boolean or list of strings"
                   for key, value in content.items() if key in properties and not _primitive(value)})
    if errors:
        return errors
    try:
        validator = schema_validator(schema or {"type": "object"})
        found = list(validator.iter_errors(content))
    except (SchemaError, SchemaReferenceError):
        return {}  # a schema no validator reads: the server checks the answer itself
    for error in found:
        if error.validator == "required":
            for name in (schema or {}).get("required") or []:
                if name not in content:
                    errors.setdefault(str(name), "required")
        elif error.absolute_path:
            errors.setdefault(str(error.absolute_path[0]), str(error.message)[:200])
        else:
            errors.setdefault("content", str(error.message)[:200])
    return errors
