"""MEM-4: the memory API — a person's own memory for an agent, seen, edited and erased by
them alone (MEM-1), every change a record with who and when."""
from __future__ import annotations

import json

import pytest
from django.test import Client

from memory.models import MemoryChange, MemoryFile, MemoryState
from memory.selectors import MemoryOwner, memory_files, memory_in_use
from memory.services import memory_command
from tests.conftest import token_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def memory_version(agent, alice):
    """The agent with memory on, published."""
    from agents.services import agent_publish

    agent.memory = True
    agent.save(update_fields=["memory"])
    return agent_publish(agent=agent, published_by=alice)


def api(user) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Token {token_for(user)}")


def owner(agent, user) -> MemoryOwner:
    return MemoryOwner(space_id=agent.space_id, agent_id=agent.pk, user_id=user.pk)


def put(client: Client, url: str, body) -> object:
    return client.put(url, json.dumps(body), content_type="application/json")


def agent_saves(agent, user, path: str, text: str, session_id: int | None = None) -> None:
    memory_command(owner=owner(agent, user), arguments={"command": "create", "path": path, "file_text": text},
                   by=MemoryChange.By.AGENT, session_id=session_id)


def test_alice_sees_what_the_agent_saved_and_bob_sees_nothing_of_it(alice, bob, agent, memory_version):
    agent_saves(agent, alice, "/memories/alice.md", "Alice prefers metric units.")
    mine = api(alice).get(f"/api/v1/agents/{agent.pk}/memory").json()
    assert mine["agent_memory"] is True and mine["use_memory"] is True
    assert [(f["path"], f["content"], f["chars"]) for f in mine["files"]] == [
        ("/memories/alice.md", "Alice prefers metric units.", 27)]
    assert mine["used_chars"] == len("/memories/alice.md") + 27 and mine["max_chars"] == 8000
    assert [(c["by"], c["command"], c["path"], c["chars_after"], c["session"]) for c in mine["changes"]] == [
        ("agent", "create", "/memories/alice.md", 27, None)]

    bobs = api(bob).get(f"/api/v1/agents/{agent.pk}/memory").json()
    assert bobs["files"] == [] and bobs["changes"] == [] and bobs["used_chars"] == 0
    assert api(bob).get(f"/api/v1/agents/{agent.pk}/memory/alice.md").status_code == 404
    assert api(bob).delete(f"/api/v1/agents/{agent.pk}/memory/alice.md").status_code == 404
    api(bob).delete(f"/api/v1/agents/{agent.pk}/memory")  # bob forgets his own: alice's stays
    assert memory_files(owner=owner(agent, alice)) == {"/memories/alice.md": "Alice prefers metric units."}


def test_mallory_of_another_space_gets_404_for_every_route(mallory, mallory_space, alice, agent, memory_version):
    agent_saves(agent, alice, "/memories/alice.md", "secret")
    client = api(mallory)
    base = f"/api/v1/agents/{agent.pk}/memory"
    responses = [client.get(base), put(client, base, {"use_memory": False}), client.delete(base),
                 client.get(f"{base}/alice.md"), put(client, f"{base}/alice.md", {"content": "x"}),
                 client.delete(f"{base}/alice.md")]
    assert [r.status_code for r in responses] == [404] * 6
    assert all(r.json()["error"]["code"] == "not_found" for r in responses)
    assert memory_files(owner=owner(agent, alice)) == {"/memories/alice.md": "secret"}
    assert not MemoryFile.objects.filter(user=mallory).exists()


def test_a_person_no_longer_in_the_space_reaches_nothing(alice, bob, space, agent, memory_version):
    from core.spaces.models import Membership

    agent_saves(agent, bob, "/memories/bob.md", "Bob")
    Membership.objects.filter(space=space, user=bob).delete()
    assert api(bob).get(f"/api/v1/agents/{agent.pk}/memory").status_code == 404


