"""One run error (``sessions.run_errors.RunError``): the run row, the ``run_finished``
event, the ``error`` event and the run's status record all carry the same words."""
from __future__ import annotations

from sessions.models import Run, RunEvent, SessionMessage
from sessions.run_errors import INTERRUPTED, RunError
from sessions.services.questions import question_ask
from sessions.services.runs import run_finish
from tests.sessions.helpers import claim


def test_a_failed_run_stores_and_announces_its_error_one_way(make_session, alice):
    run = claim(question_ask(session=make_session(alice), content="Summarise the contract."))
    error = RunError("rate_limited", "The provider is rate limiting requests; resume in a minute.", retryable=True)
    assert run_finish(run=run, status=Run.Status.FAILED, error=error)
    run.refresh_from_db()
    finished = RunEvent.objects.get(run=run, type="run_finished").payload
    record = SessionMessage.objects.get(run=run, kind="run_status").message
    assert run.error == finished["error"] == error.to_dict() == {
        "code": "rate_limited", "message": error.message, "retryable": True}
    assert record["error"] == {"code": "rate_limited", "message": error.message}
    assert RunError.from_dict(run.error) == error


def test_a_retry_event_is_the_run_error_plus_what_the_retry_adds():
    data = INTERRUPTED.event(retrying_in=2.0, attempt=1, reset=True)
    assert {k: data[k] for k in ("code", "message", "retryable")} == INTERRUPTED.to_dict()
    assert (data["retrying_in"], data["attempt"], data["reset"]) == (2.0, 1, True)


def test_an_error_stored_before_it_had_a_retryable_flag_reads_as_resumable():
    assert RunError.from_dict({"code": "provider_unavailable", "message": "down"}).retryable is True
    assert RunError.from_dict({"code": "not_a_member", "message": "gone", "retryable": False}).retryable is False
