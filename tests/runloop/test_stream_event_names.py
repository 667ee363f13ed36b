"""Event names on the wire (LOOP-5): none is one of the names a browser's EventSource
dispatches to its own handlers (``error`` reaches ``onerror``, the connection-lost
handler), and an event stored under an earlier name is read under its current one."""
from __future__ import annotations

import json

import httpx
import pytest

from runloop.loop import run_execute
from sessions.event_stream import event_as_dict, sse_frame
from sessions.models import Run, RunEvent
from sessions.services.events import EVENT_TYPES, EVENTSOURCE_NAMES, event_emit, event_seqs_take
from sessions.services.questions import question_ask
from tests.conftest import token_for
from tests.fakes.fake_provider import chat_stream, error, sequence
from tests.runloop.livesrv import LiveServer, read_sse
from web.transcript import text_from_deltas

pytestmark = pytest.mark.django_db(transaction=True)


def test_no_event_type_is_one_of_eventsources_own_names():
    assert EVENTSOURCE_NAMES == {"error", "open", "message"}
    assert not EVENT_TYPES & EVENTSOURCE_NAMES
    assert "run_error" in EVENT_TYPES


def test_an_event_of_an_unknown_or_old_name_is_never_written(fake_session, strict):
    run = question_ask(session=fake_session(), content="Hi")
    with pytest.raises(ValueError, match="unknown event type 'error'"):
        event_emit(run_id=run.pk, type="error", data={"code": "rate_limited"})


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_a_retried_provider_fault_goes_out_as_run_error_on_the_stream_and_the_json_page(
        fake_session, strict, alice, dialect):
    strict.handler = sequence(error(429, "slow down", retry_after="0"), chat_stream(["Fine now."]))
    run = question_ask(session=fake_session(), content="Hi")
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    headers = {"Authorization": f"Token {token_for(alice)}"}
    with LiveServer() as server, httpx.Client(base_url=server.url, headers=headers, timeout=10) as client:
        with client.stream("GET", f"/api/v1/runs/{run.pk}/events") as response:
            frames = read_sse(response.iter_lines())
        page = client.get(f"/api/v1/runs/{run.pk}/events", params={"format": "json"}).json()
    names = [frame["event"] for frame in frames]
    assert "run_error" in names and not set(names) & EVENTSOURCE_NAMES
    retry = json.loads(frames[names.index("run_error")]["data"])
    assert retry["code"] == "rate_limited" and retry["retrying_in"] == 0.0 and retry["reset"] is True
    assert [item["type"] for item in page["items"]] == names


def test_an_error_stored_under_its_old_name_is_framed_and_listed_as_run_error(fake_session, strict):
    run = question_ask(session=fake_session(), content="Hi")
    seq, _ = event_seqs_take(run_id=run.pk, count=1)
    old = RunEvent.objects.create(run=run, seq=seq, type="error",
                                  payload={"code": "provider_unavailable", "retrying_in": 2.0, "reset": True})
    assert sse_frame(old).decode().splitlines()[:2] == [f"id: {seq}", "event: run_error"]
    assert event_as_dict(old)["type"] == "run_error"


def test_an_old_stored_retry_still_drops_the_failed_attempts_text_when_a_block_is_rendered():
    events = [("message_delta", {"text": "Half an ans", "instance": "main"}),
              ("error", {"code": "rate_limited", "retrying_in": 1.0, "reset": True, "instance": "main"}),
              ("message_delta", {"text": "The whole answer.", "instance": "main"})]
    assert text_from_deltas(events) == "The whole answer."
