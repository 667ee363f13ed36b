"""People's memory in the console (SPEC §7c, MEM-1 "no staff without an audited read", MEM-4):
the owners' list and the change log show sizes and times, never what memory says; the read
page writes one access-audit row before it shows the files; staff without the permissions
get nothing.

alice has a memory with the agent Helper in Acme; olivia is the operator (a staff
superuser); sam is staff who may view the owners' list but not the files (tests/conftest.py).
"""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from memory.models import MemoryChange, MemoryState
from memory.selectors import MemoryOwner
from memory.services import memory_command, memory_file_put, memory_forget
from sessions.models import AccessAudit

pytestmark = pytest.mark.django_db

NOTE = "Alice prefers metric units; her project is Kestrel"
OWNERS = "/admin/memory/memorystate/"
CHANGES = "/admin/memory/memorychange/"


@pytest.fixture
def alices_memory(space, agent, alice) -> MemoryState:
    owner = MemoryOwner(space_id=space.pk, agent_id=agent.pk, user_id=alice.pk)
    memory_command(owner=owner, arguments={"command": "create", "path": "/memories/alice.md", "file_text": NOTE},
                   by=MemoryChange.By.AGENT)
    memory_command(owner=owner, arguments={"command": "str_replace", "path": "/memories/alice.md",
                                           "old_str": "Kestrel", "new_str": "Kestrel II"}, by=MemoryChange.By.AGENT)
    memory_file_put(owner=owner, path="/memories/secret-plans.md", content="Surprise party on Friday")
    return MemoryState.objects.get(agent=agent, user=alice)


@pytest.fixture
def sam(django_user_model):
    """Staff who may list people's memories and their changes, but not read the files."""
    user = django_user_model.objects.create_user(username="sam", password="sam-password-1", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(
        content_type__app_label="memory", codename__in=["view_memorystate", "view_memorychange"]))
    client = Client()
    client.force_login(user)
    return client


def test_mem1_the_owners_list_shows_sizes_and_times_never_what_memory_says(console, alices_memory):
    page = console.get(OWNERS)
    assert page.status_code == 200
    html = page.content.decode()
    assert "alice" in html and "Helper" in html and "Acme" in html
    row = page.context["cl"].result_list[0]
    # What the bound counts: both paths and both texts, from plain columns and recorded sizes.
    expected = (len("/memories/alice.md") + len(NOTE) + len(" II") + len("/memories/secret-plans.md")
                + len("Surprise party on Friday"))
    assert (row.files, row.characters) == (2, expected)
    assert f"{expected:,}" in html
    for content in ("metric units", "Kestrel", "Surprise", "secret-plans", "alice.md"):
        assert content not in html
    assert not AccessAudit.objects.exists()


def test_mem1_forgetting_everything_leaves_no_files_and_no_characters_in_the_list(console, alices_memory, space,
                                                                                  agent, alice):
    memory_forget(owner=MemoryOwner(space_id=space.pk, agent_id=agent.pk, user_id=alice.pk))
    row = console.get(OWNERS).context["cl"].result_list[0]
    assert (row.files, row.characters) == (0, 0)


def test_mem4_the_change_log_says_who_changed_what_kind_of_thing_when_without_paths_or_text(console, alices_memory):
    owner_page = console.get(f"{OWNERS}{alices_memory.pk}/change/").content.decode()
    assert "the agent wrote a file" in owner_page and "the agent edited a file" in owner_page
    assert "the person wrote a file · from the memory panel or the API" in owner_page
    log = console.get(CHANGES).content.decode()
    assert "str_replace" in log and "memory log (the panel or the API)" in log
    for page in (owner_page, log):
        for content in ("metric units", "Kestrel", "Surprise", "secret-plans", "alice.md"):
            assert content not in page
    change = MemoryChange.objects.first()
    assert console.get(f"{CHANGES}{change.pk}/change/").status_code == 200
    assert not AccessAudit.objects.exists()


def test_mem1_olivia_reads_alices_memory_and_the_read_is_audited_first(console, olivia, alices_memory, agent, alice,
                                                                        space):
    page = console.get(f"{OWNERS}{alices_memory.pk}/read/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Alice prefers metric units; her project is Kestrel II" in html and "Surprise party on Friday" in html
    assert "/memories/secret-plans.md" in html and "access audit" in html
    audit = AccessAudit.objects.get()
    assert (audit.user, audit.what, audit.session, audit.run) == (olivia, "memory", None, None)
    assert audit.detail == {"agent": agent.pk, "agent_name": "Helper", "person": alice.pk, "space": space.pk}


def test_mem1_a_person_reading_their_own_memory_is_not_audited(olivia, space, agent):
    owner = MemoryOwner(space_id=space.pk, agent_id=agent.pk, user_id=olivia.pk)
    memory_file_put(owner=owner, path="/memories/me.md", content="I run this installation")
    client = Client()
    client.force_login(olivia)
    state = MemoryState.objects.get(user=olivia)
    page = client.get(f"{OWNERS}{state.pk}/read/")
    assert "I run this installation" in page.content.decode()
    assert "access audit" not in page.content.decode()
    assert not AccessAudit.objects.exists()


def test_mem1_staff_without_the_files_permission_list_owners_but_cannot_read(sam, alices_memory):
    assert sam.get(OWNERS).status_code == 200
    refused = sam.get(f"{OWNERS}{alices_memory.pk}/read/")
    assert refused.status_code == 403
    assert NOTE not in refused.content.decode()
    assert not AccessAudit.objects.exists()


def test_mem1_a_member_who_is_not_staff_is_sent_to_log_in(bob, alices_memory):
    client = Client()
    client.force_login(bob)
    for url in (OWNERS, f"{OWNERS}{alices_memory.pk}/read/", CHANGES):
        response = client.get(url)
        assert response.status_code == 302 and "/login/" in response["Location"]
    assert not AccessAudit.objects.exists()
