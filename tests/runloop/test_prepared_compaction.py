"""CTX-45 (summaries prepared in the background) and CTX-46 (summaries that ride the cache),
end to end: the run loop, a worker thread preparing, the strict fake on a real socket.

Summaries here are slow (``SUMMARY_SECONDS`` per summary answer, as a long history's
are); questions are answered at once. A person who asks the next question after
reading an answer should never wait for a summary.
"""
from __future__ import annotations

import threading
import time

import pytest

from agents.services import agent_publish, agent_update
from context.compaction import SECTION_TITLES
from runloop.compaction_manual import compaction_manual
from runloop.loop import run_execute
from sessions.models import CompactionSnapshot, ModelCall, PreparedCompaction, Run, RunEvent, SessionMessage
from sessions.services.dispatch import preparation_dispatcher_set
from sessions.services.questions import question_ask
from sessions.services.run_controls import run_resume
from sessions.services.supplements import supplement_add
from tests.fakes.responses import chat_stream, error
from tests.fakes.summaries import is_summary, summary_input
from tests.runloop.figures import figures_named
from tests.runloop.preparing import Preparations, ready
from tests.runloop.worker import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")

# Long enough to tell an inline summary's stall from a prepared one's few writes, on a busy
# machine too (was 3 s: a fifth of the suite's CTX-45 time was this sleep).
SUMMARY_SECONDS = 1.5
LONG = "Please keep this detail in mind: " + "the quarterly figures show steady growth across regions. " * 7
SMALL = {"tools": (), "window": 4_000, "provider": "openai", "model": "gpt-4o-mini"}
ASKED = "Question"


class SlowSummaries:
    """Answers questions at once and summaries after ``SUMMARY_SECONDS``; a summary may
    also wait for ``gate`` (a test opens it when it has done what happens meanwhile)."""

    def __init__(self, *, empty: bool = False, down: bool = False) -> None:
        self.empty = empty  # a summarizer that answers nothing (CTX-35: a failed summary; CTX-48 writes one)
        self.down = down  # a provider that refuses every summary (no reply: the compaction fails)
        self.gate = threading.Event()
        self.gate.set()
        self.summaries_started = threading.Event()
        self.summary_requests = 0
        self.actions = 0
        self.on_action = None  # called with the request before an action answer

    def __call__(self, request):
        messages = request.json["messages"]
        if is_summary(messages):
            self.summary_requests += 1
            self.summaries_started.set()
            self.gate.wait(timeout=120)
            if self.empty:
                return chat_stream([])
            if self.down:
                return error(401, "invalid key", type="authentication_error")
            time.sleep(SUMMARY_SECONDS)  # the provider's own latency for a long summary
            asked = [part.split(".")[0] for part in summary_input(messages).split(ASKED + " ")[1:]]
            sections = [f"{n}. {SECTION_TITLES[n - 1]}: noted." for n in range(1, 10)]
            sections[5] = "6. All user messages: " + ", ".join(f"{ASKED} {q}" for q in dict.fromkeys(asked))
            return chat_stream(["<summary>\n" + "\n".join(sections) + "\n</summary>"])
        self.actions += 1
        if self.on_action is not None:
            self.on_action(request)
        return chat_stream([f"Noted, answer {self.actions}. " + "Growth is steady. " * 6])


@pytest.fixture
def preparations():
    """Queued preparations run in worker threads while the test goes on."""
    runner = Preparations()
    preparation_dispatcher_set(runner)
    yield runner
    runner.wait()


def ask(session, content: str) -> Run:
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    return run


def until_prepared(session, provider, preparations, *, start: int = 1) -> int:
    """Ask short questions, as a person reading each answer would, until a summary of
    the session is ready; returns the next question's number."""
    for number in range(start, start + 12):
        ask(session, f"{ASKED} {number}. {LONG}")
        preparations.wait()
        assert not CompactionSnapshot.objects.filter(instance__run__session=session).exists(), (
            "the trigger fired before any summary was prepared: the questions are too long for this window")
        if ready(session) is not None:
            return number + 1
    pytest.fail("the session never reached the prepare point")


