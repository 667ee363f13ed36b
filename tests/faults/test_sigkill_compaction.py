"""SIGKILL during a compaction (CTX-38, RUN-10): resume completes, nothing is duplicated,
and no snapshot or view is ever replaced by a half-made one."""
from __future__ import annotations

import pytest

from context.compaction import SECTION_TITLES
from sessions.models import CompactionSnapshot, SessionMessage, SessionView
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream
from tests.fakes.summaries import is_summary
from tests.faults.support import assert_appended, ledger
from tests.faults.test_sigkill import Provider, _kill_and_resume

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]

LONG = "Keep this in mind: " + "the quarterly figures show steady growth across all regions. " * 60
SUMMARY = "<summary>\n" + "\n".join(f"{n}. {SECTION_TITLES[n - 1]}: the earlier questions, briefly."
                                    for n in range(1, 10)) + \
          "\n</summary>"


class CompactingProvider(Provider):
    """Summarizes when asked; otherwise behaves like the kill tests' provider."""

    def __init__(self) -> None:
        super().__init__(chat_stream(["Answer before the kill."]))
        self.summaries = 0

    def __call__(self, request):
        if is_summary(request.json["messages"]):
            self.summaries += 1
            return chat_stream([SUMMARY], delay=0.05)
        return super().__call__(request)


def _session_due_for_compaction(session_with_history, strict):
    """Two earlier questions, the second long; a policy whose user-turn trigger fires on the third."""
    from runloop.loop import run_execute

    # A low target: the long second question cannot be kept verbatim, so it is summarized.
    session = session_with_history(tools=(), context_policy={"user_turns": 3, "target_ratio": 0.05})
    strict.handler = lambda request: chat_stream(["Long answer noted."])
    run = question_ask(session=session, content=f"Second question. {LONG}")
    run_execute(run_id=run.pk)
    assert not CompactionSnapshot.objects.exists()
    return session


@pytest.mark.parametrize("kill_at", ["compaction_started", "compaction_progress"])
def test_a_worker_killed_during_a_compaction_resumes_and_commits_it_once(session_with_history, strict, private_redis,
                                                                       tmp_path, kill_at):
    session = _session_due_for_compaction(session_with_history, strict)
    before = ledger(session)
    views_before = list(SessionView.objects.filter(session=session).values_list("pk", "watermark"))
    provider = CompactingProvider()
    run = _kill_and_resume(session, strict, private_redis, tmp_path, provider, kill_at=kill_at)
    # Exactly one compaction committed, by the resumed attempt; nothing half-made before it.
    snapshots = list(CompactionSnapshot.objects.filter(instance__run=run))
    assert len(snapshots) == 1 and snapshots[0].revision == 1
    assert snapshots[0].metrics["trigger"] == "user_turns"
    assert SessionMessage.objects.filter(run=run, kind="compaction_summary").count() == 1
    views_after = list(SessionView.objects.filter(session=session).values_list("pk", "watermark"))
    assert views_after[:len(views_before)] == views_before  # earlier views untouched
    appended = [(kind, key) for _, kind, key in ledger(session)[len(before):]]
    assert appended[:2] == [("user", "question"), ("run_status", "status-0")]
    assert appended[2] == ("run_status", "resumed-1")  # the resumed attempt reopens the run (RUN-6)
    assert [kind for kind, _ in appended[3:]] == ["compaction_summary", "assistant", "run_status"]
    assert_appended(session, before, appended)  # gap-free, nothing twice
