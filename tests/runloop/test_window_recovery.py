"""CAT-9: a window the server proved applies to every version and run of its connection,
with the margin and output reserve nobody set recomputed for it; a session that failed on
an unknown window recovers with Resume or its next question; Compact now fits the window
that refused. The server is the strict fake of llama-cpp-python's (``tests.fakes.servers``:
it publishes no window, counts its own tokens and refuses at its ``n_ctx``).
"""
from __future__ import annotations

import pytest

from models_catalog.discovery import PLATFORM_DEFAULT_CONTEXT_WINDOW
from models_catalog.models import PLATFORM_DEFAULT_MAX_OUTPUT_TOKENS, ModelConnection
from runloop.compaction_manual import compaction_manual
from runloop.loop import run_execute
from sessions.models import CompactionSnapshot, Run
from sessions.run_errors import window_refused
from sessions.services.manual_compaction import compaction_request
from sessions.services.questions import question_ask
from sessions.services.run_controls import run_resume
from tests.fakes.servers import LlamaCppPythonServer
from tests.fakes.windowed import LONG_QUESTION, long_answer

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = LONG_QUESTION
_answer = long_answer


def _newcomers_session(fake_session, server):
    """What Discover → accept gives a newcomer: the platform's figures, nothing set by hand
    (32,768 window, 4,096 output reserve, 1,024 margin), over a server that keeps 2,048."""
    session = fake_session(tools=(), provider="openai_compatible", model=server.model,
                           window=PLATFORM_DEFAULT_CONTEXT_WINDOW)
    connection = session.version.model_connection
    ModelConnection.objects.filter(pk=connection.pk).update(max_output_tokens=PLATFORM_DEFAULT_MAX_OUTPUT_TOKENS)
    type(session.version).objects.filter(pk=session.version.pk).update(
        max_output_tokens=PLATFORM_DEFAULT_MAX_OUTPUT_TOKENS)
    session.version.refresh_from_db()
    return session, connection


def _ask(session, n):
    run = question_ask(session=session, content=QUESTION.format(n=n))
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


@pytest.mark.parametrize("dialect", ["openai"])
def test_cat9_the_newcomers_long_chat_on_a_2048_server_compacts_and_goes_on(fake_session, fake, dialect):
    """The issue's item 3: the 32k default's margin (1,024) and output reserve (4,096) kept
    under a learned 2,048 window left no input; the run ended ``context_window``."""
    server = LlamaCppPythonServer(window=2_048, answer=_answer)
    fake.handler = server
    session, connection = _newcomers_session(fake_session, server)

    runs = [_ask(session, n) for n in range(1, 11)]

    assert [run.status for run in runs] == [Run.Status.COMPLETED] * 10, [run.error for run in runs]
    connection.refresh_from_db()
    assert connection.learned_context_window == 2_048
    # The admin's figures stay as they were; the runs used what the window leaves.
    assert (connection.max_output_tokens, connection.safety_margin_tokens) == (4_096, 1_024)
    assert CompactionSnapshot.objects.filter(instance__run__session=session).exists()
    assert max(server.accepted) < 2_048


def _stuck_session(fake_session, fake, server):
    """A session as today's code left it: a chat grown long on the server's window, its
    connection having learned 2,048 from a refusal, its last run failed saying only an
    admin can fix it (not resumable)."""
    fake.handler = LlamaCppPythonServer(window=PLATFORM_DEFAULT_CONTEXT_WINDOW, answer=_answer, model=server.model)
    session, connection = _newcomers_session(fake_session, server)
    for n in range(1, 5):
        assert _ask(session, n).status == Run.Status.COMPLETED
    fake.handler = server
    run = question_ask(session=session, content=QUESTION.format(n=5))
    error = window_refused(connection=connection.name, server_window=2_048, output_limit=4_096, safety_margin=1_024,
                           after_summary=False)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED, error=error.to_dict())
    ModelConnection.objects.filter(pk=connection.pk).update(learned_context_window=2_048,
                                                            learned_window_note="provider_refusal: refused")
    run.refresh_from_db()
    return session, run


@pytest.mark.parametrize("dialect", ["openai"])
def test_cat9_a_session_stuck_on_the_window_answers_after_resume(fake_session, fake, dialect):
    server = LlamaCppPythonServer(window=2_048, answer=_answer)
    session, run = _stuck_session(fake_session, fake, server)
    assert run.error["retryable"] is False

    run_resume(run=run)  # was 409 not_resumable: "a reason a resume cannot fix"
    run_execute(run_id=run.pk)
    run.refresh_from_db()

    assert run.status == Run.Status.COMPLETED, run.error
    assert run.model_calls.filter(purpose="compaction", outcome="ok").exists()
    assert max(server.accepted) < 2_048


@pytest.mark.parametrize("dialect", ["openai"])
def test_cat9_a_session_stuck_on_the_window_answers_its_next_question(fake_session, fake, dialect):
    server = LlamaCppPythonServer(window=2_048, answer=_answer)
    session, _ = _stuck_session(fake_session, fake, server)

    run = _ask(session, 6)  # was "could not start on our side": 2,048 - 4,096 - 1,024 leaves no input

    assert run.status == Run.Status.COMPLETED, run.error
    assert max(server.accepted) < 2_048


@pytest.mark.parametrize("dialect", ["openai"])
def test_cat9_compact_now_after_a_refusal_fits_the_window_that_refused(fake_session, fake, dialect):
    server = LlamaCppPythonServer(window=2_048, answer=_answer)
    session, run = _stuck_session(fake_session, fake, server)

    outcome, compacting = compaction_request(session=session)
    assert outcome == "queued"
    assert compaction_manual(run_id=compacting.pk) == "compacted"  # was "failed": no budget in the window

    snapshot = CompactionSnapshot.objects.filter(instance__run__session=session).latest("id")
    assert snapshot is not None
    assert max(server.accepted) < 2_048
    # The next question starts from the summary and fits at once: no refusal on the way.
    refused_before = len(server.refused)
    assert _ask(session, 6).status == Run.Status.COMPLETED
    assert len(server.refused) == refused_before
