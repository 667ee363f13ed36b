"""A person's own sessions: rename (PATCH), delete (DELETE: erased, refused while an answer
runs), search by title and question text (``?q=``), no empty "New chat" piling up, and files
attached but not sent coming back after a reload (SPEC §9, §10). Only the session's creator
reaches any of it: bob, in the same space, gets 404 for alice's."""
from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from sessions.models import AccessAudit, Run, Session, SessionFile, SessionMessage
from sessions.services.access_audit import access_audit_write
from sessions.services.questions import question_ask
from sessions.services.runs import run_finish
from tests.files.test_attachments import ask, upload
from tests.sessions.helpers import answer, claim

pytestmark = pytest.mark.django_db


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def asked(session, *questions: str) -> Session:
    """Each question asked and answered in turn, as the loop would."""
    for index, question in enumerate(questions):
        run = claim(question_ask(session=session, content=question))
        answer(run, f"Answer {index}", f"a{index}")
        assert run_finish(run=run, status=Run.Status.COMPLETED)
    session.refresh_from_db()
    return session


def patch(client: Client, session_id: int, body) -> object:
    return client.patch(f"/api/v1/sessions/{session_id}", body, content_type="application/json")


def chat_config(page: str) -> dict:
    return json.loads(re.search(r'<script id="chat-config" type="application/json">(.*?)</script>', page,
                                re.S).group(1))


# --- rename ------------------------------------------------------------------------------------


def test_alice_renames_her_session_and_its_place_in_the_list_stays(alice, make_session):
    session = asked(make_session(alice), "Where should we eat tonight?")
    before = session.updated_at
    response = patch(client_of(alice), session.pk, {"title": "  Dinner\n plans  "})
    assert response.status_code == 200 and response.json()["title"] == "Dinner plans"
    session.refresh_from_db()
    assert session.title == "Dinner plans" and session.updated_at == before
    asked(session, "And tomorrow?")  # a later question does not name it again
    session.refresh_from_db()
    assert session.title == "Dinner plans"
    assert "Dinner plans" in client_of(alice).get(f"/sessions/{session.pk}/").content.decode()


