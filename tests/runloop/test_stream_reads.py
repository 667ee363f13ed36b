"""An event stream reads its run in one statement, and ends on the read that brings the end
(issue #29).

Each read of a stream gives the run's status, as the reader may see it, and the events
after the last one sent, from one snapshot: a finished status read with the events means
they are all there will be, so the stream ends then, without reading again to check.
"""
from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.test.utils import CaptureQueriesContext

from core.spaces.models import Membership
from sessions import event_stream as stream
from sessions.models import Run
from sessions.services.events import event_emit, events_write
from sessions.services.questions import question_ask
from sessions.services.runs import run_finish

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_read_is_one_statement_with_the_status_and_the_events_through_the_readers_access(alice, bob,
                                                                                            make_session):
    run = question_ask(session=make_session(alice), content="Hello")
    for number in range(3):
        event_emit(run_id=run.pk, type="message_delta", data={"text": f"part {number}"})
    with CaptureQueriesContext(connections["default"]) as reads:
        events, status = stream.stream_poll(run_id=run.pk, user_id=alice.pk, after=1)
    assert len(reads.captured_queries) == 1
    assert status == "queued"
    assert [(e.seq, e.type, e.payload) for e in events] == [(2, "message_delta", {"text": "part 1"}),
                                                            (3, "message_delta", {"text": "part 2"})]
    assert stream.stream_poll(run_id=run.pk, user_id=alice.pk, after=3) == ([], "queued")  # nothing new, still there
    assert stream.stream_poll(run_id=run.pk, user_id=bob.pk, after=0) == ([], None)  # not Bob's run
    Membership.objects.filter(user=alice).delete()
    assert stream.stream_poll(run_id=run.pk, user_id=alice.pk, after=0) == ([], None)  # Alice left the space


def test_a_stream_ends_on_the_read_that_brings_run_finished(alice, make_session, monkeypatch, settings):
    settings.REDIS_URL = ""  # polling: the reads do not wait on a nudge
    run = question_ask(session=make_session(alice), content="Hello")
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    run.refresh_from_db()
    event_emit(run_id=run.pk, type="run_started", data={"attempt": 0})
    reads: list[tuple[list, str | None]] = []
    real_poll = stream.stream_poll

    def counted(**kwargs):
        result = real_poll(**kwargs)
        reads.append(result)
        return result

    monkeypatch.setattr(stream, "stream_poll", counted)

    async def scenario() -> list[bytes]:
        frames = stream.run_event_stream(run_id=run.pk, user_id=alice.pk, after=0)
        seen = [await frames.__anext__(), await frames.__anext__()]  # retry:, then run_started
        await sync_to_async(run_finish, thread_sensitive=False)(run=run, status=Run.Status.COMPLETED)
        seen += [frame async for frame in frames]
        return seen

    frames = asyncio.run(asyncio.wait_for(scenario(), timeout=60))
    assert b"event: run_started" in frames[1] and b"event: run_finished" in frames[-1]
    last_events, last_status = reads[-1]
    assert [event.type for event in last_events] == ["run_finished"] and last_status == "completed"


def test_what_one_read_brings_is_sent_in_one_write_in_order(alice, make_session, settings):
    """Each write of a stream is a chunk through the server's HTTP machinery (issue #29):
    the events of one read go out together, each still its own SSE event with its id."""
    settings.REDIS_URL = ""
    run = question_ask(session=make_session(alice), content="Hello")
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    run.refresh_from_db()
    events_write(run_id=run.pk, events=[("run_started", {"attempt": 0}), ("message_delta", {"text": "Hi"}),
                                        ("message_delta", {"text": " there"})])
    run_finish(run=run, status=Run.Status.COMPLETED)

    async def scenario() -> list[bytes]:
        return [frame async for frame in stream.run_event_stream(run_id=run.pk, user_id=alice.pk, after=0)]

    frames = asyncio.run(asyncio.wait_for(scenario(), timeout=60))
    assert frames[0].startswith(b"retry:") and len(frames) == 2, frames
    sent = [block for block in frames[1].decode().split("\n\n") if block]
    assert [line for block in sent for line in block.splitlines() if line.startswith(("id:", "event:"))] == [
        "id: 1", "event: run_started", "id: 2", "event: message_delta", "id: 3", "event: message_delta",
        "id: 4", "event: run_finished"]
