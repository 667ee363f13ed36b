"""CTX-50 Pins through the API and the service: records of the session (who, when), the
first question pinned by default, idempotent, a clear 400 and nothing written for anything
that is not a main-line message of the session, 404 for everyone but its creator while a
member of its space."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from core.spaces.services import membership_remove
from sessions.models import MessageKind, SessionMessage
from sessions.selectors.pins import pinned_seqs
from sessions.services.questions import question_ask
from tests.sessions.helpers import answer, call_tool, claim, seen_by, tool_result

pytestmark = pytest.mark.django_db


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _conversation(make_session, owner):
    """Q1 (seq 1), a call (2), its result (3), an answer (4)."""
    session = make_session(owner)
    run = claim(question_ask(session=session, content="Q1: migrate the billing tables; never touch prod."))
    call_tool(run, "call_1", "read_log", "s1")
    tool_result(run, "call_1", "read_log", "log: 3 tables")
    answer(run, "A1: the three tables are ready.", "s2")
    return session, run


def _pins(session) -> int:
    return SessionMessage.objects.filter(session=session, kind=MessageKind.PIN).count()


def test_ctx50_the_first_question_is_pinned_by_default(make_session, alice):
    session, _ = _conversation(make_session, alice)
    body = api(alice).get(f"/api/v1/sessions/{session.pk}/pins").json()
    assert body == {"items": [{"seq": 1, "by": None, "at": None, "default": True}]}
    assert pinned_seqs(session_id=session.pk) == frozenset({1})


def test_ctx50_pinning_is_a_record_of_who_and_when_and_pinning_twice_writes_nothing(make_session, alice):
    session, run = _conversation(make_session, alice)
    view_before = seen_by(run)
    client = api(alice)
    first = client.post(f"/api/v1/sessions/{session.pk}/pins", {"seq": 4}, format="json")
    assert first.status_code == 200
    items = first.json()["items"]
    assert [item["seq"] for item in items] == [1, 4]
    assert items[1]["by"] == alice.pk and items[1]["at"] and items[1]["default"] is False
    record = SessionMessage.objects.get(session=session, kind=MessageKind.PIN)
    assert record.message == {"action": "pin", "seq": 4, "by": alice.pk} and record.in_main
    # Idempotent: the same pin again changes nothing and writes nothing.
    again = client.post(f"/api/v1/sessions/{session.pk}/pins", {"seq": 4}, format="json")
    assert again.status_code == 200 and again.json() == first.json() and _pins(session) == 1
    # A pin record never becomes a chat message of the model's view.
    assert seen_by(run) == view_before


def test_ctx50_unpinning_the_first_question_is_a_record_and_later_records_win(make_session, alice):
    session, _ = _conversation(make_session, alice)
    client = api(alice)
    gone = client.delete(f"/api/v1/sessions/{session.pk}/pins/1")
    assert gone.status_code == 200 and gone.json() == {"items": []}
    assert pinned_seqs(session_id=session.pk) == frozenset()
    assert client.delete(f"/api/v1/sessions/{session.pk}/pins/1").json() == {"items": []}  # idempotent
    assert client.delete(f"/api/v1/sessions/{session.pk}/pins/3").json() == {"items": []}  # never pinned
    assert _pins(session) == 1
    back = client.post(f"/api/v1/sessions/{session.pk}/pins", {"seq": 1}, format="json").json()["items"]
    assert back[0]["seq"] == 1 and back[0]["by"] == alice.pk and back[0]["default"] is False
    client.post(f"/api/v1/sessions/{session.pk}/pins", {"seq": 3}, format="json")
    client.delete(f"/api/v1/sessions/{session.pk}/pins/3")
    assert pinned_seqs(session_id=session.pk) == frozenset({1})
    actions = [(r.message["action"], r.message["seq"]) for r in
               SessionMessage.objects.filter(session=session, kind=MessageKind.PIN).order_by("seq")]
    assert actions == [("unpin", 1), ("pin", 1), ("pin", 3), ("unpin", 3)]


@pytest.mark.parametrize("seq", ["x", 0, -3, 999, None, True, 2.5])
def test_ctx50_a_bad_seq_gets_a_400_naming_the_field_and_nothing_is_written(make_session, alice, seq):
    session, _ = _conversation(make_session, alice)
    response = api(alice).post(f"/api/v1/sessions/{session.pk}/pins", {"seq": seq}, format="json")
    assert response.status_code == 400, response.json()
    assert "seq" in response.json()["error"]["fields"]
    assert _pins(session) == 0


def test_ctx50_only_main_line_messages_of_this_session_can_be_pinned(make_session, alice):
    session, run = _conversation(make_session, alice)
    client = api(alice)
    client.post(f"/api/v1/sessions/{session.pk}/pins", {"seq": 4}, format="json")  # seq 5: a pin record
    pin_seq = SessionMessage.objects.get(session=session, kind=MessageKind.PIN).seq
    other, _ = _conversation(make_session, alice)  # its seqs 1..4 are not this session's 6+
    for seq in (pin_seq, 6):
        response = client.post(f"/api/v1/sessions/{session.pk}/pins", {"seq": seq}, format="json")
        assert response.status_code == 400 and response.json()["error"]["code"] == "invalid"
    assert _pins(session) == 1 and _pins(other) == 0
    # The other session's message 4 is that session's own, not this one's.
    assert client.post(f"/api/v1/sessions/{other.pk}/pins", {"seq": 4}, format="json").status_code == 200
    assert pinned_seqs(session_id=session.pk) == frozenset({1, 4})
    assert pinned_seqs(session_id=other.pk) == frozenset({1, 4})


def test_ctx50_nobody_but_the_creator_pins_or_reads_the_pins(make_session, alice, bob, mallory, mallory_space):
    session, _ = _conversation(make_session, alice)
    for other in (bob, mallory):  # bob shares the space and the agent; mallory does not
        client = api(other)
        for response in (client.get(f"/api/v1/sessions/{session.pk}/pins"),
                         client.post(f"/api/v1/sessions/{session.pk}/pins", {"seq": 4}, format="json"),
                         client.delete(f"/api/v1/sessions/{session.pk}/pins/1")):
            assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert _pins(session) == 0


def test_ctx50_a_member_removed_mid_session_can_no_longer_pin(make_session, bob, space):
    session, _ = _conversation(make_session, bob)
    client = api(bob)
    assert client.post(f"/api/v1/sessions/{session.pk}/pins", {"seq": 3}, format="json").status_code == 200
    membership_remove(space=space, user=bob)
    response = client.post(f"/api/v1/sessions/{session.pk}/pins", {"seq": 4}, format="json")
    assert response.status_code == 404
    assert client.delete(f"/api/v1/sessions/{session.pk}/pins/3").status_code == 404
    assert _pins(session) == 1