@pytest.mark.parametrize("body, field_says", [
    ({"title": ""}, "must not be empty"),
    ({"title": " \n\t "}, "must not be empty"),
    ({"title": "x" * 201}, "at most 200 characters"),
    ({}, "required"),
])
def test_an_empty_or_too_long_name_is_400_in_the_one_shape_and_changes_nothing(alice, make_session, body,
                                                                                field_says):
    session = asked(make_session(alice), "Keep this name")
    response = patch(client_of(alice), session.pk, body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and field_says in json.dumps(error["fields"]["title"])
    session.refresh_from_db()
    assert session.title == "Keep this name"


def test_a_name_of_200_characters_is_taken_whole(alice, make_session):
    session = asked(make_session(alice), "Short")
    assert patch(client_of(alice), session.pk, {"title": "é" * 200}).json()["title"] == "é" * 200


def test_bob_cannot_rename_alices_session(alice, bob, make_session):
    session = asked(make_session(alice), "Alice's own question")
    response = patch(client_of(bob), session.pk, {"title": "Bob was here"})
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    session.refresh_from_db()
    assert session.title == "Alice's own question"


# --- delete ------------------------------------------------------------------------------------


def test_alice_deletes_her_session_its_records_and_files_are_erased_the_audit_stays(alice, olivia, make_session):
    session = asked(make_session(alice), "Read this file")
    client = client_of(alice)
    sent = upload(client, session.pk, "notes.txt", b"sent with a question\n").json()
    assert ask(client, session.pk, "Here it is", [sent["id"]]).status_code == 202
    run = Run.objects.filter(session=session).order_by("-id").first()
    assert run_finish(run=run, status=Run.Status.CANCELLED)
    unsent = upload(client, session.pk, "later.txt", b"not sent yet\n").json()
    audit = access_audit_write(user=olivia, what="records", session=session)
    other = asked(make_session(alice), "Another chat stays")

    response = client.delete(f"/api/v1/sessions/{session.pk}")

    assert response.status_code == 204
    assert not Session.objects.filter(pk=session.pk).exists()
    assert not SessionMessage.objects.filter(session_id=session.pk).exists()
    assert not Run.objects.filter(session_id=session.pk).exists()
    assert not SessionFile.objects.filter(pk__in=[sent["id"], unsent["id"]]).exists()
    audit.refresh_from_db()  # who read what, when: kept, its session link emptied
    assert audit.user == olivia and audit.what == "records" and audit.session is None
    assert AccessAudit.objects.count() == 1
    assert Session.objects.filter(pk=other.pk).exists()
    assert client.get(f"/sessions/{session.pk}/").status_code == 404
    assert client.get(f"/api/v1/files/{sent['id']}").status_code == 404


def test_bob_cannot_delete_alices_session(alice, bob, make_session):
    session = asked(make_session(alice), "Mine")
    response = client_of(bob).delete(f"/api/v1/sessions/{session.pk}")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert SessionMessage.objects.filter(session=session).count() == 3  # question, answer, status


@pytest.mark.parametrize("working", [False, True], ids=["queued", "running"])
def test_a_session_whose_answer_is_queued_or_running_is_not_deleted_409(alice, make_session, working):
    session = asked(make_session(alice), "First")
    run = question_ask(session=session, content="Still answering")
    if working:
        run = claim(run)
    client = client_of(alice)
    response = client.delete(f"/api/v1/sessions/{session.pk}")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "run_active" and "Stop it, then delete" in error["message"]
    assert Session.objects.filter(pk=session.pk).exists() and Run.objects.filter(pk=run.pk).exists()
    assert run_finish(run=run, status=Run.Status.CANCELLED)
    assert client.delete(f"/api/v1/sessions/{session.pk}").status_code == 204


# --- search ------------------------------------------------------------------------------------


@pytest.fixture
def three_chats(alice, bob, make_session):
    trip = asked(make_session(alice), "Plan a trip to Lisbon")
    bread = asked(make_session(alice), "Hello there", "How long does a SOURDOUGH starter need?")
    bobs = asked(make_session(bob), "My sourdough secrets")
    return trip, bread, bobs


def test_search_finds_alices_sessions_by_title_and_by_a_later_questions_text_only_hers(alice, bob, three_chats):
    trip, bread, bobs = three_chats
    client = client_of(alice)
    by_question = client.get("/api/v1/sessions", {"q": "sourdough"}).json()
    assert [item["id"] for item in by_question] == [bread.pk]  # its title is "Hello there"
    assert [item["id"] for item in client.get("/api/v1/sessions", {"q": " lisbon "}).json()] == [trip.pk]
    assert client.get("/api/v1/sessions", {"q": "nothing like this"}).json() == []
    assert [item["id"] for item in client_of(bob).get("/api/v1/sessions", {"q": "sourdough"}).json()] == [bobs.pk]
    assert client_of(bob).get("/api/v1/sessions", {"q": "lisbon"}).json() == []


def test_the_sidebar_search_works_as_a_plain_form_and_as_the_live_list(alice, three_chats):
    trip, bread, bobs = three_chats
    client = client_of(alice)
    page = client.get("/", {"q": "Sourdough"}).content.decode()
    assert f'href="/sessions/{bread.pk}/"' in page and f'href="/sessions/{trip.pk}/"' not in page
    assert f'href="/sessions/{bobs.pk}/"' not in page and 'value="Sourdough"' in page
    assert "sidebar-open" in page  # on a phone the results are what the page opens on
    live = client.get("/chat/sessions", {"q": "lisbon", "current": str(trip.pk)}).json()
    assert live["count"] == 1 and f'href="/sessions/{trip.pk}/" aria-current="page"' in live["html"]
    none = client.get("/chat/sessions", {"q": "zebra"}).json()
    assert none["count"] == 0 and "No session matches “zebra”" in none["html"]
    every = client.get("/chat/sessions").json()
    assert every["count"] == 2
    assert Client().get("/chat/sessions", {"q": "lisbon"}).status_code == 401


# --- no empty "New chat" piling up ----------------------------------------------------------------


def test_a_chat_started_by_a_file_is_reopened_by_new_chat_not_listed_and_rebound_to_the_latest_version(
        alice, bob, agent, version):
    from agents.services import agent_publish

    client = client_of(alice)
    started = client.post("/api/v1/sessions", {"agent": agent.pk}, content_type="application/json").json()
    assert upload(client, started["id"], "draft.txt", b"attached before asking\n").status_code == 201
    home = client.get("/").content.decode()
    assert f'/sessions/{started["id"]}/' not in home and "No sessions yet." in home

    newer = agent_publish(agent=agent, published_by=alice)
    for _ in range(2):
        opened = client.get("/sessions/new", {"agent": agent.pk})
        assert opened.status_code == 302 and opened["Location"] == f'/sessions/{started["id"]}/'
    assert Session.objects.filter(user=alice).count() == 1
    assert Session.objects.get(pk=started["id"]).version == newer != version
    assert client_of(bob).get("/sessions/new", {"agent": agent.pk}).status_code == 200  # not alice's

    page = client.get(f'/sessions/{started["id"]}/').content.decode()
    assert [item["name"] for item in chat_config(page)["pendingFiles"]] == ["draft.txt"]
    assert re.search(r'class="new-chat-agent" href="/sessions/new\?agent=\d+" aria-current="page"', page)


def test_files_attached_and_not_sent_come_back_after_a_reload_until_sent_or_removed(alice, bob, make_session):
    session = asked(make_session(alice), "Files next")
    client = client_of(alice)
    kept = upload(client, session.pk, "kept.txt", b"to send\n").json()
    dropped = upload(client, session.pk, "dropped.txt", b"to remove\n").json()
    pending = chat_config(client.get(f"/sessions/{session.pk}/").content.decode())["pendingFiles"]
    assert [(item["id"], item["name"], item["url"]) for item in pending] == [
        (kept["id"], "kept.txt", f"/api/v1/files/{kept['id']}"),
        (dropped["id"], "dropped.txt", f"/api/v1/files/{dropped['id']}")]
    assert client_of(bob).get(f"/sessions/{session.pk}/").status_code == 404
    assert client.delete(f"/api/v1/files/{dropped['id']}").status_code == 204
    assert ask(client, session.pk, "Here", [kept["id"]]).status_code == 202
    assert chat_config(client.get(f"/sessions/{session.pk}/").content.decode())["pendingFiles"] == []
