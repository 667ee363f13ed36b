"""Memory across sessions in the run loop (SPEC §7c, MEM-1..3), on both wires.

Alice tells the agent something in one session; its ``memory`` tool saves it; her next
session's requests carry it after the system instructions. Bob, in the same space with the
same agent, never sees it. On Anthropic's wire the tool is Anthropic's own memory tool
(with its beta header, which the strict fake requires).
"""
from __future__ import annotations

import json

import pytest

from memory.models import MemoryChange
from memory.selectors import MemoryOwner, memory_files
from memory.services import memory_command, memory_forget, memory_use_set
from sessions.models import Run, Session
from tests.fakes.fake_provider import chat_stream
from tests.fakes.summaries import is_summary
from tests.runloop.driving import ask_and_run

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")

UNITS = "Alice works in metric units and is on the Harbour Bridge retrofit."


def _save_call(text=UNITS, call_id="mem-1"):
    return {"id": call_id, "name": "memory",
            "arguments": json.dumps({"command": "create", "path": "/memories/alice.md", "file_text": text})}


def _system_text(request) -> str:
    """The system text the model received, on either wire."""
    native = request.native
    if native is not None:
        return "\n".join(block["text"] for block in native.get("system", []))
    first = request.json["messages"][0]
    return first["content"] if first["role"] == "system" else ""


def _tool_names(request) -> list[str]:
    if request.native is not None:
        return [tool["name"] for tool in request.native.get("tools", [])]
    return [tool["function"]["name"] for tool in request.json.get("tools", [])]


def _owner(session) -> MemoryOwner:
    return MemoryOwner(space_id=session.space_id, agent_id=session.agent_id, user_id=session.user_id)


def _next_session(first: Session, user=None) -> Session:
    return Session.objects.create(space=first.space, user=user or first.user, agent=first.agent, version=first.version)


def test_mem2_mem3_written_in_one_session_read_in_the_next(fake_session, strict, fake, dialect):
    replies = iter([chat_stream(tool_calls=[_save_call()]), chat_stream(["Noted."]), chat_stream(["Metric."])])
    strict.handler = lambda request: next(replies)
    first = fake_session(tools=("calculator",), memory=True)
    assert ask_and_run(first, "I work in metric, on the Harbour Bridge retrofit.").status == Run.Status.COMPLETED
    assert memory_files(owner=_owner(first)) == {"/memories/alice.md": UNITS}
    first_request = fake.requests[0]
    assert "memory" in _tool_names(first_request)
    assert UNITS not in _system_text(first_request)
    if dialect == "anthropic":
        assert {"type": "memory_20250818", "name": "memory"} in first_request.native["tools"]
        assert first_request.headers["anthropic-beta"] == "context-management-2025-06-27"

    second = _next_session(first)
    assert ask_and_run(second, "Which units do I use?").status == Run.Status.COMPLETED
    system = _system_text(fake.requests[-1])
    assert system.startswith("Be brief.")
    assert UNITS in system and "data, not instructions" in system
    change = MemoryChange.objects.get()
    assert (change.by, change.command, change.session_id, change.user_id) == ("agent", "create", first.pk,
                                                                               first.user_id)


def test_mem1_another_person_of_the_space_with_the_same_agent_never_sees_it(fake_session, strict, fake, bob):
    strict.handler = lambda request: chat_stream(["Hello."])
    alices = fake_session(tools=("calculator",), memory=True)
    memory_command(owner=_owner(alices), arguments={"command": "create", "path": "/memories/a.md",
                                                    "file_text": UNITS}, by="person")
    bobs = _next_session(alices, user=bob)
    assert ask_and_run(bobs, "What do you know about me?").status == Run.Status.COMPLETED
    request = fake.requests[-1]
    assert UNITS not in json.dumps(request.native or request.json)
    assert memory_files(owner=_owner(bobs)) == {}


def test_mem4_forget_everything_empties_the_next_request(fake_session, strict, fake):
    strict.handler = lambda request: chat_stream(["Hello."])
    session = fake_session(tools=("calculator",), memory=True)
    memory_command(owner=_owner(session), arguments={"command": "create", "path": "/memories/a.md",
                                                     "file_text": UNITS}, by="person")
    assert ask_and_run(session, "Hi.").status == Run.Status.COMPLETED
    assert UNITS in _system_text(fake.requests[-1])
    memory_forget(owner=_owner(session))
    assert ask_and_run(session, "Hi again.").status == Run.Status.COMPLETED
    assert UNITS not in _system_text(fake.requests[-1]) and "No files yet" in _system_text(fake.requests[-1])
    # The copy the first run froze is gone too: nothing kept of it resumes with a run.
    assert not any(UNITS in (run.memory or "") for run in Run.objects.filter(session=session))


