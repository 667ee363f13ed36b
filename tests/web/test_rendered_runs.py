"""A finished run's chat HTML is rendered once and kept; chat page renders are bounded per
person (issue #44 item 15; web/rendered_runs.py, core/slow_work.py).

What is checked is work and words, never time: a page seen again reads none of its
finished runs' records (the statements it runs say so) and is the same page, byte for
byte, as one rendered from the records; any change a run's HTML depends on — a resume, a
newer run, a record, the page's budget — shows at once; a person's fifth page at once is
refused with 429 and Retry-After while another person's page is served.
"""
from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from sessions.models import Run, SessionMessage
from sessions.selectors.instances import main_instance
from sessions.services.records import record_append
from sessions.services.run_controls import run_resume
from sessions.services.runs import run_claim, run_finish
from tests.web.conftest import finished_run
from web import views as views_module

pytestmark = pytest.mark.django_db

ANSWER = "## Found it\n\n" + "The disk is **full**: `/var` holds the logs of three years.\n\n" * 20


def page_of(client: Client, session) -> str:
    """The page's conversation (the rest holds a CSRF token masked anew each time)."""
    response = client.get(f"/sessions/{session.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    start, end = html.index('<div class="transcript" id="transcript"'), html.index('<div class="composer-dock">')
    return html[start:end]


def records_read(queries) -> list[str]:
    """The statements that read records' content (the encrypted ``message`` column)."""
    return [query["sql"] for query in queries if "sessions_sessionmessage" in query["sql"]
            and '"message"' in query["sql"] and query["sql"].lstrip().upper().startswith("SELECT")]


def uncached_page(client: Client, session, settings) -> str:
    """The page as it is rendered from the records, nothing kept."""
    from web.rendered_runs import KEPT

    bound = settings.AGENTLOOM_RUN_HTML_CACHE_BYTES
    settings.AGENTLOOM_RUN_HTML_CACHE_BYTES = 0
    KEPT.clear()
    try:
        return page_of(client, session)
    finally:
        settings.AGENTLOOM_RUN_HTML_CACHE_BYTES = bound


def test_a_page_seen_again_reads_no_finished_runs_records_and_is_the_same_page(alice, make_session, client_for,
                                                                              settings):
    session = make_session(alice)
    for number in range(3):
        finished_run(session, question=f"Question {number}", steps=[{"content": ANSWER}])
    client = client_for(alice)
    with CaptureQueriesContext(connection) as first:
        seen = page_of(client, session)
    with CaptureQueriesContext(connection) as again:
        assert page_of(client, session) == seen
    assert len(records_read(first.captured_queries)) == 1  # the three runs' records, in one statement
    assert records_read(again.captured_queries) == []
    assert uncached_page(client, session, settings) == seen


def test_the_fragment_and_the_page_share_the_newest_runs_html(alice, make_session, client_for):
    session = make_session(alice)
    run = finished_run(session, steps=[{"content": ANSWER}])
    client = client_for(alice)
    fragment = client.get(f"/chat/runs/{run.pk}/fragment").json()
    with CaptureQueriesContext(connection) as seen:
        page = page_of(client, session)
    assert fragment["html"] in page
    assert records_read(seen.captured_queries) == []


def test_a_resumed_run_shows_its_new_ending_not_the_kept_one(alice, make_session, client_for, settings):
    session = make_session(alice)
    run = finished_run(session, steps=[{"content": "Working on it", "partial": True}], status=Run.Status.CANCELLED)
    client = client_for(alice)
    assert "You stopped this answer." in page_of(client, session)
    run_resume(run=run)
    run = run_claim(run_id=run.pk)
    record_append(session=session, run=run, instance=main_instance(run=run), kind="assistant",
                  entry_key="assistant-resumed", message={"role": "assistant", "content": "All done now."})
    run_finish(run=run, status=Run.Status.COMPLETED)
    page = page_of(client, session)
    assert "All done now." in page
    assert page == uncached_page(client, session, settings)


def test_a_newer_run_takes_resume_from_the_run_before_it(alice, make_session, client_for, settings):
    session = make_session(alice)
    stopped = finished_run(session, steps=[{"content": "Half", "partial": True}], status=Run.Status.CANCELLED)
    client = client_for(alice)
    assert f'data-resume="{stopped.pk}"' in page_of(client, session)
    finished_run(session, question="Something else")
    page = page_of(client, session)
    assert f'data-resume="{stopped.pk}"' not in page  # only the latest run offers Resume
    assert page == uncached_page(client, session, settings)


def test_a_record_written_to_a_finished_run_shows(alice, make_session, client_for, settings):
    session = make_session(alice)
    run = finished_run(session)
    client = client_for(alice)
    page_of(client, session)
    record_append(session=session, run=run, instance=main_instance(run=run), kind="assistant",
                  entry_key="assistant-late", message={"role": "assistant", "content": "A late word."})
    page = page_of(client, session)
    assert "A late word." in page and page == uncached_page(client, session, settings)


def test_a_run_kept_under_a_fresh_budget_is_rendered_again_under_a_spent_one(alice, agent, version, client_for,
                                                                               settings):
    """An import of more text than a page shows (SPEC §10 budget), then a newer run: the
    import's kept HTML was made with the whole budget, the page's now has less."""
    from sessions.services.imports import session_import

    big = "word " * 20_000  # 100,000 characters a message
    session = session_import(user=alice, agent_id=agent.pk, transcript=[
        {"role": "user" if n % 2 == 0 else "assistant", "content": big} for n in range(8)])
    client = client_for(alice)
    alone = page_of(client, session)
    finished_run(session, question="And now?", steps=[{"content": big * 3}])
    page = page_of(client, session)
    assert page != alone and page == uncached_page(client, session, settings)
    assert SessionMessage.objects.filter(session=session).count() > 8


def test_past_its_bound_the_least_recently_used_html_is_dropped(alice, make_session, client_for, settings):
    from web.rendered_runs import KEPT

    session = make_session(alice)
    for number in range(4):
        finished_run(session, question=f"Question {number}", steps=[{"content": ANSWER}])
    client = client_for(alice)
    page_of(client, session)
    settings.AGENTLOOM_RUN_HTML_CACHE_BYTES = KEPT.size // 2
    finished_run(session, question="One more", steps=[{"content": ANSWER}])
    page_of(client, session)
    assert 0 < KEPT.size <= settings.AGENTLOOM_RUN_HTML_CACHE_BYTES


class HeldRenders:
    """Chat page renders, held: each says it started, then waits for the test."""

    def __init__(self, real) -> None:
        self.real, self.started, self.release = real, threading.Semaphore(0), threading.Event()

    def __call__(self, **arguments):
        self.started.release()
        assert self.release.wait(60), "the test never released the render"
        return self.real(**arguments)


@pytest.mark.django_db(transaction=True)
def test_a_persons_pages_rendering_at_once_are_bounded_and_others_are_served(alice, bob, make_session, settings,
                                                                           monkeypatch):
    settings.AGENTLOOM_RENDERS_PER_PERSON = 2
    held = HeldRenders(views_module.runs_rendered)
    monkeypatch.setattr(views_module, "runs_rendered", held)
    alices, bobs = make_session(alice), make_session(bob)
    finished_run(alices)
    finished_run(bobs)

    def logged_in(user) -> Client:
        client = Client()
        client.force_login(user)
        return client

    answers: list[int] = []
    threads = [threading.Thread(target=lambda: answers.append(logged_in(alice).get(f"/sessions/{alices.pk}/")
                                                             .status_code)) for _ in range(2)]
    try:
        for thread in threads:
            thread.start()
        for _ in threads:
            assert held.started.acquire(timeout=60)
        refused = logged_in(alice).get(f"/sessions/{alices.pk}/")
        assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
        assert "This page was not shown; try again in a few seconds." in refused.content.decode()
        assert f'<meta http-equiv="refresh" content="{refused["Retry-After"]}">' in refused.content.decode()
        fragment = logged_in(alice).get(f"/chat/runs/{Run.objects.get(session=alices).pk}/fragment")
        assert fragment.status_code == 429 and fragment.json()["error"]["code"] == "too_many_at_once"
        assert int(fragment["Retry-After"]) >= 1
        held.release.set()  # bob's own render goes through at once
        assert logged_in(bob).get(f"/sessions/{bobs.pk}/").status_code == 200
    finally:
        held.release.set()
        for thread in threads:
            thread.join(timeout=60)
    assert answers == [200, 200]
