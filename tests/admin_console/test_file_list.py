"""Every attached file in the console (RUN-13, SPEC §10): a read-only list of sizes, owners,
sessions, spaces and times, sortable and filtered by owner and space, with the total size of
what is listed — and never a file's name, bytes or text (all encrypted, none read)."""
from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.spaces.services import space_bootstrap_for_user
from sessions.admin.file_list import size_text
from sessions.models import AccessAudit, Session
from tests.admin_console.test_attachments_console import stored_file

pytestmark = pytest.mark.django_db

LIST = "/admin/agent_sessions/sessionfile/"


@pytest.fixture
def files(alice, bob, make_session, agent, version):
    """alice's two files in Acme (one 2 MB), bob's one in Acme and one in his own lab."""
    acme_alice, acme_bob = make_session(alice), make_session(bob)
    lab = space_bootstrap_for_user(user=bob, name="Bob's lab")
    lab_session = Session.objects.create(space=lab, user=bob, agent=agent, version=version)
    return {
        "alice_small": stored_file(acme_alice, alice, name="alice-secret-plan.txt", content_type="text/plain",
                                   kind="text", data=b"x" * 1_500, text="the plan"),
        "alice_big": stored_file(acme_alice, alice, name="alice-scan.pdf", content_type="application/pdf", kind="pdf",
                                 data=b"%PDF" + b"y" * (2 * 1024 * 1024 - 4)),
        "bob_acme": stored_file(acme_bob, bob, name="bob-notes.txt", content_type="text/plain", kind="text",
                                data=b"z" * 100),
        "bob_lab": stored_file(lab_session, bob, name="bob-lab.txt", content_type="text/plain", kind="text",
                               data=b"w" * 10),
        "lab": lab,
    }


def _ids(html: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'<th class="field-id"><a href="/admin/agent_sessions/sessionfile/(\d+)/',
                                         html)]


def test_the_list_shows_size_owner_session_space_and_the_total_never_a_name(console, files):
    with CaptureQueriesContext(connection) as queries:
        html = console.get(LIST).content.decode()
    assert len(_ids(html)) == 4
    assert "4 files, 2.0 MB in all" in html
    for name in ("alice-secret-plan", "alice-scan", "bob-notes", "bob-lab", "the plan"):
        assert name not in html
    assert "alice" in html and "bob" in html and "Bob&#x27;s lab" in html and "Acme" in html
    assert f'href="/admin/agent_sessions/session/{files["alice_big"].session_id}/change/"' in html
    assert "No question yet (attached, not sent)" in html
    # Nothing encrypted is read: no statement selects a file's name, digest, bytes or text,
    # nor its session's title.
    encrypted = re.compile(r'"agent_sessions_sessionfile"\."(name|sha256|data|text)"|"agent_sessions_session"\."title"')
    file_reads = [q["sql"] for q in queries if "sessions_sessionfile" in q["sql"] and q["sql"].startswith("SELECT")]
    assert file_reads and not [sql for sql in file_reads if encrypted.search(sql)]
    assert not AccessAudit.objects.exists()


def test_filtered_by_owner_and_by_space_with_the_total_of_what_is_listed(console, files, bob):
    by_bob = console.get(f"{LIST}?uploaded_by__id__exact={bob.pk}").content.decode()
    assert sorted(_ids(by_bob)) == sorted([files["bob_acme"].pk, files["bob_lab"].pk])
    assert "2 files, 110 bytes in all</strong> (as filtered)" in by_bob
    in_lab = console.get(f"{LIST}?session__space__id__exact={files['lab'].pk}").content.decode()
    assert _ids(in_lab) == [files["bob_lab"].pk]
    assert "1 file, 10 bytes in all" in in_lab


def test_sorted_by_size(console, files):
    html = console.get(f"{LIST}?o=-1").content.decode()  # column 1 (from 0), Size, largest first
    assert _ids(html) == [files[key].pk for key in ("alice_big", "alice_small", "bob_acme", "bob_lab")]


def test_it_is_read_only(console, files):
    assert console.get(f"{LIST}add/").status_code == 403
    file = files["alice_small"]
    page = console.get(f"{LIST}{file.pk}/change/")
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
    assert "alice-secret-plan" not in page.content.decode()
    assert console.post(f"{LIST}{file.pk}/delete/", {"post": "yes"}).status_code == 403


def test_size_text():
    assert [size_text(n) for n in (0, 1, 1023, 1500, 2 * 1024**2, 3 * 1024**3)] == [
        "0 bytes", "1 byte", "1,023 bytes", "1 KB", "2.0 MB", "3.00 GB"]
