"""CTX-51 in the chat: the newest summary's marker offers Undo to the session's creator
while no run works; afterwards the marker says "summary undone" and offers nothing."""
from __future__ import annotations

import re

import pytest

from sessions.models import CompactionSnapshot, Run
from sessions.selectors.instances import main_instance
from sessions.services.checkpoints import checkpoint_commit
from sessions.services.questions import question_ask
from sessions.services.records import NewRecord
from sessions.services.runs import run_finish
from tests.web.conftest import finished_run

pytestmark = pytest.mark.django_db

UNDO = re.compile(r'data-undo-compaction="(\d+)"')


def compacted_run(session, question: str, *, folded_only: bool = False) -> Run:
    """A finished run whose view was compacted after its answer, as the worker commits it
    (``folded_only``: the first tier alone, CTX-47 -- no summary, one result folded)."""
    run = finished_run(session, question=question, status=Run.Status.RUNNING)
    session.refresh_from_db()
    covered = session.last_seq
    checkpoint_commit(run=run, instance=main_instance(run=run), covered_seq=covered, estimator_id="bytes-v1",
                      messages=[{"role": "user", "content": "summary"}], metrics={"trigger": "manual"},
                      records=[NewRecord("compaction_summary", {"summary": None, "metrics": {
                          "tiers": ["mask"], "masked_results": 1, "masked_seqs": [covered]}} if folded_only else
                          {"summary": f"Summary of {question}", "metrics": {}}, f"compaction-{covered}-manual")])
    assert run_finish(run=run, status=Run.Status.COMPLETED)
    return run


def page(client, session) -> str:
    response = client.get(f"/sessions/{session.pk}/")
    assert response.status_code == 200
    return response.content.decode()


@pytest.fixture
def session(make_session, alice):
    session = make_session(alice)
    compacted_run(session, "First question")
    compacted_run(session, "Second question")
    return session


def test_ctx51_only_the_newest_summary_offers_undo_and_an_undone_one_says_so(session, alice, client_for):
    client = client_for(alice)
    html = page(client, session)
    newest = CompactionSnapshot.objects.filter(instance__run__session=session).order_by("-id").first()
    assert UNDO.findall(html) == [str(newest.pk)]  # one offer, on the newest marker only
    response = client.post(f"/api/v1/sessions/{session.pk}/compactions/undo", {"compaction": newest.pk},
                           content_type="application/json", HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value)
    assert response.status_code == 200, response.content
    html = page(client, session)
    assert UNDO.findall(html) == [] and html.count("summary undone") == 1
    assert "the agent reads the earlier messages in full again" in html


def test_ctx51_no_undo_is_offered_while_a_run_works(session, alice, client_for):
    question_ask(session=session, content="Third question")  # queued
    assert UNDO.findall(page(client_for(alice), session)) == []


def test_ctx51_another_member_cannot_reach_the_chat_or_the_undo(session, bob, client_for):
    client = client_for(bob)
    assert client.get(f"/sessions/{session.pk}/").status_code == 404
    assert client.post(f"/api/v1/sessions/{session.pk}/compactions/undo").status_code in (403, 404)


def test_ctx51_a_compaction_that_only_folded_tool_results_is_undone_from_its_own_marker(make_session, alice,
                                                                                      client_for):
    """Most compactions fold older tool results and summarize nothing (CTX-47): their marker
    offers the undo too, in its own words, and says afterwards that the folding was undone."""
    session = make_session(alice)
    compacted_run(session, "First question")
    compacted_run(session, "Second question", folded_only=True)
    client = client_for(alice)
    html = page(client, session)
    newest = CompactionSnapshot.objects.filter(instance__run__session=session).order_by("-id").first()
    assert UNDO.findall(html) == [str(newest.pk)] and "Undo folding" in html and "Undo summary" not in html
    response = client.post(f"/api/v1/sessions/{session.pk}/compactions/undo", {"compaction": newest.pk},
                           content_type="application/json", HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value)
    assert response.status_code == 200, response.content
    html = page(client, session)
    assert UNDO.findall(html) == [] and "Folding undone" in html and "summary undone" not in html
