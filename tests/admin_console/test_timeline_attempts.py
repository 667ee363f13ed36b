"""A run's event timeline across attempts (SPEC §10, LOOP-5): each attempt's events are
timed from that attempt's own start, and a run's ending is coloured by how it ended.

alice's second run is stopped, resumed and finished through the run services; olivia,
the operator, reads its timeline in the console.
"""
from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from sessions.admin.timeline import attempt_offsets, timeline
from sessions.models import Run, RunEvent
from sessions.services.events import event_emit
from sessions.services.run_controls import run_resume
from sessions.services.runs import run_claim, run_finish

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def events(run_id: int) -> str:
    return f"/admin/agent_sessions/run/{run_id}/events/"


def timeline_rows(html: str) -> list[tuple[str, str, str, str]]:
    """(tone, seq, offset, event type) per row."""
    return re.findall(r'<tr class="tone-(\w+)" id="event-\d+">\s*<td class="seq">([^<]*)</td>\s*'
                      r'<td class="when"><time[^>]*>([^<]+)</time></td>\s*<td class="type"><span class="event-type">'
                      r'([^<]+)</span>', html)


def at(seq_times: dict[int, float], run: Run) -> None:
    for seq, seconds in seq_times.items():
        RunEvent.objects.filter(run=run, seq=seq).update(created_at=T0 + timedelta(seconds=seconds))


@pytest.fixture
def resumed(story) -> Run:
    """The second run: a first attempt stopped by the person after 3 s, resumed 100 s
    later, answered in 2 s."""
    run = story.second
    event_emit(run_id=run.pk, type="run_started", data={"attempt": run.attempt})  # 1
    event_emit(run_id=run.pk, type="message_delta", data={"instance": "main", "text": "Thinking"})  # 2
    assert run_finish(run=run, status=Run.Status.CANCELLED)  # 3: run_finished, cancelled
    run.refresh_from_db()
    run_resume(run=run)
    again = run_claim(run_id=run.pk)  # 4: the claim writes the attempt's run_started
    event_emit(run_id=run.pk, type="message_delta", data={"instance": "main", "text": "Done."})  # 5
    assert run_finish(run=again, status=Run.Status.COMPLETED)  # 6
    at({1: 0, 2: 1.5, 3: 3, 4: 103, 5: 104, 6: 105}, run)
    # The claim of the resume moved started_at to the second attempt's start.
    Run.objects.filter(pk=run.pk).update(started_at=T0 + timedelta(seconds=103))
    return run


def test_each_attempt_of_a_resumed_run_is_timed_from_its_own_start(console, resumed):
    rows = timeline_rows(console.get(events(resumed.pk)).content.decode())
    assert [(seq, offset, kind) for _, seq, offset, kind in rows] == [
        ("1", "+0.00 s", "run_started"), ("2", "+1.50 s", "message_delta"), ("3", "+3.00 s", "run_finished"),
        ("4", "+0.00 s", "run_started"), ("5", "+1.00 s", "message_delta"), ("6", "+2.00 s", "run_finished")]


def test_a_later_page_times_its_events_from_the_attempt_they_belong_to(console, resumed):
    rows = timeline_rows(console.get(events(resumed.pk), {"after": 1, "limit": 2}).content.decode())
    assert [(seq, offset) for _, seq, offset, _ in rows] == [("2", "+1.50 s"), ("3", "+3.00 s")]
    rows = timeline_rows(console.get(events(resumed.pk), {"after": 4}).content.decode())
    assert [(seq, offset) for _, seq, offset, _ in rows] == [("5", "+1.00 s"), ("6", "+2.00 s")]


def test_a_cancelled_ending_is_not_coloured_as_a_success(console, resumed):
    tones = {seq: tone for tone, seq, _, kind in timeline_rows(console.get(events(resumed.pk)).content.decode())}
    assert tones["3"] == "warn"  # cancelled
    assert tones["6"] == "run"  # completed: the green of a run that went well


@pytest.mark.parametrize(("status", "tone"), [
    ("completed", "run"), ("cancelled", "warn"), ("interrupted", "warn"), ("failed", "bad"), ("timeout", "bad"),
    ("something_new", "warn"),
])
def test_a_run_finished_row_takes_the_colour_of_its_status(status, tone):
    [row] = timeline([(1, "run_finished", T0, {"status": status, "error": None})])
    assert row.tone == tone


@pytest.mark.parametrize("kind", ["error", "run_error"])
def test_a_run_error_reads_as_an_error_under_either_name(console, story, kind):
    event_emit(run_id=story.second.pk, type="run_started", data={"attempt": 0})
    RunEvent.objects.create(run=story.second, seq=2, type=kind,
                            payload={"code": "provider_unavailable", "message": "The provider did not answer."})
    rows = timeline_rows(console.get(events(story.second.pk)).content.decode())
    assert rows[-1][0] == "bad" and rows[-1][3] == kind
    assert "The provider did not answer." in console.get(events(story.second.pk)).content.decode()


def test_offsets_restart_at_each_attempt_start_and_never_go_negative():
    rows = timeline([(1, "message_delta", T0 + timedelta(seconds=5), {"text": "a"}),
                     (2, "run_started", T0 + timedelta(seconds=70), {"attempt": 1}),
                     (3, "tool_started", T0 + timedelta(seconds=142.25), {"name": "calculator"})])
    assert attempt_offsets(rows, start=T0) == ["+5.00 s", "+0.00 s", "+1 min 12.2 s"]
    assert attempt_offsets(rows, start=T0 + timedelta(seconds=9)) == ["+0.00 s", "+0.00 s", "+1 min 12.2 s"]
