"""The rooms a run's trip goes through, counted (issue #46: one writer for each run).

A trip is one real run, from its claim to its finish, on the fake provider: a question, an
answer that calls one tool, the tool, and the final answer. It is followed with
``sys.setprofile``; an *entry* into a module is a call of one of its functions (a method,
a property, a generator resumed, a callback on commit) from a frame of another module —
a call inside the module is the same room. The run's execution writes through one door,
its journal (``runloop.journal``): the events service is entered only where a run is
claimed and finished, and ``runloop/state.py`` — what the run knows — a few times.

Also read from the source (``ast``): the step machine writes nothing itself (no
``event_emit``, no ORM call) and reaches ``sessions.services`` only through its journal.
"""
from __future__ import annotations

import ast
import json
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import runloop
import runloop.state
import sessions.services.events
from runloop.loop import run_execute
from sessions.models import Run
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream

pytestmark = pytest.mark.django_db(transaction=True)

RUNLOOP = Path(runloop.__file__).parent
STEP_MACHINE = ("loop.py", "calls.py", "tool_calls.py", "compaction.py", "compaction_manual.py",
                "verification.py", "preparation.py")
ORM_CALLS = frozenset({"save", "refresh_from_db", "update"})
# The Celery tasks (ids in, services out, STYLE §7) and the worker process's housekeeping
# (the reaper, pruning, the broker hooks) are the worker's wiring, not the run's execution.
WIRING = ("tasks.py", "apps.py", "housekeeping.py", "reaper.py")
EVENTS_ENTRIES = 2
STATE_ENTRIES = 8


def entries(run_trip, *modules: Any) -> Counter[str]:
    """How often ``run_trip()`` enters each module's file from another file, on this thread
    (the loop's: the provider's server threads are the fake's)."""
    files = {module.__file__: module.__name__ for module in modules}
    seen: Counter[str] = Counter()
    loop_thread = threading.get_ident()

    def profile(frame, event, _arg):
        if event != "call" or threading.get_ident() != loop_thread:
            return
        name = files.get(frame.f_code.co_filename)
        if name is not None and (frame.f_back is None or frame.f_back.f_code.co_filename != frame.f_code.co_filename):
            seen[name] += 1
            seen[f"{name}:{frame.f_code.co_name}"] += 1

    sys.setprofile(profile)
    try:
        run_trip()
    finally:
        sys.setprofile(None)
    return seen


def test_a_trip_with_one_tool_call_enters_the_events_service_twice_and_the_state_a_few_times(fake_session, strict):
    def handler(request):
        if any(message["role"] == "tool" for message in request.json["messages"]):
            return chat_stream(["It is 42."])
        return chat_stream(tool_calls=[{"id": "c1", "name": "calculator",
                                        "arguments": json.dumps({"expression": "6*7"})}])

    strict.handler = handler
    run = question_ask(session=fake_session(tools=("calculator",)), content="What is 6*7?")
    seen = entries(lambda: run_execute(run_id=run.pk), sessions.services.events, runloop.state)
    assert Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED
    events, state = sessions.services.events.__name__, runloop.state.__name__
    detail = sorted((name, count) for name, count in seen.items() if ":" in name)
    assert seen[events] <= EVENTS_ENTRIES, detail
    assert seen[state] <= STATE_ENTRIES, detail


# ------------------------------------------------------------------ read from the source


def _tree(name: str) -> ast.Module:
    return ast.parse((RUNLOOP / name).read_text(), filename=name)


def _writes(tree: ast.Module) -> list[str]:
    """``event_emit`` calls and ORM calls (``.objects``, ``.save(``, ``.refresh_from_db(``,
    ``.update(`` on anything but a set or dict the code made)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "objects":
            found.append(f"{node.lineno}: .objects")
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == "event_emit":
                found.append(f"{node.lineno}: event_emit")
            if isinstance(func, ast.Attribute) and func.attr in ORM_CALLS:
                found.append(f"{node.lineno}: .{func.attr}(")
    return found


def _imports_of_services(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sessions.services"):
            found.append(f"{node.lineno}: from {node.module}")
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {alias.name}" for alias in node.names
                      if alias.name.startswith("sessions.services")]
    return found


@pytest.mark.parametrize("name", STEP_MACHINE)
def test_the_step_machine_writes_nothing_itself(name):
    assert _writes(_tree(name)) == []


def test_the_run_loop_reaches_the_sessions_services_only_through_its_journal():
    outside = {}
    for path in sorted(RUNLOOP.rglob("*.py")):
        relative = path.relative_to(RUNLOOP).as_posix()
        if relative.startswith("journal/") or relative in WIRING:
            continue
        found = _imports_of_services(ast.parse(path.read_text(), filename=relative))
        if found:
            outside[relative] = found
    assert outside == {}


def test_the_source_rules_would_catch_a_write():
    """The rules above can fail: a direct write and a service import are found."""
    tree = ast.parse("from sessions.services.events import event_emit\n"
                     "def f(run, instance):\n"
                     "    event_emit(run_id=run.pk, type='x')\n"
                     "    instance.refresh_from_db(fields=['frame'])\n"
                     "    Run.objects.filter(pk=1).update(status='x')\n")
    assert sorted(_writes(tree)) == ["3: event_emit", "4: .refresh_from_db(", "5: .objects", "5: .update("]
    assert _imports_of_services(tree) == ["1: from sessions.services.events"]
