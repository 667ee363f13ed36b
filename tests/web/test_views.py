"""The chat's pages and web fragments: who may see what, and what they show (SPEC §10, §11).

alice owns sessions; bob is a member of the same space (sharing an agent never shares
sessions); mallory is an outsider with a space of her own.
"""
from __future__ import annotations

import re

import pytest
from django.test import Client

from sessions.models import Run, Session
from tests.web.conftest import finished_run

pytestmark = pytest.mark.django_db


def run_section(html: str, run: Run) -> str:
    match = re.search(rf'<section[^>]*id="run-{run.pk}".*?</section>', html, re.S)
    assert match, f"run {run.pk} is not on the page"
    return match.group()


# --- logging in and out -------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/sessions/1/"])
def test_every_chat_page_needs_a_login(client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next={path}"


def test_starting_a_session_needs_a_login(client, agent):
    response = client.post("/sessions/new", {"agent": agent.pk})
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert Session.objects.count() == 0


@pytest.mark.parametrize("path", ["/chat/runs/1/fragment", "/chat/runs/1/text?after=0&upto=1"])
def test_the_fragments_answer_401_in_the_api_shape_without_a_login(client, path):
    response = client.get(path)
    assert response.status_code == 401
    assert response.json() == {"error": {"code": "not_authenticated", "message": "Log in first."}}


def test_the_login_page_logs_in_and_goes_to_the_chat(alice):
    client = Client()
    page = client.get("/login/")
    assert page.status_code == 200 and b'autocomplete="current-password"' in page.content
    response = client.post("/login/", {"username": "alice", "password": "alice-password-1"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200


def test_a_wrong_password_is_refused_with_a_clear_message(alice):
    response = Client().post("/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert b"Wrong username or password." in response.content


def test_failed_logins_are_limited_per_address_and_the_limit_holds_for_a_right_password(alice, settings):
    client = Client()
    for _ in range(settings.AGENTLOOM_LOGIN_LIMIT[0]):
        client.post("/login/", {"username": "alice", "password": "guess"})
    blocked = client.post("/login/", {"username": "alice", "password": "alice-password-1"})
    assert blocked.status_code == 429
    assert b"Too many failed attempts" in blocked.content
    assert "_auth_user_id" not in client.session


def test_logging_out_is_a_post_and_returns_to_the_login_page(client_for, alice):
    client = client_for(alice)
    assert client.get("/logout/").status_code == 405  # a link or an image cannot log anyone out
    response = client.post("/logout/")
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert client.get("/").status_code == 302


# --- reach: only your own sessions -------------------------------------------------------------


def test_alice_sees_only_her_own_sessions_in_the_list(client_for, alice, bob, make_session):
    finished_run(make_session(alice, title="Alice's plan"))  # listed once something was asked in it
    finished_run(make_session(bob, title="Bob's secret"))
    page = client_for(alice).get("/").content.decode()
    assert "Alice&#x27;s plan" in page
    assert "Bob" not in page


@pytest.mark.parametrize("intruder", ["bob", "mallory"])
def test_someone_elses_session_page_is_not_found(client_for, alice, make_session, intruder, request):
    session = make_session(alice)
    finished_run(session)
    response = client_for(request.getfixturevalue(intruder)).get(f"/sessions/{session.pk}/")
    assert response.status_code == 404
    assert b"6*7" not in response.content


@pytest.mark.parametrize("path", ["/chat/runs/{run}/fragment", "/chat/runs/{run}/text?after=0&upto=9"])
def test_someone_elses_run_fragments_are_not_found(client_for, alice, bob, make_session, path):
    run = finished_run(make_session(alice))
    response = client_for(bob).get(path.format(run=run.pk))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


# --- starting sessions -------------------------------------------------------------------------


def test_a_new_chat_is_only_a_page_until_its_first_question_which_binds_the_latest_version(
        client_for, alice, agent, version):
    from agents.services import agent_publish

    newer = agent_publish(agent=agent, published_by=alice)
    client = client_for(alice)
    for _ in range(3):  # opening "New chat" again and again leaves nothing behind
        page = client.get("/sessions/new", {"agent": agent.pk})
        assert page.status_code == 200 and b'id="question"' in page.content and b"compact-now" not in page.content
    posted = client.post("/sessions/new", {"agent": agent.pk})  # an older form: redirected, nothing created
    assert posted.status_code == 303 and posted["Location"] == f"/sessions/new?agent={agent.pk}"
    assert Session.objects.count() == 0
    response = client.post("/sessions/new/questions", {"agent": agent.pk, "content": "Hello?"},
                           content_type="application/json")
    session = Session.objects.get(user=alice)
    assert response.status_code == 202
    assert response.json() == {"session": session.pk, "run": session.runs.get().pk, "url": f"/sessions/{session.pk}/"}
    assert session.version == newer != version and session.title == "Hello?"


def test_a_first_question_that_is_refused_creates_no_session(client_for, alice, mallory, agent, version):
    empty = client_for(alice).post("/sessions/new/questions", {"agent": agent.pk, "content": "  "},
                                   content_type="application/json")
    assert empty.status_code == 400 and empty.json()["error"]["message"] == "Write something first."
    foreign = client_for(mallory).post("/sessions/new/questions", {"agent": agent.pk, "content": "Hi"},
                                       content_type="application/json")
    assert foreign.status_code == 400 and foreign.json()["error"]["message"] == "No such agent."
    assert Session.objects.count() == 0


def test_an_agent_of_another_space_cannot_be_started(client_for, mallory, mallory_space, agent, version):
    response = client_for(mallory).post("/sessions/new", {"agent": agent.pk})
    assert response.status_code == 400
    assert b"No such agent." in response.content
    assert Session.objects.count() == 0


def test_only_agents_with_a_published_version_are_offered(client_for, alice, agent, space, demo_connection):
    from agents.services import agent_create

    agent_create(space=space, name="Draft only", model_connection=demo_connection, instructions="",
                 tools=[], created_by=alice)
    page = client_for(alice).get("/").content.decode()
    assert "Draft only" not in page
    assert "Helper" not in page  # the conftest's agent has no version until the `version` fixture


def test_a_member_is_offered_the_spaces_published_agents(client_for, bob, agent, version):
    page = client_for(bob).get("/").content.decode()
    assert "New chat with Helper" in page
    assert "Offline demo model" in page  # the demo is labelled as one


# --- the session page ----------------------------------------------------------------------------


def test_finished_runs_are_rendered_from_their_records_with_safe_markdown(client_for, alice, make_session):
    session = make_session(alice)
    run = finished_run(session, steps=[
        {"content": "Let me compute.", "call": ("c1", "calculator", "6*7 = 42")},
        {"content": "It is **42**. <script>alert(1)</script> [x](javascript:alert(1))"},
    ])
    page = client_for(alice).get(f"/sessions/{session.pk}/").content.decode()
    section = run_section(page, run)
    assert 'data-live' not in section
    assert "<strong>42</strong>" in section
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section and "<script>alert" not in section
    assert 'href="javascript' not in section
    assert re.search(r'<details class="step step-ok" data-call-id="c1">', section)
    assert '<span class="step-status">done</span>' in section and '<span class="step-duration">12 ms</span>' in section
    assert "6*7 = 42" in section


def test_a_working_run_shows_its_question_and_leaves_the_rest_to_the_stream(client_for, alice, make_session):
    session = make_session(alice)
    run = finished_run(session, question="Still thinking?", steps=[{"content": "Half"}], status=Run.Status.RUNNING)
    page = client_for(alice).get(f"/sessions/{session.pk}/").content.decode()
    section = run_section(page, run)
    assert 'data-live="1"' in section and "data-live-area" in section
    assert "Still thinking?" in section
    assert "Half" not in section  # the browser replays it from the events


def test_a_stopped_run_keeps_its_partial_text_and_only_the_latest_offers_resume(client_for, alice, make_session):
    session = make_session(alice)
    first = finished_run(session, steps=[{"content": "Cut he", "partial": True}], status=Run.Status.CANCELLED)
    latest = finished_run(session, question="Again", steps=[{"content": "Also cu", "partial": True}],
                          status=Run.Status.CANCELLED)
    page = client_for(alice).get(f"/sessions/{session.pk}/").content.decode()
    # Said once: the notice, not also a note under the text.
    stopped = run_section(page, first)
    assert stopped.count("You stopped this answer.") == 1 and "Cut short" not in stopped and "Cut he" in stopped
    assert "data-resume" not in run_section(page, first)
    assert f'data-resume="{latest.pk}"' in run_section(page, latest)


@pytest.mark.parametrize(("error", "title", "resumable"), [
    ({"code": "auth", "message": "The provider refused the key.", "retryable": False},
     "The model provider refused the API key", False),
    ({"code": "rate_limited", "message": "Too many requests.", "retryable": True},
     "Rate-limited by the model provider", True),
    ({"code": "context_overflow", "message": "Too long.", "retryable": False},
     "Context overflow: the conversation is too long for the model", False),
])
def test_a_failed_run_says_what_went_wrong(client_for, alice, make_session, error, title, resumable):
    session = make_session(alice)
    run = finished_run(session, steps=[], status=Run.Status.FAILED, error=error)
    section = run_section(client_for(alice).get(f"/sessions/{session.pk}/").content.decode(), run)
    assert f'<p class="error-title">{title}</p>' in section
    assert error["message"] in section
    assert ("data-resume" in section) is resumable


def test_the_demo_session_is_labelled_as_a_demo(client_for, alice, make_session):
    page = client_for(alice).get(f"/sessions/{make_session(alice).pk}/").content.decode()
    assert '<span class="badge badge-demo">Demo model</span>' in page
    assert "Offline demo model." in page


def test_the_page_hands_the_browser_its_urls_and_error_words(client_for, alice, make_session):
    session = make_session(alice)
    response = client_for(alice).get(f"/sessions/{session.pk}/")
    config = response.context["chat_config"]
    assert config["urls"]["events"] == "/api/v1/runs/{id}/events"
    assert config["urls"]["questions"] == f"/api/v1/sessions/{session.pk}/questions"
    assert config["urls"]["fragment"] == "/chat/runs/{id}/fragment"
    assert config["errors"]["runs"]["rate_limited"]["title"] == "Rate-limited by the model provider"
    assert response.cookies["csrftoken"].value  # the script sends it back as X-CSRFToken


def test_earlier_questions_are_paged(client_for, alice, make_session):
    session = make_session(alice)
    runs = [finished_run(session, question=f"Question number {n}") for n in range(22)]
    client = client_for(alice)
    latest = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "Question number 21" in latest and "Question number 1<" not in latest
    assert f'href="?before={runs[2].pk}"' in latest
    earlier = client.get(f"/sessions/{session.pk}/?before={runs[2].pk}").content.decode()
    assert "Question number 1<" in earlier and "Question number 2<" not in earlier
    assert 'id="composer"' not in earlier  # ask from the latest page only
    assert "Back to the latest questions" in earlier


def test_chat_pages_carry_a_strict_content_security_policy(client_for, alice, make_session):
    client = client_for(alice)
    for path in ("/", f"/sessions/{make_session(alice).pk}/"):
        policy = client.get(path)["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy and "object-src 'none'" in policy
    assert "script-src 'self'" in Client().get("/login/")["Content-Security-Policy"]


# --- fragments -----------------------------------------------------------------------------------


def test_the_run_fragment_carries_status_last_seq_and_the_rendered_run(client_for, alice, make_session):
    session = make_session(alice)
    run = finished_run(session, steps=[{"content": "Done *well*."}])
    body = client_for(alice).get(f"/chat/runs/{run.pk}/fragment").json()
    assert body["status"] == "completed" and body["active"] is False
    assert body["last_seq"] == run.events.order_by("-seq").first().seq
    assert body["html"].startswith(f'<section class="run run-completed" id="run-{run.pk}"')
    assert "<em>well</em>" in body["html"]


def test_the_run_fragment_of_a_working_run_is_live(client_for, alice, make_session):
    run = finished_run(make_session(alice), status=Run.Status.RUNNING)
    body = client_for(alice).get(f"/chat/runs/{run.pk}/fragment").json()
    assert body["active"] is True and "data-live-area" in body["html"]


def test_the_text_fragment_renders_what_was_streamed_between_two_seqs(client_for, alice, make_session):
    from sessions.services.events import event_emit

    run = finished_run(make_session(alice), status=Run.Status.RUNNING, steps=[])
    first = event_emit(run_id=run.pk, type="message_delta", data={"text": "Wrong", "instance": "main"})
    event_emit(run_id=run.pk, type="run_error", data={"code": "rate_limited", "retrying_in": 1, "reset": True,
                                                      "instance": "main"})
    event_emit(run_id=run.pk, type="message_delta", data={"text": "**Right** <b>x</b>", "instance": "main"})
    last = event_emit(run_id=run.pk, type="message_delta", data={"text": " answer", "instance": "main"})
    event_emit(run_id=run.pk, type="message_delta", data={"text": " LATER", "instance": "main"})
    response = client_for(alice).get(f"/chat/runs/{run.pk}/text", {"after": first.seq - 1, "upto": last.seq})
    assert response.json() == {"html": "<p><strong>Right</strong> &lt;b&gt;x&lt;/b&gt; answer</p>"}
    assert response["Cache-Control"] == "no-store"


@pytest.mark.parametrize("query", ["", "after=5&upto=2", "after=-1&upto=3", "after=a&upto=3",
                                   "after=0&upto=999999"])
def test_the_text_fragment_refuses_bad_ranges(client_for, alice, make_session, query):
    run = finished_run(make_session(alice))
    response = client_for(alice).get(f"/chat/runs/{run.pk}/text?{query}")
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid"


# --- the admin home --------------------------------------------------------------------------------


def test_the_admin_home_says_how_to_add_a_real_provider(django_user_model):
    admin = django_user_model.objects.create_superuser(username="root", password="root-password-1")
    client = Client()
    client.force_login(admin)
    page = client.get("/admin/").content.decode()
    assert "Add a real model provider" in page
    assert 'href="/admin/models_catalog/modelconnection/add/"' in page
    assert "Discover models" in page and "Publish" in page
