"""Small helpers for history tests: drive runs the way the loop does, read views as text."""
from __future__ import annotations

import re
from typing import Any

from sessions.models import Run
from sessions.run_errors import RunError
from sessions.selectors.context import context_project
from sessions.selectors.instances import main_instance
from sessions.services.model_steps import step_save_assistant
from sessions.services.records import record_append
from sessions.services.runs import run_claim


def claim(run: Run) -> Run:
    claimed = run_claim(run_id=run.pk)
    assert claimed is not None, f"run {run.pk} could not be claimed"
    return claimed


def answer(run: Run, text: str, key: str) -> None:
    step_save_assistant(run=run, instance=main_instance(run=run), entry_key=key,
                        message={"role": "assistant", "content": text})


def interrupted_after_calls(session, calls: list[tuple[str, str, str]]) -> Run:
    """A run whose worker vanished after saving the model's calls ``(id, name, arguments)``,
    before running any of them: resuming it settles them (RUN-6)."""
    from sessions.services.questions import question_ask
    from sessions.services.runs import run_finish

    run = claim(question_ask(session=session, content="Work it out."))
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        for call_id, name, arguments in calls]}
    step_save_assistant(run=run, instance=main_instance(run=run), message=message, entry_key="assistant-1")
    assert run_finish(run=run, status=Run.Status.INTERRUPTED, reason="the worker stopped responding",
                      error=RunError("interrupted", "resume", retryable=True))
    return run


def call_tool(run: Run, call_id: str, name: str, key: str) -> None:
    step_save_assistant(run=run, instance=main_instance(run=run), entry_key=key, message={
        "role": "assistant", "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}],
    })


def tool_result(run: Run, call_id: str, name: str, content: str) -> None:
    record_append(session=run.session, run=run, instance=main_instance(run=run), kind="tool_result",
                  entry_key=f"result-{call_id}",
                  message={"role": "tool", "tool_call_id": call_id, "name": name, "content": content, "status": "ok"})


def text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def shape(messages: list[dict]) -> list[tuple[str, str]]:
    """(role, text) pairs; tool calls shown by name so ids (rewritten, CTX-5) do not matter."""
    out = []
    for message in messages:
        text = text_of(message.get("content"))
        if message.get("tool_calls"):
            names = ",".join(c["function"]["name"] for c in message["tool_calls"])
            text = (text + " " if text else "") + "calls " + names
        out.append((message["role"], text))
    return out


def seen_by(run: Run) -> list[tuple[str, str]]:
    return shape(context_project(run=run, instance=main_instance(run=run)).messages)


def stored_plaintext(model: Any, pk: int, column: str) -> bytes:
    """What a row's encrypted column holds, decrypted by hand, past the read that replaces
    lone surrogates (``core.crypto``): whether they were replaced before storing."""
    from django.db import connection

    field = model._meta.get_field(column)
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT "{field.column}" FROM "{model._meta.db_table}" WHERE "id" = %s', [pk])
        raw = cursor.fetchone()[0]
    return field._fernet.decrypt(bytes(raw), None)


def stores_a_surrogate(model: Any, pk: int, column: str) -> bool:
    # Pickle writes strings as UTF-8 with ``surrogatepass``: a surrogate is ED A0..BF, never valid UTF-8.
    return re.search(rb"\xed[\xa0-\xbf]", stored_plaintext(model, pk, column)) is not None
