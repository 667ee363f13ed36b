"""Changing a person's memory through the services, on a real database (SPEC §7c, MEM-1,
MEM-2, MEM-4).

Alice and Bob are members of Acme and talk to the same agent. Every change is a record with
who, when, where and what -- never the text; forgetting forgets; "don't use memory for me"
takes the memory out of the next run; two writers never lose a write (PostgreSQL: the
``MemoryState`` row lock); and the bound holds for any sequence of commands through the
services, as it does for the pure core.
"""
from __future__ import annotations

import os
import threading

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as examples
from hypothesis import strategies as st

from memory.files import MemoryCommandError, memory_apply, memory_block, memory_size
from memory.models import MemoryChange, MemoryFile, MemoryState
from memory.selectors import MemoryOwner, memory_changes, memory_files, memory_for_run, memory_in_use
from memory.services import memory_command, memory_file_delete, memory_file_put, memory_forget, memory_use_set
from tests.faults.support import wait_for
from tests.memory.test_memory_files import ANY_COMMAND

SECRET = "Alice's door code is 4711-HARBOUR."
CI = os.environ.get("HYPOTHESIS_PROFILE") == "ci"


@pytest.fixture
def memory_agent(agent):
    agent.memory = True
    agent.save(update_fields=["memory"])
    return agent


@pytest.fixture
def memory_version(memory_agent, alice):
    from agents.services import agent_publish

    return agent_publish(agent=memory_agent, published_by=alice)


@pytest.fixture
def alices(space, memory_agent, alice) -> MemoryOwner:
    return MemoryOwner(space_id=space.pk, agent_id=memory_agent.pk, user_id=alice.pk)


@pytest.fixture
def bobs(space, memory_agent, bob) -> MemoryOwner:
    return MemoryOwner(space_id=space.pk, agent_id=memory_agent.pk, user_id=bob.pk)


def _create(owner, path="/memories/alice.md", text=SECRET, **extra) -> str:
    return memory_command(owner=owner, arguments={"command": "create", "path": path, "file_text": text}, **extra)


@pytest.mark.django_db
def test_mem4_a_change_by_the_agent_is_a_record_of_its_session_with_who_when_and_what_never_the_text(
        alices, make_session, alice):
    session = make_session(alice)
    started = timezone.now()
    assert _create(alices, by="agent", session_id=session.pk, run_id=9_001).startswith("Created /memories/alice.md")
    memory_command(owner=alices, by="agent", session_id=session.pk, run_id=9_001,
                   arguments={"command": "str_replace", "path": "/memories/alice.md", "old_str": "4711",
                              "new_str": "0815"})
    first, second = MemoryChange.objects.order_by("id")
    assert (first.by, first.command, first.path, first.session_id, first.run_id, first.user_id) == (
        "agent", "create", "/memories/alice.md", session.pk, 9_001, alice.pk)
    assert (first.chars_before, first.chars_after) == (0, len(SECRET))
    assert (second.command, second.chars_before, second.chars_after) == ("str_replace", len(SECRET), len(SECRET))
    assert started <= first.created_at <= second.created_at <= timezone.now()
    assert memory_changes(owner=alices) == [second, first]
    # Never the text: no column of any record holds it, or any part of it.
    for row in MemoryChange.objects.values():
        assert not any(isinstance(value, str) and ("4711" in value or "0815" in value) for value in row.values())


@pytest.mark.django_db
def test_mem1_the_files_are_stored_encrypted(alices):
    _create(alices, by="person")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT content FROM {MemoryFile._meta.db_table}")
        stored = cursor.fetchall()
    assert len(stored) == 1 and "4711" not in str(stored[0][0])
    assert memory_files(owner=alices) == {"/memories/alice.md": SECRET}


