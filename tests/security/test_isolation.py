"""Who reaches what (SPEC §11, RUN-11): every endpoint × owner, space admin, member, outsider,
staff without the console's permission, a removed member, anonymous.

A session and its runs, records and events belong to their creator alone, and only while
they are still a member of the session's space: everyone else gets 404 (never 403, which
would confirm the id exists), space admins and staff included, and nothing changes. The
context inspector is the operators' alone (SPEC §9): the space's admins and staff with the
console's view permissions, never the person chatting (404 on their own run); each read of
someone else's session is audited. Connections and agents belong to a space:
members read, admins write, outsiders get 404. Anonymous callers get 401 in the error shape.
"""
from __future__ import annotations

import pytest

from sessions.models import Instance, ModelCall, Run, RunEvent, SessionMessage
from sessions.services.events import event_emit
from sessions.services.questions import question_ask
from sessions.services.records import record_append
from sessions.services.runs import run_finish
from tests.security.conftest import assert_error_shape

pytestmark = pytest.mark.django_db

ANONYMOUS = None


def _finished_story(session) -> dict:
    """A session with one finished run: records, events and a logged model call."""
    run = question_ask(session=session, content="Private question")
    main = Instance.objects.get(run=run, key=Instance.MAIN)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    run.refresh_from_db()
    event_emit(run_id=run.pk, type="run_started", data={"attempt": 0})
    record_append(session=session, run=run, instance=main, kind="assistant",
                  message={"role": "assistant", "content": "Private answer"}, entry_key="assistant-1")
    ModelCall.objects.create(run=run, instance=main, provider="demo", model="m", estimator_id="bytes-v1",
                             estimated_tokens=3, request={"messages": [{"role": "user", "content": "Private question"}],
                                                          "tools": [], "estimates": [3]})
    run_finish(run=run, status=Run.Status.COMPLETED)
    event_emit(run_id=run.pk, type="run_finished", data={"status": "completed"})
    return {"session": session, "run": run}


@pytest.fixture
def story(alice, make_session):
    """Alice's session with one finished run."""
    return _finished_story(make_session(alice))


@pytest.fixture
def olga(django_user_model):
    """Staff, and nothing more: no permission on sessions, runs or model calls."""
    return django_user_model.objects.create_user(username="olga", password="olga-password-1", is_staff=True)