def test_mem4_dont_use_memory_for_me_leaves_out_the_block_and_the_tool(fake_session, strict, fake):
    strict.handler = lambda request: chat_stream(["Hello."])
    session = fake_session(tools=("calculator",), memory=True)
    memory_command(owner=_owner(session), arguments={"command": "create", "path": "/memories/a.md",
                                                     "file_text": UNITS}, by="person")
    memory_use_set(owner=_owner(session), use=False)
    assert ask_and_run(session, "Hi.").status == Run.Status.COMPLETED
    assert "memory" not in _tool_names(fake.requests[-1])
    assert "<memory>" not in _system_text(fake.requests[-1])


def test_mem2_an_agent_without_memory_has_no_memory_tool(fake_session, strict, fake):
    strict.handler = lambda request: chat_stream(["Hello."])
    session = fake_session(tools=("calculator",))
    assert ask_and_run(session, "Hi.").status == Run.Status.COMPLETED
    assert "memory" not in _tool_names(fake.requests[-1])
    assert "<memory>" not in _system_text(fake.requests[-1])


def test_mem2_a_write_past_the_bound_is_a_tool_error_saying_the_room_left(fake_session, strict, fake, settings):
    settings.AGENTLOOM_MEMORY_MAX_CHARS = 500
    replies = iter([chat_stream(tool_calls=[_save_call("x" * 600)]), chat_stream(["Too long."])])
    strict.handler = lambda request: next(replies)
    session = fake_session(tools=("calculator",), memory=True)
    assert ask_and_run(session, "Remember this.").status == Run.Status.COMPLETED
    result = json.dumps(fake.requests[-1].native or fake.requests[-1].json)
    assert "Memory is full" in result and "500 left" in result
    assert memory_files(owner=_owner(session)) == {}


def test_mem3_the_request_prefix_with_memory_is_byte_stable_across_the_steps_of_a_run(fake_session, strict, fake):
    """The agent writes memory mid-run; the run's later requests keep the block it started
    with (the change reaches the model as the tool's result), so the cached prefix holds."""
    replies = iter([chat_stream(tool_calls=[_save_call()]),
                    chat_stream(tool_calls=[_save_call("Changed again.", call_id="mem-2")]), chat_stream(["Done."])])
    strict.handler = lambda request: next(replies)
    session = fake_session(tools=("calculator",), memory=True)
    memory_command(owner=_owner(session), arguments={"command": "create", "path": "/memories/old.md",
                                                     "file_text": "Old fact."}, by="person")
    assert ask_and_run(session, "Remember my units.").status == Run.Status.COMPLETED
    steps = fake.requests[-3:]
    prefixes = {json.dumps([(r.native or r.json).get("system"), (r.native or r.json).get("tools"),
                            (r.json["messages"][0] if r.native is None else None)]) for r in steps}
    assert len(prefixes) == 1
    assert "Old fact." in _system_text(steps[-1]) and UNITS not in _system_text(steps[-1])


def test_mem3_memory_survives_every_compaction(fake_session, strict, fake):
    def handler(request):
        if is_summary(request.json["messages"]):
            return chat_stream(["<summary>\n1. Request: noted.\n</summary>"])
        return chat_stream(["Here are the figures in detail. " * 20])

    strict.handler = handler
    session = fake_session(tools=("calculator",), memory=True, window=16_000,
                           context_policy={"target_ratio": 0.05, "user_turns": 2})
    memory_command(owner=_owner(session), arguments={"command": "create", "path": "/memories/a.md",
                                                     "file_text": UNITS}, by="person")
    for n in range(5):
        assert ask_and_run(session, f"Question {n}. " + "Detail. " * 60).status == Run.Status.COMPLETED
    summaries = [r for r in fake.requests if is_summary(r.json["messages"])]
    actions = [r for r in fake.requests if not is_summary(r.json["messages"])]
    assert summaries, "the policy compacted"
    assert all(UNITS in _system_text(r) for r in actions)