@pytest.mark.django_db
def test_mem4_a_change_by_the_person_from_the_panel_goes_to_the_memory_log(alices, alice):
    memory_file_put(owner=alices, path="notes.md", content="Prefers tea.")
    memory_file_delete(owner=alices, path="/memories/notes.md")
    changes = MemoryChange.objects.order_by("id")
    assert [(c.by, c.command, c.path, c.session_id, c.run_id) for c in changes] == [
        ("person", "create", "/memories/notes.md", None, None), ("person", "delete", "/memories/notes.md", None, None)]
    assert memory_files(owner=alices) == {}


@pytest.mark.django_db
def test_mem2_a_view_or_a_refused_command_records_nothing_and_changes_nothing(alices):
    _create(alices, by="person")
    assert "4711" in memory_command(owner=alices, by="agent", arguments={"command": "view",
                                                                         "path": "/memories/alice.md"})
    with pytest.raises(MemoryCommandError, match="was not found"):
        memory_command(owner=alices, by="agent", arguments={"command": "str_replace", "path": "/memories/alice.md",
                                                            "old_str": "kelvin", "new_str": "x"})
    with pytest.raises(MemoryCommandError, match="outside /memories"):
        _create(alices, path="/etc/passwd", by="agent")
    assert MemoryChange.objects.count() == 1 and memory_files(owner=alices) == {"/memories/alice.md": SECRET}


@pytest.mark.django_db
def test_mem1_a_write_past_the_bound_keeps_the_memory_as_it_was(alices, settings):
    settings.AGENTLOOM_MEMORY_MAX_CHARS = 60
    _create(alices, by="person")
    with pytest.raises(MemoryCommandError, match=r"limit is 60 \(8 left\)"):
        _create(alices, path="/memories/more.md", text="too much", by="agent")
    assert memory_files(owner=alices) == {"/memories/alice.md": SECRET} and MemoryChange.objects.count() == 1


@pytest.mark.django_db
def test_mem4_forget_everything_removes_every_file_of_this_person_and_agent_only(alices, bobs, space, alice,
                                                                                 demo_connection):
    from agents.services import agent_create

    other = agent_create(space=space, name="Other", model_connection=demo_connection, instructions="Hi.",
                         tools=[], created_by=alice)
    others = MemoryOwner(space_id=space.pk, agent_id=other.pk, user_id=alice.pk)
    _create(alices, by="agent")
    _create(alices, path="/memories/projects/bridge.md", text="Phase 2.", by="agent")
    _create(bobs, path="/memories/bob.md", text="Bob's.", by="agent")
    _create(others, path="/memories/other.md", text="Other agent's.", by="agent")
    assert memory_forget(owner=alices) == 2
    assert memory_files(owner=alices) == {}
    assert memory_files(owner=bobs) == {"/memories/bob.md": "Bob's."}
    assert memory_files(owner=others) == {"/memories/other.md": "Other agent's."}
    forget = MemoryChange.objects.filter(command="forget").get()
    assert (forget.by, forget.user_id, forget.agent_id, forget.path, forget.chars_before) == (
        "person", alice.pk, alices.agent_id, "/memories", len(SECRET) + len("Phase 2."))
    assert memory_forget(owner=alices) == 0  # forgetting an empty memory is still recorded, and harmless


@pytest.mark.django_db
def test_mem4_dont_use_memory_for_me_takes_it_out_of_the_next_run_and_back(alices, memory_version, alice, space, bob):
    _create(alices, by="person")
    frozen = memory_for_run(version=memory_version, user_id=alice.pk, space_id=space.pk)
    assert frozen == memory_block({"/memories/alice.md": SECRET})
    memory_use_set(owner=alices, use=False)
    memory_use_set(owner=alices, use=False)  # the same choice again is no change
    assert memory_in_use(owner=alices) is False
    assert memory_for_run(version=memory_version, user_id=alice.pk, space_id=space.pk) is None
    assert memory_files(owner=alices) == {"/memories/alice.md": SECRET}  # kept, only not used
    assert memory_for_run(version=memory_version, user_id=bob.pk, space_id=space.pk) == memory_block({})
    memory_use_set(owner=alices, use=True)
    assert memory_for_run(version=memory_version, user_id=alice.pk, space_id=space.pk) == frozen
    assert [c.command for c in MemoryChange.objects.order_by("id")] == ["create", "memory_off", "memory_on"]


