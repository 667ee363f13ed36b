"""CTX-41 in the worker, against the strict fake provider: every compaction's summary is
traced to the records it replaced through the compactions before it (stored with each
snapshot and read back from the snapshot or the reusable view the next run starts from),
and every event says what its token figures are."""
from __future__ import annotations

import pytest

from sessions.models import CompactionSnapshot, PreparedCompaction, Run, RunEvent, SessionMessage
from sessions.services.dispatch import preparation_dispatcher_set
from tests.fakes.fake_provider import chat_stream
from tests.fakes.responses import error
from tests.runloop.figures import figures_named
from tests.runloop.preparing import Preparations, ready
from tests.runloop.test_compaction import LONG, SMALL, VERY_LONG, Provider, ask, is_summary_request
from tests.runloop.worker import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

CHAT_KINDS = ("user", "assistant", "tool_result")


def seqs(ranges) -> list[int]:
    return [seq for first, last in ranges for seq in range(first, last + 1)]


def compacting_session(fake_session, strict, questions: int = 8):
    strict.handler = Provider()
    session = fake_session(**SMALL)
    for number in range(1, questions + 1):
        run = ask(session, f"Question {number}. {VERY_LONG}")
        assert run.status == Run.Status.COMPLETED, (number, run.error)
    return session


def test_ctx41_each_summary_is_traced_through_the_earlier_compactions_to_its_records(fake_session, strict):
    session = compacting_session(fake_session, strict)
    snapshots = list(CompactionSnapshot.objects.filter(instance__run__session=session, instance__parent__isnull=True)
                     .order_by("id"))
    assert len(snapshots) >= 2  # each question a run: the later ones start from the view the earlier saved
    chat = list(SessionMessage.objects.filter(session=session, in_main=True, kind__in=CHAT_KINDS)
                .order_by("seq").values_list("seq", flat=True))
    for snapshot in snapshots:
        metrics = snapshot.metrics
        traces = metrics["view_traces"]
        assert len(traces) == len(snapshot.messages)
        # Every message of the view stands for its records, each record once: together,
        # every message record the snapshot covers -- what came through earlier ones too.
        assert sorted(seq for trace in traces for seq in seqs(trace)) == [s for s in chat if s <= snapshot.covered_seq]
        # The summary (first) stands for exactly what its segments consumed.
        assert seqs(traces[0]) == seqs(metrics["covered_ranges"]) == sorted(
            seq for segment in metrics["segments"] for seq in seqs(segment["ranges"]))
    for earlier, later in zip(snapshots, snapshots[1:]):
        # A later summary replaced the earlier one, and with it what the earlier replaced
        # (it used to report only the records read since the earlier checkpoint).
        assert set(seqs(earlier.metrics["covered_ranges"])) < set(seqs(later.metrics["covered_ranges"]))
    assert strict.rejections == []


def test_ctx41_every_event_names_its_token_figures(fake_session, strict):
    compacted = compacting_session(fake_session, strict, questions=7)
    # A session whose summaries keep failing, then backs off (CTX-44).
    state = {"summaries": 0}

    def failing(request):
        if is_summary_request(request):
            state["summaries"] += 1  # the provider cannot summarize: no reply, no code summary (CTX-48)
            return error(401, "invalid key", type="authentication_error")
        messages = request.json["messages"]
        questions = [m for m in messages if m["role"] == "user" and m["content"].startswith("Question")]
        steps = sum(1 for m in messages if m["role"] == "tool")
        if questions[-1]["content"].startswith("Question 2") and steps < 4:
            return chat_stream(tool_calls=[{"id": f"c{steps}", "name": "calculator",
                                            "arguments": '{"expression": "1+1"}'}])
        return chat_stream(["Done."])

    strict.handler = failing
    failed = fake_session(**{**SMALL, "tools": ("calculator",)})
    ask(failed, f"Question 1. {LONG * 12}")
    ask(failed, f"Question 2. {LONG * 9}")
    assert state["summaries"] == 1
    events = RunEvent.objects.filter(run__session__in=[compacted, failed]).order_by("id")
    assert {e.payload["reason"] for e in events if e.type == "compaction_skipped"} == {"throttled_after_failure"}
    # compaction_started and compaction_skipped used to carry a bare "tokens".
    assert figures_named(events, carrying=("compaction_started", "compacted", "compaction_skipped",
                                           "compaction_failed")) == {}
    started = next(e.payload for e in events if e.type == "compaction_started")
    assert started["tokens_before_estimated"] > 0 and started["tokens_before_calibrated"] > 0
    assert any(e.type == "context_measured" for e in events)  # the meter's figure, labelled by measured_by
    assert strict.rejections == []


@pytest.fixture
def preparations():
    """Queued preparations (CTX-45) run in worker threads while the test goes on."""
    runner = Preparations()
    preparation_dispatcher_set(runner)
    yield runner
    runner.wait()


def test_ctx41_a_summary_prepared_while_its_run_works_says_what_its_figures_are(fake_session, strict,
                                                                                 preparations):
    provider = Provider()

    def answer_once_prepared(request):
        # A run that asked for a summary waits for it before its answer: the summary is
        # ready while the run still works, so the run hears of it (compaction_prepared).
        if not is_summary_request(request) and PreparedCompaction.objects.filter(session=session).exists():
            wait_for(lambda: ready(session) is not None, timeout=60)
        return provider(request)

    strict.handler = answer_once_prepared
    session = fake_session(**SMALL)
    for number in range(1, 13):
        ask(session, f"Question {number}. {LONG}")
        preparations.wait()
        if ready(session) is not None:
            break
    events = RunEvent.objects.filter(run__session=session).order_by("id")
    assert figures_named(events, carrying=("compaction_preparing", "compaction_prepared")) == {}
    prepared = next(e.payload for e in events if e.type == "compaction_prepared")
    assert prepared["tokens_after_calibrated"] > 0 and prepared["tokens_after_estimated"] > 0
    assert strict.rejections == []
