"""The offline demo shows memory end to end (MEM-2, MEM-3): "Remember that …" saves a
line through the memory tool, and a later session answers "What do you remember about
me?" from the block its request carries — the README's first-ten-minutes walk-through."""
from __future__ import annotations

import pytest

from agents.services import agent_publish
from memory.selectors import MemoryOwner, memory_files
from memory.services import memory_forget
from models_catalog.demo_memory import memory_files_shown, memory_reply
from sessions.models import Run, Session, SessionMessage
from tests.runloop.driving import ask_and_run

pytestmark = pytest.mark.django_db(transaction=True)


def _answers(run: Run) -> str:
    return " ".join(m.message["content"] or "" for m in SessionMessage.objects.filter(run=run, kind="assistant"))


def test_mem2_the_demo_saves_what_it_is_told_to_remember_and_a_new_chat_recalls_it(agent, alice, space):
    agent.memory = True
    agent.save(update_fields=["memory"])
    version = agent_publish(agent=agent, published_by=alice)

    def chat() -> Session:
        return Session.objects.create(space=space, user=alice, agent=agent, version=version)

    assert ask_and_run(chat(), "Remember that I use metric units.").status == Run.Status.COMPLETED
    assert ask_and_run(chat(), "Remember: my project is the Harbour Bridge retrofit").status == Run.Status.COMPLETED
    owner = MemoryOwner(space_id=space.pk, agent_id=agent.pk, user_id=alice.pk)
    assert memory_files(owner=owner) == {"/memories/notes.md": "- I use metric units.\n"
                                                               "- my project is the Harbour Bridge retrofit."}
    recalled = ask_and_run(chat(), "What do you remember about me?")
    assert "metric units" in _answers(recalled) and "Harbour Bridge" in _answers(recalled)

    memory_forget(owner=owner)
    forgotten = ask_and_run(chat(), "What do you remember about me?")
    assert "nothing saved" in _answers(forgotten) and "metric" not in _answers(forgotten)


def test_the_demo_without_memory_does_not_answer_from_memory():
    assert memory_reply("Remember that I like tea.", "Be brief.", {"memory": {}}) is None
    assert memory_files_shown("no block here") is None
    block = '<memory>\npreface\n<file path="/memories/a.md">\nTea.\n</file>\n</memory>'
    assert memory_files_shown(block) == {"/memories/a.md": "Tea."}
    assert memory_reply("Remember that I like tea.", block, {}) is None  # no tool offered: not its memory