@pytest.mark.django_db(transaction=True)
def test_mem4_two_writers_at_once_lose_no_write(require_postgres, alices):
    """Two tabs (or a run and the panel) edit the same file at once. Each change reads the
    files after taking the owner's lock, so neither overwrites the other's: every line each
    inserted and every counter each replaced is there at the end."""
    rounds = 15
    _create(alices, path="/memories/log.md", text="a=0\nb=0", by="person")
    errors: list[BaseException] = []
    start = threading.Barrier(3, timeout=30)

    def writer(name: str) -> None:
        try:
            start.wait()
            for n in range(rounds):
                memory_command(owner=alices, by="agent", arguments={
                    "command": "str_replace", "path": "/memories/log.md", "old_str": f"{name}={n}\n",
                    "new_str": f"{name}={n + 1}\n"})
                memory_command(owner=alices, by="agent", arguments={
                    "command": "insert", "path": "/memories/log.md", "insert_line": 2,
                    "insert_text": f"{name} wrote {n}"})
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            errors.append(exc)
        finally:
            connections.close_all()

    # "b=0" is the file's last line: each writer's counter must be followed by a newline.
    memory_command(owner=alices, by="person", arguments={"command": "insert", "path": "/memories/log.md",
                                                         "insert_line": 2, "insert_text": "--"})
    threads = [threading.Thread(target=writer, args=(name,)) for name in ("a", "b")]
    # The main thread holds the lock first, so both writers start by waiting on it.
    with transaction.atomic():
        MemoryState.objects.filter(**alices.rows()).update(updated_at=timezone.now())
        for thread in threads:
            thread.start()
        start.wait()
        wait_for(lambda: _waiting_for_a_lock() >= 2, timeout=15, what="both writers waiting on the lock")
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads) and errors == []
    lines = memory_files(owner=alices)["/memories/log.md"].split("\n")
    assert lines[:2] == [f"a={rounds}", f"b={rounds}"] and lines[-1] == "--"
    assert sorted(lines[2:-1]) == sorted(f"{name} wrote {n}" for name in "ab" for n in range(rounds))
    assert MemoryChange.objects.filter(by="agent").count() == 4 * rounds


def _waiting_for_a_lock() -> int:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT count(DISTINCT pid) FROM pg_locks WHERE NOT granted")
        return cursor.fetchone()[0]


@pytest.mark.django_db
@examples(max_examples=60 if CI else 25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(commands=st.lists(ANY_COMMAND, max_size=15), limit=st.sampled_from([40, 300]))
def test_mem1_the_bound_holds_through_the_services_for_any_commands(alices, bobs, commands, limit):
    from django.conf import settings as django_settings

    memory_forget(owner=alices)
    _create(bobs, path="/memories/bob.md", text="Bob's own.", by="person")
    kept = django_settings.AGENTLOOM_MEMORY_MAX_CHARS
    django_settings.AGENTLOOM_MEMORY_MAX_CHARS = limit
    try:
        model: dict[str, str] = {}
        for arguments in commands:
            records = MemoryChange.objects.count()
            try:
                memory_command(owner=alices, arguments=arguments, by="agent")
            except MemoryCommandError:
                assert MemoryChange.objects.count() == records
            else:
                model = memory_apply(model, arguments, limit=limit)[0]
            files = memory_files(owner=alices)
            assert files == model and memory_size(files) <= limit
    finally:
        django_settings.AGENTLOOM_MEMORY_MAX_CHARS = kept
    assert memory_files(owner=bobs) == {"/memories/bob.md": "Bob's own."}
