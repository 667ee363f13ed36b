"""CTX-45 in the session API: ``prepared_summary`` says whether the next compaction has a
summary ready (or one being prepared), so an idle session's chat knows it when it loads.
The rows are made by the services the worker uses; the summary text is never shown."""
from __future__ import annotations

from datetime import datetime

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from sessions.models import PreparedCompaction
from sessions.selectors.instances import main_instance
from sessions.selectors.sessions import prepared_summary_state
from sessions.services.prepared import (
    preparation_claim,
    preparation_ready,
    preparation_request,
    preparation_take,
    preparations_end,
)
from sessions.services.questions import question_ask
from tests.sessions.helpers import claim

pytestmark = pytest.mark.django_db

SUMMARY = "Earlier the user named the heron Waldemar."  # words only the summary holds
MESSAGES = [{"role": "user", "content": "Remember the vault code 7-4-1-9."},
            {"role": "assistant", "content": "Noted."}]


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def asked(session) -> PreparedCompaction:
    """A preparation asked for by the session's run, as the loop asks past the prepare point."""
    run = claim(question_ask(session=session, content="Remember the vault code 7-4-1-9."))
    prepared = preparation_request(
        run=run, instance=main_instance(run=run), tokens=900, policy={"target_ratio": 0.5},
        estimator_id="bytes-v1", snapshot={"system": {"role": "system", "content": "Be brief."}, "tools": [],
                                           "messages": MESSAGES, "sources": [None, None]})
    assert prepared is not None
    return prepared


def made_ready(prepared: PreparedCompaction) -> PreparedCompaction:
    claimed = preparation_claim(prepared_id=prepared.pk)
    assert claimed is not None
    assert preparation_ready(prepared=claimed, summary=SUMMARY, prefix=1, digest="d" * 64,
                             metrics={"summary_calls": 1})
    claimed.refresh_from_db()
    return claimed


def detail(user, session) -> dict:
    response = api(user).get(f"/api/v1/sessions/{session.pk}")
    assert response.status_code == 200
    return response.json()


def test_ctx45_a_session_without_a_prepared_summary_says_null(make_session, alice):
    session = make_session(alice)
    assert detail(alice, session)["prepared_summary"] is None


def test_ctx45_a_ready_summary_is_ready_with_its_time_and_never_its_text(make_session, alice):
    session = make_session(alice)
    prepared = made_ready(asked(session))
    body = detail(alice, session)
    assert body["prepared_summary"]["status"] == "ready"
    assert datetime.fromisoformat(body["prepared_summary"]["ready_at"].replace("Z", "+00:00")) == prepared.ready_at
    assert set(body["prepared_summary"]) == {"status", "ready_at"}
    assert "Waldemar" not in str(body)


def test_ctx45_a_summary_under_way_is_preparing(make_session, alice):
    session = make_session(alice)
    asked(session)
    assert detail(alice, session)["prepared_summary"] == {"status": "preparing", "ready_at": None}


@pytest.mark.parametrize("end", ["used", "discarded", "failed"])
def test_ctx45_a_used_discarded_or_failed_summary_is_null(make_session, alice, end):
    from sessions.services.prepared import preparation_failed

    session = make_session(alice)
    prepared = asked(session)
    if end == "failed":
        preparation_failed(prepared=prepared, reason="internal_error")
    else:
        prepared = made_ready(prepared)
        if end == "used":
            assert preparation_take(prepared=prepared)
        else:
            assert preparations_end(prepared=prepared, status=PreparedCompaction.Status.DISCARDED,
                                    reason="view_changed")
    assert PreparedCompaction.objects.get(pk=prepared.pk).status == end
    assert detail(alice, session)["prepared_summary"] is None


def test_ctx45_a_preparation_whose_worker_went_away_is_not_preparing(make_session, alice):
    session = make_session(alice)
    with override_settings(AGENTLOOM_PREPARATION_LEASE_SECONDS=-60):  # its lease lapsed a minute ago
        prepared = asked(session)
    assert prepared.status == PreparedCompaction.Status.PREPARING
    assert prepared_summary_state(session=session) is None
    assert detail(alice, session)["prepared_summary"] is None
    # Reading wrote nothing: the services end the row when they next look.
    assert PreparedCompaction.objects.get(pk=prepared.pk).status == PreparedCompaction.Status.PREPARING


def test_ctx45_other_people_still_get_404(make_session, alice, bob, mallory, mallory_space):
    session = make_session(alice)
    made_ready(asked(session))
    for other in (bob, mallory):  # bob shares the space and the agent; mallory does not
        response = api(other).get(f"/api/v1/sessions/{session.pk}")
        assert response.status_code == 404 and "prepared_summary" not in str(response.json())
