"""The session API: records pages (RUN-11), isolation, questions and runs (SPEC §9)."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from sessions.models import Run, SessionMessage
from sessions.services.questions import question_ask
from tests.sessions.helpers import answer, claim

pytestmark = pytest.mark.django_db


def api(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def _session_with_records(make_session, owner, answers: int = 5):
    session = make_session(owner)
    run = claim(question_ask(session=session, content="Q1"))
    for index in range(answers):
        answer(run, f"A{index}", f"s{index}")
    return session, run


def test_run11_pages_follow_the_cursor_and_an_empty_page_keeps_it(make_session, alice):
    session, run = _session_with_records(make_session, alice)
    client = api(alice)
    first = client.get(f"/api/v1/sessions/{session.pk}/messages", {"limit": 4}).json()
    assert [item["seq"] for item in first["items"]] == [1, 2, 3, 4] and first["next_after"] == 4
    assert first["items"][0] == {**first["items"][0], "run_id": run.pk, "instance": "main", "kind": "user",
                                 "message": {"role": "user", "content": "Q1"}}
    second = client.get(f"/api/v1/sessions/{session.pk}/messages", {"after": 4, "limit": 4}).json()
    assert [item["seq"] for item in second["items"]] == [5, 6] and second["next_after"] == 6
    empty = client.get(f"/api/v1/sessions/{session.pk}/messages", {"after": 6}).json()
    assert empty == {"items": [], "next_after": 6}


@pytest.mark.parametrize("params, field", [
    ({"limit": 0}, "limit"), ({"limit": 201}, "limit"), ({"limit": "ten"}, "limit"),
    ({"after": -1}, "after"), ({"after": "x"}, "after"), ({"instance": "sub-9"}, "instance"),
    ({"instance": "999999"}, "instance"),
])
def test_run11_bad_parameters_get_a_400_naming_the_field(make_session, alice, params, field):
    session, _ = _session_with_records(make_session, alice, answers=1)
    response = api(alice).get(f"/api/v1/sessions/{session.pk}/messages", params)
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]


def test_run11_only_the_creator_reads_the_records(make_session, alice, bob, mallory, mallory_space):
    session, _ = _session_with_records(make_session, alice, answers=1)
    for other in (bob, mallory):  # bob shares the space and the agent; mallory does not
        response = api(other).get(f"/api/v1/sessions/{session.pk}/messages")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert api().get(f"/api/v1/sessions/{session.pk}/messages").status_code in (401, 403)


def test_run11_the_instance_filter_reads_main_only(make_session, alice):
    from sessions.models import Instance
    from sessions.selectors.instances import main_instance
    from sessions.services.records import record_append

    session, run = _session_with_records(make_session, alice, answers=1)
    sub = Instance.objects.create(run=run, parent=main_instance(run=run), key="sub-1", depth=1)
    record_append(session=session, run=run, instance=sub, kind="user",
                  message={"role": "user", "content": "sub task"}, entry_key="t")
    client = api(alice)
    main_page = client.get(f"/api/v1/sessions/{session.pk}/messages", {"instance": "main"}).json()
    sub_page = client.get(f"/api/v1/sessions/{session.pk}/messages", {"instance": str(sub.pk)}).json()
    assert [i["instance"] for i in main_page["items"]] == ["main", "main"]
    assert [(i["seq"], i["instance"]) for i in sub_page["items"]] == [(3, str(sub.pk))]


def test_asking_creates_a_run_and_a_second_question_meanwhile_gets_409(make_session, alice):
    session = make_session(alice)
    client = api(alice)
    first = client.post(f"/api/v1/sessions/{session.pk}/questions", {"content": "Hello"}, format="json")
    assert first.status_code == 202 and first.json()["status"] == "queued"
    second = client.post(f"/api/v1/sessions/{session.pk}/questions", {"content": "Again"}, format="json")
    assert second.status_code == 409 and second.json()["error"]["code"] == "run_active"
    assert Run.objects.filter(session=session).count() == 1
    assert SessionMessage.objects.filter(session=session).count() == 1


@pytest.mark.parametrize("body", [{}, {"content": ""}, {"content": "   "}, {"content": 12}, {"content": "x" * 100_001}])
def test_a_bad_question_is_a_400_and_writes_nothing(make_session, alice, body):
    session = make_session(alice)
    response = api(alice).post(f"/api/v1/sessions/{session.pk}/questions", body, format="json")
    assert response.status_code == 400 and "content" in response.json()["error"]["fields"]
    assert not Run.objects.exists() and not SessionMessage.objects.exists()


def test_sessions_start_from_the_latest_version_and_list_only_the_callers(agent, version, alice, bob):
    client = api(bob)
    created = client.post("/api/v1/sessions", {"agent": agent.pk}, format="json")
    assert created.status_code == 201 and created.json()["version"] == version.pk
    assert [s["id"] for s in api(alice).get("/api/v1/sessions").json()] == []
    detail = client.get(f"/api/v1/sessions/{created.json()['id']}").json()
    assert detail["runs"] == []


def test_an_outsider_cannot_start_a_session_on_another_spaces_agent(agent, version, mallory, mallory_space):
    response = api(mallory).post("/api/v1/sessions", {"agent": agent.pk}, format="json")
    assert response.status_code == 400 and "agent" in response.json()["error"]["fields"]


def test_cancel_then_resume_through_the_api(make_session, alice):
    session = make_session(alice)
    client = api(alice)
    run_id = client.post(f"/api/v1/sessions/{session.pk}/questions", {"content": "Hi"}, format="json").json()["id"]
    cancelled = client.post(f"/api/v1/runs/{run_id}/cancel")
    assert cancelled.status_code == 202 and cancelled.json()["status"] == "cancelled"
    resumed = client.post(f"/api/v1/runs/{run_id}/resume")
    assert resumed.status_code == 202 and resumed.json()["status"] == "queued"
    again = client.post(f"/api/v1/runs/{run_id}/resume")
    assert again.status_code == 409


def test_runs_of_other_people_are_not_found(make_session, alice, mallory):
    session = make_session(alice)
    run = question_ask(session=session, content="Hi")
    for path in (f"/api/v1/runs/{run.pk}", ):
        assert api(mallory).get(path).status_code == 404
    assert api(mallory).post(f"/api/v1/runs/{run.pk}/cancel").status_code == 404
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED
