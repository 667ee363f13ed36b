"""CAT-10: a server that truncates instead of refusing (Ollama's OpenAI endpoint) is caught
by its own figures: the answer is marked ``truncated_prompt``, the window learned, the
conversation compacted and the question asked once more; the chat is told. The server is
the fake of Ollama (``tests.fakes.ollama_chat``: Ollama cannot run here)."""
from __future__ import annotations

import pytest

from models_catalog.discovery import PLATFORM_DEFAULT_CONTEXT_WINDOW
from runloop.loop import run_execute
from sessions.models import CompactionSnapshot, ModelCall, Run, RunEvent, SessionMessage
from sessions.services.questions import question_ask
from tests.fakes.ollama_chat import OllamaChatServer
from tests.fakes.windowed import LONG_QUESTION, long_answer

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = LONG_QUESTION
_answer = long_answer


@pytest.mark.parametrize("dialect", ["openai"])
def test_cat10_ollamas_silent_truncation_is_caught_learned_compacted_and_asked_again(fake_session, fake, dialect):
    server = OllamaChatServer(num_ctx=2_048, answer=_answer)
    fake.handler = server
    session = fake_session(tools=(), provider="openai_compatible", model=server.model,
                           window=PLATFORM_DEFAULT_CONTEXT_WINDOW)
    connection = session.version.model_connection

    runs, cuts_by_run = [], {}
    for n in range(1, 13):
        run = question_ask(session=session, content=QUESTION.format(n=n))
        run_execute(run_id=run.pk)
        run.refresh_from_db()
        runs.append(run)
        cuts_by_run[run.pk] = len(server.truncated)

    assert [run.status for run in runs] == [Run.Status.COMPLETED] * 12, [run.error for run in runs]
    assert server.truncated, "the conversation never outgrew the server's context: the test proves nothing"
    cut = ModelCall.objects.filter(outcome="truncated_prompt")
    assert cut.count() == 1, list(ModelCall.objects.values_list("purpose", "outcome"))
    connection.refresh_from_db()
    assert connection.learned_context_window == 2_048
    assert connection.learned_window_note.startswith("truncated_prompt")
    cut_run = cut.get().run
    # Told in the chat, in words; then compacted and asked once more, and answered.
    told = RunEvent.objects.get(run=cut_run, type="prompt_truncated").payload
    assert "kept only 2,048 tokens" in told["message"] and told["reset"] is True
    assert cut_run.model_calls.filter(purpose="compaction", outcome="ok").exists()
    assert cut_run.model_calls.filter(purpose="action", outcome="ok").exists()
    assert CompactionSnapshot.objects.filter(instance__run=cut_run).exists()
    # The answer to the cut prompt is not kept: one answer per question.
    assert SessionMessage.objects.filter(run=cut_run, kind="assistant").count() == 1
    # After the window is learned, every prompt fits: no more truncation. (A cut of less
    # than a tenth, before it, is under what the server's figures can tell: CAT-10's rule.)
    assert len(server.truncated) == cuts_by_run[cut_run.pk], server.truncated
