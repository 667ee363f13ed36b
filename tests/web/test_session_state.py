"""``GET /chat/sessions/{id}/state``: what another tab or device of the same person reads to
learn that a run started, or that runs were added, without a reload (docs/web.md, *Other
tabs and devices*)."""
from __future__ import annotations

import pytest

from sessions.models import Run
from tests.web.conftest import finished_run

pytestmark = pytest.mark.django_db


def test_an_idle_session_with_no_run_has_nothing_active_and_nothing_new(client_for, alice, make_session):
    session = make_session(alice)
    response = client_for(alice).get(f"/chat/sessions/{session.pk}/state")
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    assert response.json() == {"active_run": None, "runs": [], "approvals": []}


def test_runs_after_the_last_one_shown_are_listed_oldest_first_and_the_working_one_is_named(
        client_for, alice, make_session):
    session = make_session(alice)
    first = finished_run(session, question="First?")
    second = finished_run(session, question="Second?", status=Run.Status.CANCELLED)
    client = client_for(alice)
    assert client.get(f"/chat/sessions/{session.pk}/state").json() == {"active_run": None,
                                                                       "runs": [first.pk, second.pk], "approvals": []}
    assert client.get(f"/chat/sessions/{session.pk}/state", {"after": first.pk}).json()["runs"] == [second.pk]
    assert client.get(f"/chat/sessions/{session.pk}/state", {"after": second.pk}).json()["runs"] == []

    working = finished_run(session, question="Third?", status=Run.Status.RUNNING)
    assert client.get(f"/chat/sessions/{session.pk}/state", {"after": second.pk}).json() == {
        "active_run": working.pk, "runs": [working.pk], "approvals": []}


def test_a_queued_run_is_active_too(client_for, alice, make_session):
    from sessions.services.questions import question_ask

    session = make_session(alice)
    queued = question_ask(session=session, content="Still waiting for a worker?")
    body = client_for(alice).get(f"/chat/sessions/{session.pk}/state").json()
    assert body == {"active_run": queued.pk, "runs": [queued.pk], "approvals": []}


@pytest.mark.parametrize("intruder", ["bob", "mallory"])
def test_someone_elses_session_state_is_not_found(client_for, alice, make_session, intruder, request):
    session = make_session(alice)
    finished_run(session, status=Run.Status.RUNNING)
    response = client_for(request.getfixturevalue(intruder)).get(f"/chat/sessions/{session.pk}/state")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_the_state_answers_401_in_the_api_shape_without_a_login(client, alice, make_session):
    session = make_session(alice)
    response = client.get(f"/chat/sessions/{session.pk}/state")
    assert response.status_code == 401
    assert response.json() == {"error": {"code": "not_authenticated", "message": "Log in first."}}


@pytest.mark.parametrize("after", ["-1", "x", "²", "9" * 40])
def test_an_after_that_is_no_run_id_is_refused(client_for, alice, make_session, after):
    session = make_session(alice)
    response = client_for(alice).get(f"/chat/sessions/{session.pk}/state", {"after": after})
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"after": "invalid"}


def test_the_session_page_hands_the_script_the_state_address(client_for, alice, make_session):
    session = make_session(alice)
    page = client_for(alice).get(f"/sessions/{session.pk}/").content.decode()
    assert f'"state": "/chat/sessions/{session.pk}/state"' in page
