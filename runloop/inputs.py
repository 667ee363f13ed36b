"""A tool server that asks the person during a call (SPEC §7b, TOOL-10): the run's side.

The question arrives while the call is in flight, on the thread that made it
(``toolservers.asking``), so that thread — one of the run's worker threads — waits here for
the answer: the call cannot be released without failing it, and a worker restart would
lose the server's side of it anyway (its session and the call both end). This is the one
wait of a run that holds its worker (an approval does not: it waits before the call), so
it is bounded by ``AGENTLOOM_INPUT_WAIT_SECONDS``; the run's heartbeat thread keeps beating
meanwhile, and the tool's time-out clock stops (``asking``).

The wait polls the question's row (one query by key, the connection given back between
polls); it ends with the person's answer, with Stop (answered ``cancel`` at once, the row
``stopped``) or at the bound (``cancel``, the row ``expired``). The server then gets the
answer and the call goes on; what the tool returns says what happened.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from django.conf import settings
from django.db import connections

from sessions.models import Instance, ToolInput
from sessions.selectors.inputs import tool_input_read
from toolservers.asking import CANCEL, FORM, Answer, Asker, Question

if TYPE_CHECKING:
    from runloop.journal import RunJournal
    from runloop.state import RunState

logger = logging.getLogger("runloop")

POLL_SECONDS = 0.25
ANSWERS: dict[str, str] = {ToolInput.Status.ACCEPTED: "accept", ToolInput.Status.DECLINED: "decline"}
# What the call's result says when the person did not answer yes (the model reads it).
NOTES: dict[str, str] = {
    ToolInput.Status.EXPIRED: ("[no answer] The tool server {server!r} asked the person during this call; nobody "
                               "answered within {seconds} seconds, so the server was told the question was "
                               "cancelled."),
    ToolInput.Status.DECLINED: "[declined] The person declined what the tool server {server!r} asked during this call.",
    ToolInput.Status.CANCELLED: ("[cancelled] The person dismissed what the tool server {server!r} asked during this "
                                 "call without answering."),
}


def input_asker(state: RunState, instance: Instance, call_id: str, *, cancel: threading.Event,
                asking: threading.Event, notes: list[str]) -> Asker:
    """What a server tool's call asks the person through (``ToolContext.services["ask"]``);
    ``notes``: what the call's result should say of the answers (``NOTES``)."""
    journal, redactor = state.journal, state.redactor

    def ask(question: Question) -> Answer:
        if question.mode != FORM and urlsplit(question.url).scheme not in ("http", "https"):
            logger.info("run %s: a server asked to open a URL that is not http(s); declined", journal.run.pk)
            return Answer("decline")
        # LOOP-8: what the server says is stored and shown like a tool's result.
        shown = replace(question, message=redactor.text(question.message), url=redactor.text(question.url),
                        schema=redactor.content(question.schema) if question.schema is not None else None)
        asking.set()
        try:
            row = journal.input_open(instance, call_id=call_id, question=shown)
            answer, status = _wait(journal, row, cancel)
            if status in NOTES:
                notes.append(NOTES[status].format(server=question.server,
                                                  seconds=settings.AGENTLOOM_INPUT_WAIT_SECONDS))
            return answer
        finally:
            asking.clear()
            connections.close_all()

    return ask


def _wait(journal: RunJournal, row: ToolInput, cancel: threading.Event) -> tuple[Answer, str]:
    """The answer for the server and how the question ended."""
    deadline = time.monotonic() + settings.AGENTLOOM_INPUT_WAIT_SECONDS
    while True:
        current = tool_input_read(input_id=row.pk)
        connections.close_all()  # back to the pool between polls, not held for the wait
        if current.status != ToolInput.Status.AWAITING:
            return _answered(journal, current), current.status
        if cancel.is_set() or journal.watch.cancel_requested_from_thread():
            ended = ToolInput.Status.STOPPED
        elif time.monotonic() >= deadline:
            ended = ToolInput.Status.EXPIRED
        else:
            cancel.wait(POLL_SECONDS)
            continue
        if journal.input_close(current, status=ended):
            return CANCEL, ended
        # The person's answer came first: it is the one the server gets.


def _answered(journal: RunJournal, row: ToolInput) -> Answer:
    action = ANSWERS.get(row.status, "cancel")
    content = row.delivery if action == "accept" and row.mode == ToolInput.Mode.FORM else None
    journal.input_delivered(row)
    return Answer(action, content or ({} if content is not None else None))
