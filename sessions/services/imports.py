"""Importing a transcript from elsewhere as a session (RUN-12).

Accepted: a JSON list of OpenAI chat messages, JSONL (one message per line), or a
tau-bench trajectory object (``{"traj": [...]}``). The records reproduce the transcript
message by message; system prompts of the old system become ``context`` records (kept,
shown, never projected — our agent has its own instructions). The session's view is
marked ``raw_complete=false``: what the old system had already discarded cannot be
claimed as original text.
"""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from context import get_estimator, project_records
from context.surrogates import replace_lone_surrogates
from core.api.parsers import MAX_JSON_DEPTH, JSONTooDeep, json_check_depth, json_loads_bounded
from core.errors import ValidationFailed
from core.slow_work import slow_work
from sessions.models import Instance, Run, Session, SessionView
from sessions.services.pasted import pasted_redactor
from sessions.services.records import NewRecord, records_append
from sessions.services.runs import budget_freeze
from sessions.services.sessions import session_create

MAX_MESSAGES = 20_000  # records of one import (RUN-12); the request body bounds its bytes too
TOO_DEEP_PROBLEM = f"nested more than {MAX_JSON_DEPTH} levels deep"
_KIND_BY_ROLE = {"system": "context", "developer": "context", "user": "user", "assistant": "assistant",
                 "tool": "tool_result"}


def transcript_parse(raw: Any) -> list[dict[str, Any]]:
    """The messages of a transcript; ValidationFailed naming the line or index otherwise.

    JSON text is decoded with the API's depth bound, and a value handed in already parsed
    is held to it too: a message nested hundreds of levels deep would otherwise be stored
    only to break whatever walks it next (encryption pickles it)."""
    if isinstance(raw, str):
        stripped = raw.strip()
        if stripped.startswith(("[", "{")):
            try:
                raw = json_loads_bounded(stripped)
            except JSONTooDeep:
                raise _too_deep() from None
            except ValueError:
                raw = _parse_jsonl(stripped)
        else:
            raw = _parse_jsonl(stripped)
    try:
        json_check_depth(raw)
    except JSONTooDeep:
        raise _too_deep() from None
    if isinstance(raw, dict) and isinstance(raw.get("traj"), list):
        raw = raw["traj"]
    elif isinstance(raw, dict) and isinstance(raw.get("messages"), list):
        raw = raw["messages"]
    if not isinstance(raw, list) or not raw:
        raise ValidationFailed("The transcript must be a non-empty list of chat messages.",
                               fields={"transcript": "expected a JSON list, JSONL, or an object with 'traj'"})
    if len(raw) > MAX_MESSAGES:
        raise ValidationFailed("The transcript is too long.", fields={"transcript": f"at most {MAX_MESSAGES} messages"})
    for index, message in enumerate(raw):
        problem = _message_problem(message)
        if problem:
            raise ValidationFailed(f"Message {index} is not a valid chat message: {problem}.",
                                   fields={f"transcript.{index}": problem})
    return raw


def _too_deep() -> ValidationFailed:
    return ValidationFailed(f"The transcript is {TOO_DEEP_PROBLEM}: send a list of chat messages, a few levels deep.",
                            fields={"transcript": TOO_DEEP_PROBLEM})


def _parse_jsonl(text: str) -> list[Any]:
    messages = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            messages.append(json_loads_bounded(line))
        except JSONTooDeep:
            raise ValidationFailed(f"Line {number} is {TOO_DEEP_PROBLEM}.",
                                   fields={f"line.{number}": TOO_DEEP_PROBLEM}) from None
        except ValueError:
            raise ValidationFailed(f"Line {number} is not valid JSON.",
                                   fields={f"line.{number}": "invalid JSON"}) from None
    return messages