@pytest.fixture
def operator(django_user_model):
    """Staff with the console's permissions to read runs and what each model call received."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user(username="otto", password="otto-password-1", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="agent_sessions",
                                                         codename__in=["view_run", "view_modelcall"]))
    return user


def _remove(user, space) -> None:
    from core.spaces.services import membership_remove

    membership_remove(space=space, user=user)


SESSION_ENDPOINTS = [
    # (method, path, body, owner's status)
    ("get", "/api/v1/sessions/{session}", None, 200),
    ("get", "/api/v1/sessions/{session}/messages", None, 200),
    ("get", "/api/v1/runs/{run}", None, 200),
    ("get", "/api/v1/runs/{run}/events?format=json", None, 200),
    ("get", "/api/v1/runs/{run}/events", None, 200),  # the SSE stream
    ("post", "/api/v1/runs/{run}/resume", None, 409),  # a completed run: refused, but only to its owner
    ("post", "/api/v1/runs/{run}/supplements", {"content": "psst"}, 409),
    ("post", "/api/v1/runs/{run}/cancel", None, 202),
    ("post", "/api/v1/sessions/{session}/compact", None, 202),
    ("post", "/api/v1/sessions/{session}/questions", {"content": "Another"}, 202),
]


def _state(story) -> tuple:
    run = Run.objects.get(pk=story["run"].pk)
    return (Run.objects.count(), SessionMessage.objects.count(), RunEvent.objects.count(), run.status,
            run.cancel_requested, run.attempt)


@pytest.mark.parametrize("method, path, body, owner_status", SESSION_ENDPOINTS,
                         ids=[f"{m.upper()} {p}" for m, p, _, _ in SESSION_ENDPOINTS])
def test_only_the_creator_reaches_a_session_and_everything_in_it(
        api, story, alice, bob, carol, mallory, mallory_space, olga, method, path, body, owner_status, monkeypatch):
    from sessions import event_stream as stream
    from sessions.models import AccessAudit

    monkeypatch.setattr(stream, "MAX_STREAM_SECONDS", 0.5)
    url = path.format(session=story["session"].pk, run=story["run"].pk)
    before = _state(story)
    for person, expected in ((ANONYMOUS, 401), (mallory, 404), (bob, 404), (carol, 404), (olga, 404)):
        response = getattr(api(person), method)(url, body, format="json")
        assert_error_shape(response, expected)
        assert "Private" not in response.content.decode()
    assert _state(story) == before  # nobody else changed anything
    assert not AccessAudit.objects.exists()  # a refused read is not an audited read
    response = getattr(api(alice), method)(url, body, format="json")
    assert response.status_code == owner_status, response.content[:300]
    if owner_status >= 400:
        assert_error_shape(response)


def test_the_session_list_shows_only_the_callers_own(api, story, alice, bob, carol, mallory, mallory_space,
                                                     make_session):
    bobs = make_session(bob)
    assert [s["id"] for s in api(alice).get("/api/v1/sessions").json()] == [story["session"].pk]
    assert [s["id"] for s in api(bob).get("/api/v1/sessions").json()] == [bobs.pk]
    assert api(carol).get("/api/v1/sessions").json() == []
    assert api(mallory).get("/api/v1/sessions").json() == []


def test_staff_with_the_consoles_permissions_read_the_context_inspector_audited_and_nothing_else(
        api, story, operator):
    from sessions.models import AccessAudit

    response = api(operator).get(f"/api/v1/runs/{story['run'].pk}/context")
    assert response.status_code == 200 and "Private question" in response.content.decode()
    assert AccessAudit.objects.filter(user=operator, run=story["run"], what="context_inspector").count() == 1
    # …and the permission opens nothing else of the session.
    for method, path, body, _ in SESSION_ENDPOINTS:
        url = path.format(session=story["session"].pk, run=story["run"].pk)
        assert_error_shape(getattr(api(operator), method)(url, body, format="json"), 404)
    assert AccessAudit.objects.count() == 1


@pytest.mark.parametrize("permissions", [[], ["view_run"], ["view_modelcall"], ["view_session", "view_sessionmessage"]])
def test_staff_without_the_consoles_permissions_get_404_from_the_context_inspector_and_no_audit_row(
        api, story, olga, permissions):
    from django.contrib.auth.models import Permission

    from sessions.models import AccessAudit

    olga.user_permissions.add(*Permission.objects.filter(content_type__app_label="agent_sessions",
                                                         codename__in=permissions))
    response = api(olga).get(f"/api/v1/runs/{story['run'].pk}/context")
    assert_error_shape(response, 404)
    assert "Private" not in response.content.decode()
    assert not AccessAudit.objects.exists()


def test_the_console_and_the_api_answer_the_same_staff_the_same_way(api, story, olga, operator):
    from django.test import Client

    for person, api_status, console_status in ((olga, 404, 403), (operator, 200, 200)):
        browser = Client()
        browser.force_login(person)
        console = browser.get(f"/admin/agent_sessions/run/{story['run'].pk}/context/")
        assert console.status_code == console_status
        assert api(person).get(f"/api/v1/runs/{story['run'].pk}/context").status_code == api_status


# --- a member removed from the space loses their sessions too (RUN-11) ------------------------------


@pytest.fixture
def bobs_story(bob, make_session):
    return _finished_story(make_session(bob))


# --- the context inspector: operators only, never the person chatting (SPEC §9) -----------------------


def test_the_person_chatting_never_reads_the_context_inspector_of_their_own_run(api, bobs_story, bob, mallory, olga):
    from sessions.models import AccessAudit

    url = f"/api/v1/runs/{bobs_story['run'].pk}/context"
    assert api(bob).get(f"/api/v1/runs/{bobs_story['run'].pk}").status_code == 200  # his run, his to follow
    for person, expected in ((bob, 404), (mallory, 404), (olga, 404), (ANONYMOUS, 401)):
        response = api(person).get(url)
        assert_error_shape(response, expected)
        assert "Private" not in response.content.decode()
    assert not AccessAudit.objects.exists()


def test_the_spaces_admins_read_the_context_inspector_audited_when_the_session_is_someone_elses(
        api, story, bobs_story, alice, carol):
    from sessions.models import AccessAudit

    for admin in (alice, carol):
        response = api(admin).get(f"/api/v1/runs/{bobs_story['run'].pk}/context")
        assert response.status_code == 200 and "Private question" in response.content.decode()
        assert AccessAudit.objects.filter(user=admin, run=bobs_story["run"], what="context_inspector").count() == 1
    mine = api(alice).get(f"/api/v1/runs/{story['run'].pk}/context")  # her own session: nothing to audit
    assert mine.status_code == 200 and not AccessAudit.objects.filter(run=story["run"]).exists()
    # …and administering the space opens nothing else of bob's session.
    for method, path, body, _ in SESSION_ENDPOINTS:
        url = path.format(session=bobs_story["session"].pk, run=bobs_story["run"].pk)
        assert_error_shape(getattr(api(carol), method)(url, body, format="json"), 404)


def test_an_admin_removed_from_the_space_no_longer_reads_its_context_inspector(api, bobs_story, carol, space):
    url = f"/api/v1/runs/{bobs_story['run'].pk}/context"
    assert api(carol).get(url).status_code == 200
    _remove(carol, space)
    assert_error_shape(api(carol).get(url), 404)


@pytest.mark.parametrize("method, path, body, owner_status", SESSION_ENDPOINTS,
                         ids=[f"{m.upper()} {p}" for m, p, _, _ in SESSION_ENDPOINTS])
def test_a_removed_member_reaches_nothing_of_their_own_sessions(api, bobs_story, bob, space, method, path, body,
                                                                 owner_status, monkeypatch):
    from sessions import event_stream as stream

    monkeypatch.setattr(stream, "MAX_STREAM_SECONDS", 0.5)
    url = path.format(session=bobs_story["session"].pk, run=bobs_story["run"].pk)
    assert getattr(api(bob), method)(url, body, format="json").status_code == owner_status  # while a member
    _remove(bob, space)
    before = _state(bobs_story)
    response = getattr(api(bob), method)(url, body, format="json")
    assert_error_shape(response, 404)
    assert "Private" not in response.content.decode()
    assert _state(bobs_story) == before


@pytest.mark.parametrize("page", ["/sessions/{session}/", "/chat/runs/{run}/fragment",
                                  "/chat/runs/{run}/text?after=0&upto=5"])
def test_a_removed_member_reaches_none_of_the_chat_pages_of_their_sessions(bobs_story, bob, space, page):
    from django.test import Client

    browser = Client()
    browser.force_login(bob)
    url = page.format(session=bobs_story["session"].pk, run=bobs_story["run"].pk)
    assert browser.get(url).status_code == 200
    _remove(bob, space)
    response = browser.get(url)
    assert response.status_code == 404 and b"Private" not in response.content
    assert bobs_story["session"].pk not in [s["id"] for s in api_list(bob)]


def api_list(user) -> list[dict]:
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user)
    return client.get("/api/v1/sessions").json()


def test_a_removed_member_cannot_ask_through_the_service_either(bob, space, make_session):
    from core.errors import NotFound

    session = make_session(bob)
    _remove(bob, space)
    with pytest.raises(NotFound):
        question_ask(session=session, content="Still here?")
    assert not Run.objects.filter(session=session).exists()


def test_a_queued_run_of_a_removed_member_is_never_claimed_and_ends_failed(bob, space, make_session):
    from sessions.services.runs import run_claim

    run = question_ask(session=make_session(bob), content="Spend the key")
    _remove(bob, space)
    assert run_claim(run_id=run.pk) is None
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.error["code"] == "not_a_member"
    assert run.error["retryable"] is False


# --- connections and agents: a space's members read, its admins write ----------------------------


@pytest.fixture
def spare_connection(space):
    from models_catalog.services import connection_create

    return connection_create(space=space, data={"name": "Spare", "provider": "demo", "model": "agentloom-demo"})


CATALOG_ENDPOINTS = [
    # (method, path, body, admin, member)
    ("get", "/api/v1/model-connections/{connection}", None, 200, 200),
    ("patch", "/api/v1/model-connections/{connection}", {"name": "Renamed"}, 200, 403),
    ("delete", "/api/v1/model-connections/{spare}", None, 204, 403),
    ("get", "/api/v1/agents/{agent}", None, 200, 200),
    ("get", "/api/v1/agents/{agent}/versions", None, 200, 200),
    ("patch", "/api/v1/agents/{agent}", {"instructions": "Changed."}, 200, 403),
    ("post", "/api/v1/agents/{agent}/publish", None, 201, 403),
]


@pytest.mark.parametrize("method, path, body, admin_status, member_status", CATALOG_ENDPOINTS,
                         ids=[f"{m.upper()} {p}" for m, p, *_ in CATALOG_ENDPOINTS])
def test_members_read_admins_write_and_outsiders_see_nothing_of_a_space(
        api, alice, bob, carol, mallory, mallory_space, agent, version, demo_connection, spare_connection,
        method, path, body, admin_status, member_status):
    from agents.models import Agent, AgentVersion
    from models_catalog.models import ModelConnection

    url = path.format(connection=demo_connection.pk, agent=agent.pk, spare=spare_connection.pk)

    def state():
        return (list(ModelConnection.objects.order_by("pk").values_list("pk", "name")),
                list(Agent.objects.values_list("pk", "instructions")), AgentVersion.objects.count())

    before = state()
    for person, expected in ((ANONYMOUS, 401), (mallory, 404), (bob, member_status)):
        response = getattr(api(person), method)(url, body, format="json")
        if expected >= 400:
            assert_error_shape(response, expected)
            assert "sk-" not in response.content.decode()
        else:
            assert response.status_code == expected
    if member_status >= 400:
        assert state() == before
    assert getattr(api(carol), method)(url, body, format="json").status_code == admin_status  # any admin of the space


def test_lists_and_creates_stay_inside_the_callers_spaces(api, alice, bob, mallory, mallory_space, agent,
                                                         demo_connection):
    from models_catalog.models import ModelConnection

    assert api(mallory).get("/api/v1/model-connections").json() == []
    assert api(mallory).get("/api/v1/agents").json() == []
    assert [c["id"] for c in api(bob).get("/api/v1/model-connections").json()] == [demo_connection.pk]
    count = ModelConnection.objects.count()
    response = api(bob).post("/api/v1/model-connections", {"name": "Mine", "provider": "demo", "model": "m"},
                             format="json")
    assert response.status_code in (403, 404)
    assert_error_shape(response)
    response = api(mallory).post("/api/v1/agents", {"name": "Hijack", "model_connection": demo_connection.pk},
                                 format="json")
    assert_error_shape(response, 400)  # "no such model connection in your spaces": the id is not confirmed
    response = api(mallory).post("/api/v1/sessions", {"agent": agent.pk}, format="json")
    assert response.status_code in (400, 404)
    assert_error_shape(response)
    assert ModelConnection.objects.count() == count


def test_discovery_is_for_space_admins_only(api, alice, bob, mallory, mallory_space, space, outbound):
    body = {"provider": "demo"}
    assert api(alice).post("/api/models/discover", body, format="json").status_code == 200
    assert_error_shape(api(bob).post("/api/models/discover", {**body, "space": space.pk}, format="json"), 403)
    assert_error_shape(api(mallory).post("/api/models/discover", {**body, "space": space.pk}, format="json"), 404)
    assert_error_shape(api(ANONYMOUS).post("/api/models/discover", body, format="json"), 401)


def test_a_bad_token_is_a_401_naming_the_scheme(client):
    response = client.get("/api/v1/sessions", HTTP_AUTHORIZATION="Token not-a-real-token")
    assert_error_shape(response, 401)
    assert response["WWW-Authenticate"] == "Token"
