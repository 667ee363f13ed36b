"""Fixtures for the chat's pages: logged-in clients for the named people, finished runs
built through the same services the loop uses."""
from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from sessions.models import Run
from sessions.run_errors import RunError
from sessions.selectors.instances import main_instance
from sessions.services.events import event_emit
from sessions.services.model_steps import step_save_assistant
from sessions.services.questions import question_ask
from sessions.services.records import record_append
from sessions.services.runs import run_claim, run_finish


@pytest.fixture(autouse=True)
def _fresh_login_limits():
    """Failed-login counters live in the cache; every test starts with none."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def client_for():
    def make(user) -> Client:
        client = Client()
        client.force_login(user)
        return client

    return make


def finished_run(session, *, question: str = "What is 6*7?", steps: list[dict[str, Any]] | None = None,
                 status: str = Run.Status.COMPLETED, error: dict | None = None) -> Run:
    """A run that went through the loop's services: question, assistant steps, tool results,
    their events (deltas, tool_finished with durations), then its end."""
    run = question_ask(session=session, content=question)
    run = run_claim(run_id=run.pk)  # which writes run_started
    main = main_instance(run=run)
    for number, step in enumerate(steps or [{"content": "It is **42**."}], start=1):
        message = {"role": "assistant", "content": step.get("content") or None}
        if step.get("partial"):
            message["partial"] = True
        if step.get("finish_reason"):  # an answer the output limit cut (what the loop stores)
            message.update(finish_reason=step["finish_reason"], output_limit=step.get("output_limit", 1024))
        if step.get("content"):
            event_emit(run_id=run.pk, type="message_delta", data={"text": step["content"], "instance": "main"})
        if step.get("call"):
            call_id, name, result = step["call"]
            message["tool_calls"] = [{"id": call_id, "type": "function",
                                      "function": {"name": name, "arguments": '{"expression": "6*7"}'}}]
        step_save_assistant(run=run, instance=main, message=message, entry_key=f"assistant-{number}")
        if step.get("call"):
            event_emit(run_id=run.pk, type="tool_call_detected", data={"call_id": call_id, "name": name})
            record_append(session=session, run=run, instance=main, kind="tool_result", entry_key=f"result-{number}-0",
                          message={"role": "tool", "tool_call_id": call_id, "name": name, "content": result,
                                   "status": "ok"})
            event_emit(run_id=run.pk, type="tool_finished",
                       data={"call_id": call_id, "name": name, "status": "ok", "duration_ms": 12})
    if status in Run.ACTIVE_STATUSES:
        return run
    if error:
        event_emit(run_id=run.pk, type="run_error", data=error)
    run_finish(run=run, status=status, error=RunError.from_dict(error) if error else None,
               reason="stopped by user" if status == Run.Status.CANCELLED else "")
    event_emit(run_id=run.pk, type="run_finished", data={"status": status, "error": error})
    run.refresh_from_db()
    return run