def _message_problem(message: Any) -> str | None:
    if not isinstance(message, dict):
        return "not an object"
    role = message.get("role")
    if role not in _KIND_BY_ROLE:
        return f"unknown role {role!r}"
    content = message.get("content")
    if content is not None and not isinstance(content, (str, list)):
        return "content must be a string, a list of parts, or null"
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        return "a tool message needs a tool_call_id"
    calls = message.get("tool_calls")
    if calls is not None:
        if role != "assistant" or not isinstance(calls, list):
            return "tool_calls must be a list on an assistant message"
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                return "each tool call needs a function name"
            if _arguments_too_deep(function.get("arguments")):
                return f"tool call arguments {TOO_DEEP_PROBLEM}"
    if role in {"user", "system", "developer"} and content is None:
        return f"a {role} message needs content"
    return None


def _arguments_too_deep(arguments: Any) -> bool:
    """Arguments that are JSON nested past the bound (malformed ones are kept as the old
    system had them, CTX-6): every page that shows them decodes them."""
    if not isinstance(arguments, str):
        return False
    try:
        json_loads_bounded(arguments)
    except JSONTooDeep:
        return True
    except ValueError:
        return False
    return False


def session_import(*, user, agent_id: int, transcript: Any, title: str = "") -> Session:
    """Create a session whose records reproduce ``transcript``; all or nothing.

    One of the process's ``AGENTLOOM_IMPORTS_MAX`` imports at once and the person's
    ``AGENTLOOM_IMPORTS_PER_PERSON`` (TryLater, 429/503, past them: six imports of 18,000
    messages side by side slowed every request of the server); the session counts
    against the person's sessions of the day (``session_create``).

    Lone surrogates are replaced in every string and key of every message and in the
    title (a transcript from elsewhere is JSON, whose escapes may decode to them), before
    anything is written: the rows, and the answer that shows them, are always valid text.
    The transaction commits before the API encodes its answer, so an answer that could not
    be encoded was a 500 with the session already saved (issue #44); nothing here may leave
    that possible.
    """
    with slow_work("import", person=user.pk):
        return _session_import(user=user, agent_id=agent_id, transcript=transcript, title=title)


def _session_import(*, user, agent_id: int, transcript: Any, title: str) -> Session:
    messages = replace_lone_surrogates(transcript_parse(transcript))
    title = replace_lone_surrogates(title)
    with transaction.atomic():
        session = session_create(user=user, agent_id=agent_id)
        redactor = pasted_redactor(version=session.version)  # LOOP-8: a key in the transcript or its title
        messages = [redactor.message(message) for message in messages]
        session.title = redactor.text(title or _first_user_text(messages) or "Imported conversation")[:200]
        session.save(update_fields=["title"])
        now = timezone.now()
        run = Run.objects.create(session=session, version=session.version, status=Run.Status.COMPLETED,
                                 budget=budget_freeze(version=session.version), started_at=now, finished_at=now,
                                 counters={"imported_messages": len(messages)})
        main = Instance.objects.create(run=run, key=Instance.MAIN)
        rows = records_append(session=session, run=run, instance=main, records=[
            NewRecord(_KIND_BY_ROLE[m["role"]], m, f"import-{index}") for index, m in enumerate(messages)])
        users = sum(1 for m in messages if m["role"] == "user")
        steps = sum(1 for m in messages if m["role"] == "assistant")
        main.user_turns, main.model_steps = users, steps
        main.save(update_fields=["user_turns", "model_steps"])
        view_messages = project_records([{"seq": r.seq, "run": run.pk, "instance": "main", "kind": r.kind,
                                          "message": r.message} for r in rows], open_runs=set())
        SessionView.objects.create(session=session, watermark=rows[-1].seq, messages=view_messages,
                                   user_turns=users, model_steps=steps, estimator_id=get_estimator().id,
                                   raw_complete=False, source_run=run)
    return session


def _first_user_text(messages: list[dict[str, Any]]) -> str:
    for message in messages:
        if message["role"] == "user" and isinstance(message.get("content"), str):
            return message["content"].strip().splitlines()[0] if message["content"].strip() else ""
    return ""
