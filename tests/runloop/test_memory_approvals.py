"""Memory in the run loop beyond a plain save (SPEC §7c, MEM-2, MEM-3; TOOL-7..9), on both wires.

- A memory write under the ``side_effects`` policy waits for Alice: nothing is in her
  memory until she approves (then it is, recorded as the agent's change of that session);
  denied, nothing ever is. A ``view`` is a read and never asks.
- A Claude model older than Claude 4 has no native memory tool: the run offers the
  function of the same schema instead (the strict fake refuses ``memory_20250818`` there).
- A worker that resumes a run keeps the memory block the run was made with, even when
  Alice edited her memory meanwhile; her next run carries the edit.
"""
from __future__ import annotations

import json

import pytest

from agents.services import agent_publish
from memory.models import MemoryChange
from memory.selectors import MemoryOwner, memory_files
from memory.services import memory_file_put
from runloop.loop import run_execute
from sessions.models import Run, Session, ToolApproval
from sessions.selectors.approvals import approvals_waiting
from sessions.services.approvals import approval_decide
from sessions.services.run_controls import run_resume
from tests.fakes.fake_provider import chat_stream, sequence
from tests.runloop.driving import ask_and_run
from tests.sessions.helpers import interrupted_after_calls

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")
ASK_BEFORE_WRITES = {"memory": {"approval": "side_effects"}}
UNITS = "Alice works in metric units."


def _memory_call(call_id="mem-1", **arguments):
    arguments = arguments or {"command": "create", "path": "/memories/alice.md", "file_text": UNITS}
    return {"id": call_id, "name": "memory", "arguments": json.dumps(arguments)}


def _owner(session) -> MemoryOwner:
    return MemoryOwner(space_id=session.space_id, agent_id=session.agent_id, user_id=session.user_id)


def _decide(run, alice, decision) -> Run:
    """Alice decides the waiting call as the API does; a worker takes the run up again."""
    [approval] = approvals_waiting(run=run)
    approval_decide(run=run, user=alice, call_id=approval.call_id, decision=decision, reason="not now")
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def _tool_results(request) -> list[str]:
    body = request.json
    return [str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "tool"]


def _system_text(request) -> str:
    if request.native is not None:
        return "\n".join(block["text"] for block in request.native.get("system", []))
    first = request.json["messages"][0]
    return json.dumps(first["content"]) if first["role"] == "system" else ""


def test_mem2_tool8_a_memory_write_needing_approval_waits_and_is_written_once_approved(fake_session, strict, fake,
                                                                                       alice):
    strict.handler = sequence(chat_stream(tool_calls=[_memory_call()]), chat_stream(["Saved."]))
    session = fake_session(memory=True, tool_overrides=ASK_BEFORE_WRITES)
    run = ask_and_run(session, "I work in metric; remember it.")
    assert run.status == Run.Status.WAITING
    assert [(a.tool, a.why) for a in approvals_waiting(run=run)] == [
        ("memory", "This call changes what the agent remembers about you across conversations.")]
    assert memory_files(owner=_owner(session)) == {} and not MemoryChange.objects.exists()

    run = _decide(run, alice, "approve")
    assert run.status == Run.Status.COMPLETED, run.error
    assert memory_files(owner=_owner(session)) == {"/memories/alice.md": UNITS}
    change = MemoryChange.objects.get()
    assert (change.by, change.command, change.session_id, change.run_id) == ("agent", "create", session.pk, run.pk)
    assert any("Created /memories/alice.md" in result for result in _tool_results(fake.requests[-1]))
    assert strict.rejections == []


def test_mem2_tool9_a_denied_memory_write_writes_nothing(fake_session, strict, fake, alice):
    strict.handler = sequence(chat_stream(tool_calls=[_memory_call()]), chat_stream(["I will not save it."]))
    session = fake_session(memory=True, tool_overrides=ASK_BEFORE_WRITES)
    run = _decide(ask_and_run(session, "I work in metric; remember it."), alice, "deny")
    assert run.status == Run.Status.COMPLETED, run.error
    assert memory_files(owner=_owner(session)) == {} and not MemoryChange.objects.exists()
    [result] = _tool_results(fake.requests[-1])
    assert "denied" in result and "not now" in result
    assert strict.rejections == []


def test_mem2_tool7_a_memory_view_is_a_read_and_never_asks(fake_session, strict, fake, alice):
    strict.handler = sequence(chat_stream(tool_calls=[_memory_call(command="view", path="/memories")]),
                              chat_stream(["Nothing saved yet."]))
    session = fake_session(memory=True, tool_overrides=ASK_BEFORE_WRITES)
    memory_file_put(owner=_owner(session), path="/memories/alice.md", content=UNITS)
    run = ask_and_run(session, "What do you remember?")
    assert run.status == Run.Status.COMPLETED, run.error
    assert not ToolApproval.objects.exists()
    [result] = _tool_results(fake.requests[-1])
    assert "/memories: 1 file" in result and "/memories/alice.md" in result
    assert strict.rejections == []


