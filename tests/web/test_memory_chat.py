"""MEM-4 in the chat: a memory tool step in words, the person's changes from the panel as
notes in the session where they made them, and the page's addresses of the panel."""
from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from memory.models import MemoryChange
from memory.selectors import MemoryOwner
from memory.services import memory_command, memory_file_put, memory_forget
from tests.web.conftest import finished_run
from web.memory_words import memory_change_words, memory_notes_by_run, memory_step_words

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("arguments", "words"), [
    ({"command": "create", "path": "/memories/alice.md", "file_text": "x"}, "Saved to memory: /memories/alice.md"),
    ('{"command": "str_replace", "path": "/memories/a.md", "old_str": "a", "new_str": "b"}',
     "Edited in memory: /memories/a.md"),
    ('{"command": "view", "path": "/memories"}', "Looked in memory: /memories"),
    ({"command": "delete", "path": "/memories/a.md"}, "Deleted from memory: /memories/a.md"),
    ({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"},
     "Renamed in memory: /memories/a.md → /memories/b.md"),
    ({"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "x"},
     "Added to memory: /memories/a.md"),
])
def test_a_memory_call_reads_as_what_it_did(arguments, words):
    assert memory_step_words("memory", arguments) == words


@pytest.mark.parametrize(("name", "arguments"), [
    ("calculator", {"command": "create", "path": "/memories/a.md"}),
    ("memory", "not json"), ("memory", "[[["), ("memory", {"command": "format_disk"}), ("memory", ["create"]),
])
def test_anything_else_keeps_its_usual_step(name, arguments):
    assert memory_step_words(name, arguments) == ""


def _change(by: str, command: str, path: str, at: datetime, new_path: str = "") -> MemoryChange:
    return MemoryChange(by=by, command=command, path=path, new_path=new_path, created_at=at)


def test_changes_read_as_who_did_what():
    assert memory_change_words(_change("agent", "create", "/memories/a.md", T0), agent_name="Keeper") == (
        "Keeper saved /memories/a.md")
    assert memory_change_words(_change("person", "rename", "/memories/a.md", T0, "/memories/b.md"),
                               agent_name="Keeper") == "You renamed /memories/a.md to /memories/b.md"
    assert memory_change_words(_change("person", "memory_off", "", T0), agent_name="Keeper") == (
        "You turned memory off (“don't use memory for me”)")


def test_the_persons_changes_follow_the_run_they_came_after_and_the_agents_are_left_to_its_steps():
    runs = [SimpleNamespace(pk=1, created_at=T0), SimpleNamespace(pk=2, created_at=T0 + timedelta(minutes=5))]
    changes = [_change("person", "forget", "/memories", T0 - timedelta(minutes=1)),
               _change("agent", "create", "/memories/a.md", T0 + timedelta(minutes=1)),
               _change("person", "delete", "/memories/a.md", T0 + timedelta(minutes=2)),
               _change("person", "create", "/memories/b.md", T0 + timedelta(minutes=9))]
    assert memory_notes_by_run(changes, runs) == {
        1: ["Memory: You forgot everything in memory", "Memory: You deleted /memories/a.md"],
        2: ["Memory: You saved /memories/b.md"]}
    assert memory_notes_by_run(changes, []) == {}


@pytest.mark.django_db
def test_the_session_page_shows_alices_panel_changes_in_her_session_only(alice, bob, agent, make_session,
                                                                          client_for):
    alices, bobs = make_session(alice), make_session(bob)
    finished_run(alices)
    finished_run(bobs)
    mine = MemoryOwner(space_id=agent.space_id, agent_id=agent.pk, user_id=alice.pk)
    memory_file_put(owner=mine, path="/memories/alice.md", content="tea", session_id=alices.pk)
    memory_command(owner=mine, arguments={"command": "delete", "path": "/memories/alice.md"},
                   by=MemoryChange.By.AGENT, session_id=alices.pk)  # on its step, not a note
    memory_forget(owner=mine)  # the memory log: in no session

    html = client_for(alice).get(f"/sessions/{alices.pk}/").content.decode()
    assert html.count('class="memory-note"') == 1
    assert '<p class="memory-note" role="note">Memory: You saved /memories/alice.md</p>' in html
    assert html.index("memory-note") > html.index('class="run')
    assert 'class="memory-note"' not in client_for(bob).get(f"/sessions/{bobs.pk}/").content.decode()


@pytest.mark.django_db
def test_the_chat_page_hands_the_panel_its_addresses_and_words(alice, agent, make_session, client_for):
    session = make_session(alice)
    finished_run(session)
    html = client_for(alice).get(f"/sessions/{session.pk}/").content.decode()
    config = json.loads(html.split('id="chat-config" type="application/json">', 1)[1].split("</script>", 1)[0])
    assert config["urls"]["memory"] == f"/api/v1/agents/{agent.pk}/memory"
    assert config["urls"]["memoryFile"] == f"/api/v1/agents/{agent.pk}/memory/{{path}}"
    assert config["memoryWords"]["steps"]["create"] == "Saved to memory: {path}"
    assert 'id="memory-open"' in html and 'id="memory-panel"' in html
    assert "<script>" not in html  # the panel's script is a file (CSP)


@pytest.mark.django_db
def test_a_new_chat_has_the_panel_too_with_no_session_to_record_in(alice, agent, version, client_for):
    html = client_for(alice).get(f"/sessions/new?agent={agent.pk}").content.decode()
    config = json.loads(html.split('id="chat-config" type="application/json">', 1)[1].split("</script>", 1)[0])
    assert 'id="memory-open"' in html and config["sessionId"] is None
    assert config["urls"]["memory"] == f"/api/v1/agents/{agent.pk}/memory"