def test_alice_writes_reads_and_deletes_a_file_each_change_recorded_as_hers(alice, agent, memory_version):
    client = api(alice)
    base = f"/api/v1/agents/{agent.pk}/memory"
    written = put(client, f"{base}/projects/a.md", {"content": "Project A: due Friday."})
    assert written.status_code == 200
    assert written.json()["path"] == "/memories/projects/a.md" and written.json()["chars"] == 22
    assert client.get(f"{base}/projects/a.md").json()["content"] == "Project A: due Friday."
    assert put(client, f"{base}/notes.md", {"content": ""}).status_code == 200  # an empty file is a file
    assert client.delete(f"{base}/projects/a.md").status_code == 204
    assert memory_files(owner=owner(agent, alice)) == {"/memories/notes.md": ""}
    changes = client.get(base).json()["changes"]
    assert [(c["by"], c["command"], c["path"]) for c in changes] == [
        ("person", "delete", "/memories/projects/a.md"), ("person", "create", "/memories/notes.md"),
        ("person", "create", "/memories/projects/a.md")]
    assert client.get(f"{base}/projects/a.md").status_code == 404
    assert client.delete(f"{base}/projects/a.md").status_code == 404


def test_a_change_made_inside_alices_session_is_recorded_in_it_and_only_her_own(alice, bob, agent, memory_version,
                                                                               make_session):
    from memory.selectors import memory_changes_in_session

    alices, bobs = make_session(alice), make_session(bob)
    client = api(alice)
    base = f"/api/v1/agents/{agent.pk}/memory"
    assert put(client, f"{base}/notes.md", {"content": "hi", "session": alices.pk}).status_code == 200
    assert client.delete(f"{base}/notes.md?session={alices.pk}").status_code == 204
    assert [(c.command, c.by) for c in memory_changes_in_session(session_id=alices.pk)] == [
        ("create", "person"), ("delete", "person")]
    refused = put(client, f"{base}/notes.md", {"content": "hi", "session": bobs.pk})
    assert refused.status_code == 400 and "session" in refused.json()["error"]["fields"]
    assert client.delete(f"{base}?session={bobs.pk}").status_code == 400
    assert client.delete(f"{base}?session=abc").status_code == 400
    assert memory_files(owner=owner(agent, alice)) == {} and memory_changes_in_session(session_id=bobs.pk) == []


def test_forget_everything_empties_the_memory_and_says_how_much_went(alice, agent, memory_version):
    agent_saves(agent, alice, "/memories/a.md", "12345")
    agent_saves(agent, alice, "/memories/b/c.md", "678")
    assert api(alice).delete(f"/api/v1/agents/{agent.pk}/memory").status_code == 204
    assert memory_files(owner=owner(agent, alice)) == {}
    after = api(alice).get(f"/api/v1/agents/{agent.pk}/memory").json()
    assert after["files"] == [] and after["used_chars"] == 0
    assert (after["changes"][0]["command"], after["changes"][0]["by"], after["changes"][0]["chars_before"]) == (
        "forget", "person", 8)


def test_dont_use_memory_for_me_is_recorded_and_can_be_undone(alice, agent, memory_version):
    client = api(alice)
    base = f"/api/v1/agents/{agent.pk}/memory"
    answer = put(client, base, {"use_memory": False})
    assert answer.status_code == 200 and answer.json()["use_memory"] is False
    assert memory_in_use(owner=owner(agent, alice)) is False
    assert MemoryState.objects.get(user=alice, agent=agent).use_memory is False
    assert put(client, base, {"use_memory": False}).status_code == 200  # the same choice: no second record
    assert put(client, base, {"use_memory": True}).json()["use_memory"] is True
    assert [c["command"] for c in client.get(base).json()["changes"]] == ["memory_on", "memory_off"]