def test_mem2_a_claude_model_before_claude_4_gets_the_memory_function_not_the_native_tool(fake_agent_factory, strict,
                                                                                          fake, alice, space, dialect):
    agent, _ = fake_agent_factory(memory=True)
    agent.model_connection.model = "claude-3-5-sonnet-20241022"
    agent.model_connection.save(update_fields=["model"])
    version = agent_publish(agent=agent, published_by=alice)
    session = Session.objects.create(space=space, user=alice, agent=agent, version=version)
    strict.handler = sequence(chat_stream(tool_calls=[_memory_call()]), chat_stream(["Saved."]))
    assert ask_and_run(session, "I work in metric; remember it.").status == Run.Status.COMPLETED
    first = fake.requests[0]
    if dialect == "anthropic":  # the strict fake refuses memory_20250818 on claude-3 models
        assert first.native["model"] == "claude-3-5-sonnet-20241022"
        [memory] = [tool for tool in first.native["tools"] if tool["name"] == "memory"]
        assert memory.get("type", "custom") == "custom"
        assert memory["input_schema"]["properties"]["command"]["enum"][0] == "view"
        assert "context-management-2025-06-27" not in first.headers.get("anthropic-beta", "")
    else:
        assert first.json["model"] == "claude-3-5-sonnet-20241022"
        assert "memory" in [tool["function"]["name"] for tool in first.json["tools"]]
    assert memory_files(owner=_owner(session)) == {"/memories/alice.md": UNITS}
    assert strict.rejections == []


def test_mem3_a_resumed_run_keeps_its_frozen_memory_block_and_the_next_run_carries_the_edit(fake_session, strict,
                                                                                           fake, alice):
    session = fake_session(memory=True)
    memory_file_put(owner=_owner(session), path="/memories/alice.md", content="Units: imperial.")
    # The worker vanished after the model asked for a calculation, before running it.
    run = interrupted_after_calls(session, [("calc-1", "calculator", json.dumps({"expression": "6*7"}))])
    interrupted = Run.objects.get(pk=run.pk)
    frozen = interrupted.memory
    assert "Units: imperial." in frozen
    memory_file_put(owner=_owner(session), path="/memories/alice.md", content="Units: metric.")  # from the panel

    strict.handler = lambda request: chat_stream(["Done."])
    run_resume(run=Run.objects.get(pk=run.pk))
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    assert run.memory == frozen
    resumed = fake.requests[-1]
    assert "Units: imperial." in _system_text(resumed) and "Units: metric." not in _system_text(resumed)
    assert any("42" in result for result in _tool_results(resumed))  # the resumed run went on from its call
    assert run.attempt > interrupted.attempt  # a new attempt of the same run, by another worker's claim

    assert ask_and_run(session, "Which units?").status == Run.Status.COMPLETED
    assert "Units: metric." in _system_text(fake.requests[-1])
    assert strict.rejections == []


def test_mem2_run6_on_resume_an_interrupted_memory_view_is_made_again_and_a_write_stays_unknown(fake_session,
                                                                                               strict, fake):
    session = fake_session(memory=True)
    memory_file_put(owner=_owner(session), path="/memories/alice.md", content="Units: imperial.")
    view = json.dumps({"command": "view", "path": "/memories/alice.md"})
    write = json.dumps({"command": "create", "path": "/memories/b.md", "file_text": "Twice?"})
    run = interrupted_after_calls(session, [("view-1", "memory", view), ("write-1", "memory", write)])

    strict.handler = lambda request: chat_stream(["Done."])
    run_resume(run=Run.objects.get(pk=run.pk))
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    results = _tool_results(fake.requests[-1])
    assert any("Units: imperial." in result for result in results)  # the read was made again
    assert any("unknown" in result.lower() for result in results)  # the write was not repeated
    assert memory_files(owner=_owner(session)) == {"/memories/alice.md": "Units: imperial."}


def test_mem2_tool7_the_memory_tools_policy_is_set_in_the_draft_and_frozen_at_publish(space, alice, demo_connection):
    from agents.services import agent_create, agent_draft_validate
    from core.errors import ValidationFailed

    agent = agent_create(space=space, name="Keeper", model_connection=demo_connection, tools=[], created_by=alice)
    asked = {"memory": True, "tool_overrides": ASK_BEFORE_WRITES}
    assert agent_draft_validate(agent=agent, space_id=space.pk, data=asked)["tool_overrides"] == ASK_BEFORE_WRITES
    with pytest.raises(ValidationFailed) as refused:  # no memory, no memory tool to set a policy on
        agent_draft_validate(agent=agent, space_id=space.pk, data={"tool_overrides": ASK_BEFORE_WRITES})
    assert "the agent's memory is off" in str(refused.value.fields)
    agent.memory, agent.tool_overrides = True, ASK_BEFORE_WRITES
    agent.save(update_fields=["memory", "tool_overrides"])
    assert agent_publish(agent=agent, published_by=alice).tool_approvals == {"memory": "side_effects"}
    agent.memory = False
    agent.save(update_fields=["memory"])
    assert agent_publish(agent=agent, published_by=alice).tool_approvals == {}


def test_mem2_a_memory_policy_is_frozen_only_while_memory_is_on(fake_agent_factory):
    _, version = fake_agent_factory(tools=("calculator",), memory=False,
                                    tool_overrides={"memory": {"approval": "always"}})
    assert version.memory is False and version.tool_approvals == {}