def cached_share(calls) -> float:
    """CTX-46: the share of the summary calls' input the provider read from its cache."""
    usage = [c.usage for c in calls]
    read = sum(u["cache_read_input_tokens"] for u in usage)
    total = sum(u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"] for u in usage)
    return read / total


def compactions(session):
    return list(CompactionSnapshot.objects.filter(instance__run__session=session).order_by("id"))


def test_ctx45_a_compacting_run_commits_the_summary_made_while_the_person_read(fake_session, strict, fake,
                                                                                preparations, dialect):
    provider = SlowSummaries()
    strict.handler = provider
    session = fake_session(**SMALL)
    number = until_prepared(session, provider, preparations)
    prepared = ready(session)
    summaries_before = provider.summary_requests
    assert summaries_before >= 1

    # The next question crosses the trigger: the prepared summary is committed, no summary is asked for.
    run = ask(session, f"{ASKED} {number}. {LONG * 3}")
    assert provider.summary_requests == summaries_before
    [snapshot] = compactions(session)
    metrics = snapshot.metrics
    assert metrics["prepared"] is True and metrics["prepared_age_ms"] >= 0
    assert metrics["stall_ms"] < SUMMARY_SECONDS * 1000  # no summary call in it: a few writes
    assert metrics["tokens_after_calibrated"] < metrics["threshold"] and metrics["summary_calls"] >= 1
    assert metrics["covered"] and metrics["segments"]  # CTX-41: traceable to the records it replaced
    prepared.refresh_from_db()
    assert (prepared.status, prepared.reason, prepared.snapshot) == ("used", "committed", {})
    compacted = RunEvent.objects.get(run=run, type="compacted").payload
    assert compacted["prepared"] is True
    # What the model reads next: the continuation summary, then everything after the prefix, in order.
    last = [r.json for r in fake.requests if not is_summary(r.json["messages"])][-1]["messages"]
    assert any("This session is being continued" in str(m.get("content")) for m in last)
    asked = [int(str(m["content"]).split(".")[0].split()[-1]) for m in last
             if m["role"] == "user" and str(m.get("content")).startswith(ASKED)]
    assert asked == sorted(asked) and asked[-1] == number
    # The summary calls were made while the session was idle, under the run that asked, and logged.
    calls = ModelCall.objects.filter(run__session=session, purpose=ModelCall.Purpose.COMPACTION)
    assert calls.count() == metrics["summary_calls"] and all(c.finished_at < run.started_at for c in calls)
    if dialect == "anthropic":  # CTX-46: the summary request is the action request plus the instruction
        assert metrics["summary_form"].startswith("cached")
        assert cached_share(calls) >= 0.8, [c.usage for c in calls]
    assert strict.rejections == []


def test_ctx45_a_question_and_a_supplement_that_arrive_while_a_summary_is_prepared_are_kept_in_order(
        fake_session, strict, fake, preparations, dialect):
    provider = SlowSummaries()
    strict.handler = provider
    session = fake_session(tools=("calculator",), window=4_000, provider="openai", model="gpt-4o-mini")
    provider.gate.clear()  # summaries wait: everything below happens while one is being prepared
    number = 1
    while not PreparedCompaction.objects.filter(session=session).exists():
        ask(session, f"{ASKED} {number}. {LONG}")
        number += 1
        assert number < 14, "the session never reached the prepare point"
    wait_for(provider.summaries_started.is_set, timeout=60)

    # A question asked meanwhile; during its run, a supplement; the summary is released then.
    state = {"supplement": None}

    def meanwhile(request):
        if state["supplement"] is None:
            run = Run.objects.filter(session=session).order_by("-id").first()
            state["supplement"] = supplement_add(run=run, content="Also compare it with last year, please.")
            provider.gate.set()
            wait_for(lambda: ready(session) is not None, timeout=60)
    provider.on_action = meanwhile
    run = ask(session, f"{ASKED} {number}. {LONG * 3}")

    kinds = list(SessionMessage.objects.filter(run=run).order_by("seq").values_list("kind", flat=True))
    assert kinds[0] == "user" and "supplement" in kinds and kinds.index("supplement") > 0
    records = SessionMessage.objects.filter(session=session).order_by("seq")
    texts = [str(r.message.get("content")) for r in records if r.kind in ("user", "supplement")]
    assert texts[-2].startswith(f"{ASKED} {number}.") and texts[-1] == "Also compare it with last year, please."
    # The supplement was answered, and the summary committed onto the view as it had become.
    last = [r.json for r in fake.requests if not is_summary(r.json["messages"])][-1]["messages"]
    said = [str(m.get("content")) for m in last if m["role"] == "user"]
    assert any(s.startswith(f"{ASKED} {number}.") for s in said) and any("last year" in s for s in said)
    assert [i for i, s in enumerate(said) if s.startswith(f"{ASKED} {number}.")][0] < [
        i for i, s in enumerate(said) if "last year" in s][0]
    committed = [s.metrics for s in compactions(session)]
    assert committed and committed[-1]["prepared"] is True
    # The trigger fired while the summary was still being made: the request went as it was.
    deferred = [e.payload for e in RunEvent.objects.filter(run=run, type="compaction_skipped")]
    assert {"reason": "summary_being_prepared"}.items() <= deferred[0].items()
    # CTX-41: the figures of every event of it say what they are (no bare "tokens").
    assert figures_named(RunEvent.objects.filter(run__session=session), carrying=(
        "compaction_preparing", "compaction_skipped", "compacted")) == {}
    assert strict.rejections == []


def test_ctx45_a_summary_prepared_before_a_manual_compaction_is_discarded_never_half_applied(
        fake_session, strict, fake, preparations, dispatched_compactions):
    provider = SlowSummaries()
    strict.handler = provider
    session = fake_session(**SMALL)
    provider.gate.clear()
    number = 1
    while not PreparedCompaction.objects.filter(session=session).exists():
        ask(session, f"{ASKED} {number}. {LONG}")
        number += 1
        assert number < 14
    wait_for(provider.summaries_started.is_set, timeout=60)
    preparing = PreparedCompaction.objects.get(session=session)

    # A person compacts by hand meanwhile (CTX-43): that compaction is made now, inline.
    provider.gate.set()
    last_run = Run.objects.filter(session=session).order_by("-id").first()
    assert compaction_manual(run_id=last_run.pk) == "compacted"
    preparations.wait()
    preparing.refresh_from_db()
    assert (preparing.status, preparing.reason) == ("discarded", "view_changed")
    [manual] = compactions(session)
    assert manual.metrics["trigger"] == "manual" and manual.metrics["prepared"] is False

    # The next question builds on the manual compaction's view; the prepared summary is nowhere.
    ask(session, f"{ASKED} {number}. {LONG}")
    assert len(compactions(session)) == 1
    assert strict.rejections == []


def test_ctx45_a_resume_discards_the_prepared_summary_and_the_next_compaction_is_made_inline(
        fake_session, strict, fake, preparations, dispatched_preparations, settings):
    settings.AGENTLOOM_PROVIDER_ATTEMPTS = 1
    provider = SlowSummaries()
    strict.handler = provider
    session = fake_session(**SMALL)
    number = until_prepared(session, provider, preparations)
    prepared = ready(session)

    # A run fails on the provider's side and is resumed: the summary is not trusted for the view after it.
    strict.handler = lambda request: error(503, "The server is overloaded.", code="overloaded")
    failed = question_ask(session=session, content="A short one.")
    run_execute(run_id=failed.pk)
    failed.refresh_from_db()
    assert failed.status == Run.Status.FAILED and failed.error["retryable"] is True
    strict.handler = provider
    preparation_dispatcher_set(dispatched_preparations.append)  # from here on nothing is prepared
    run_resume(run=failed)
    prepared.refresh_from_db()
    assert (prepared.status, prepared.reason) == ("discarded", "resumed")
    run_execute(run_id=failed.pk)

    ask(session, f"{ASKED} {number}. {LONG * 3}")
    [snapshot] = compactions(session)
    assert snapshot.metrics["prepared"] is False and snapshot.metrics["stall_ms"] >= SUMMARY_SECONDS * 1000
    assert strict.rejections == []


def test_ctx45_a_summary_prepared_under_another_policy_is_discarded_and_the_view_stays_valid(
        fake_session, strict, fake, preparations, alice, dialect):
    provider = SlowSummaries()
    strict.handler = provider
    session = fake_session(**SMALL)
    number = until_prepared(session, provider, preparations)
    prepared = ready(session)

    # The agent is published again with another policy; the session moves to that version.
    agent = session.agent
    agent_update(agent=agent, data={"context_policy": {"context_ratio": 0.78, "target_ratio": 0.55}})
    session.version = agent_publish(agent=agent, published_by=alice)
    session.save(update_fields=["version"])

    ask(session, f"{ASKED} {number}. {LONG * 3}")
    prepared.refresh_from_db()
    assert (prepared.status, prepared.reason) == ("discarded", "policy_changed")
    [snapshot] = compactions(session)
    assert snapshot.metrics["prepared"] is False and snapshot.metrics["prepared_discarded"] == "policy_changed"
    assert strict.rejections == []  # CTX-10: every request after it was valid
    if dialect == "anthropic":  # CTX-46 inline too: the summary request reads the last request's prefix
        calls = ModelCall.objects.filter(run__session=session, purpose=ModelCall.Purpose.COMPACTION,
                                         created_at__gt=prepared.ended_at)
        assert snapshot.metrics["summary_form"].startswith("cached") and cached_share(calls) >= 0.8


def test_ctx45_a_failed_preparation_holds_the_next_one_back_like_a_failed_compaction(fake_session, strict,
                                                                                     preparations):
    provider = SlowSummaries(down=True)
    strict.handler = provider
    session = fake_session(**SMALL)
    number = 1
    while not PreparedCompaction.objects.filter(session=session).exists():
        ask(session, f"{ASKED} {number}. {LONG}")
        number += 1
        assert number < 14
    preparations.wait()
    failed = PreparedCompaction.objects.get(session=session)
    assert (failed.status, failed.reason) == ("failed", "summary_failed")
    # CTX-35: a deterministic error is not retried; CTX-48: no reply came, so code writes nothing.
    assert failed.metrics["summary_calls"] == 1 and provider.summary_requests == 1

    # CTX-44: the view has not grown by a tenth since: no new preparation, no summary paid for.
    ask(session, "A short one.")
    preparations.wait()
    assert PreparedCompaction.objects.filter(session=session).count() == 1
    assert provider.summary_requests == 1
    assert not CompactionSnapshot.objects.filter(instance__run__session=session).exists()
    assert strict.rejections == []