@pytest.mark.parametrize(("url", "body", "field"), [
    ("/memory/notes.md", {"content": 42}, "content"),
    ("/memory/notes.md", {"content": None}, "content"),
    ("/memory/notes.md", {}, "content"),
    ("/memory/notes.md", {"content": "x", "mood": "happy"}, "mood"),
    ("/memory/notes.md", {"content": "x" * 8001}, "content"),
    ("/memory/notes.md", {"content": "x", "session": "one"}, "session"),
    ("/memory/%2E%2E/etc/passwd", {"content": "x"}, "path"),
    ("/memory/a/%2E%2E/b.md", {"content": "x"}, "path"),
    ("/memory/" + "p" * 300, {"content": "x"}, "path"),
    ("/memory/bad%5Cname.md", {"content": "x"}, "path"),
    ("/memory", {"use_memory": "no"}, "use_memory"),
    ("/memory", {"use_memory": 0}, "use_memory"),
    ("/memory", {}, "use_memory"),
    ("/memory", {"use_memory": False, "everything": True}, "everything"),
])
def test_bad_input_is_a_400_naming_the_field_and_changes_nothing(alice, agent, memory_version, url, body, field):
    agent_saves(agent, alice, "/memories/notes.md", "kept")
    before = (memory_files(owner=owner(agent, alice)), MemoryChange.objects.count(),
              memory_in_use(owner=owner(agent, alice)))
    response = put(api(alice), f"/api/v1/agents/{agent.pk}{url}", body)
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert (memory_files(owner=owner(agent, alice)), MemoryChange.objects.count(),
            memory_in_use(owner=owner(agent, alice))) == before


def test_a_file_where_a_directory_is_or_inside_a_file_is_a_400_on_path(alice, agent, memory_version):
    agent_saves(agent, alice, "/memories/projects/a.md", "A")
    for url in ("/memory/projects", "/memory/projects/a.md/b.md"):
        response = put(api(alice), f"/api/v1/agents/{agent.pk}{url}", {"content": "x"})
        assert response.status_code == 400 and set(response.json()["error"]["fields"]) == {"path"}
    assert memory_files(owner=owner(agent, alice)) == {"/memories/projects/a.md": "A"}


def test_a_write_past_the_bound_says_how_much_room_is_left(alice, agent, memory_version, settings):
    settings.AGENTLOOM_MEMORY_MAX_CHARS = 100
    agent_saves(agent, alice, "/memories/a.md", "x" * 50)  # 64 counted with its path
    response = put(api(alice), f"/api/v1/agents/{agent.pk}/memory/b.md", {"content": "y" * 40})
    assert response.status_code == 400
    assert "36 left" in response.json()["error"]["fields"]["content"]
    assert memory_files(owner=owner(agent, alice)) == {"/memories/a.md": "x" * 50}


def test_with_the_agents_memory_off_a_file_cannot_be_written_but_is_still_seen_and_erased(alice, agent, version):
    # ``version`` is published without memory: what was kept before stays the person's.
    agent_saves(agent, alice, "/memories/old.md", "from when memory was on")
    client = api(alice)
    base = f"/api/v1/agents/{agent.pk}/memory"
    seen = client.get(base).json()
    assert seen["agent_memory"] is False and [f["path"] for f in seen["files"]] == ["/memories/old.md"]
    refused = put(client, f"{base}/new.md", {"content": "x"})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "memory_off"
    assert "memory is off" in refused.json()["error"]["message"]
    assert client.get(f"{base}/old.md").status_code == 200
    assert client.delete(f"{base}/old.md").status_code == 204
    agent_saves(agent, alice, "/memories/again.md", "x")
    assert client.delete(base).status_code == 204
    assert memory_files(owner=owner(agent, alice)) == {}


def test_an_agent_never_published_has_no_memory_on(alice, agent):
    assert api(alice).get(f"/api/v1/agents/{agent.pk}/memory").json()["agent_memory"] is False


def test_the_routes_are_in_the_api_schema(alice):
    schema = api(alice).get("/api/schema/?format=json").json()
    assert {"get", "put", "delete"} <= set(schema["paths"]["/api/v1/agents/{agent_id}/memory"])
    assert {"get", "put", "delete"} <= set(schema["paths"]["/api/v1/agents/{agent_id}/memory/{path}"])
