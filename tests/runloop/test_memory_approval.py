"""The memory tool's approval policy, frozen at publish, in the run loop (SPEC §7c MEM-2 with
TOOL-7), on both wires: with "When it may change something" a memory write waits for the
person and a view does not; the policy set on an agent whose memory is then turned off is
not frozen.

alice talks with the fake agent (tests/runloop/conftest.py).
"""
from __future__ import annotations

import json

import pytest

from sessions.models import Run, ToolApproval
from tests.fakes.fake_provider import chat_stream
from tests.runloop.driving import ask_and_run

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")


def _memory(arguments: dict, call_id: str) -> dict:
    return {"id": call_id, "name": "memory", "arguments": json.dumps(arguments)}


def test_mem2_with_side_effects_a_memory_write_waits_and_a_view_does_not(fake_session, strict, fake):
    replies = iter([chat_stream(tool_calls=[_memory({"command": "view", "path": "/memories"}, "m1")]),
                    chat_stream(tool_calls=[_memory({"command": "create", "path": "/memories/a.md",
                                                     "file_text": "Metric units."}, "m2")])])
    strict.handler = lambda request: next(replies)
    session = fake_session(tools=("calculator",), memory=True,
                           tool_overrides={"memory": {"approval": "side_effects"}})
    assert session.version.tool_approvals == {"memory": "side_effects"}
    run = ask_and_run(session, "Remember that I use metric units.")
    assert run.status == Run.Status.WAITING, run.error
    assert list(ToolApproval.objects.filter(run=run).values_list("tool", "why")) == [
        ("memory", "This tool may change something outside the chat.")]


def test_mem2_a_memory_policy_is_frozen_only_while_memory_is_on(fake_agent_factory):
    _, version = fake_agent_factory(tools=("calculator",), memory=False,
                                    tool_overrides={"memory": {"approval": "always"}})
    assert version.memory is False and version.tool_approvals == {}
