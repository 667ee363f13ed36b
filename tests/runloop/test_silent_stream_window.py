"""A run over llama-cpp-python's server learns its window from a silent stream (LOOP-3, CAT-3).

The server publishes no window, so the connection holds what discovery offers then (the
platform default, 32,768) while the server keeps 2,048. Streamed, a prompt over its window
gets ``200``, a ``: ping`` comment and a cut connection (``tests.fakes.servers``). The run
asks that request once more without streaming, reads the ``context_length_exceeded``
refusal with its figures, learns the window, compacts and answers — instead of counting
cut connections until its attempts run out.
"""
from __future__ import annotations

import pytest

from models_catalog.discovery import PLATFORM_DEFAULT_CONTEXT_WINDOW
from models_catalog.models import ModelConnection
from runloop.loop import run_execute
from sessions.models import CompactionSnapshot, ModelCall, Run
from sessions.services.questions import question_ask
from tests.fakes.servers import LlamaCppPythonServer
from tests.fakes.windowed import LONG_QUESTION, long_answer

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = LONG_QUESTION
_answer = long_answer


@pytest.mark.parametrize("ending", ["cut", "clean"])
def test_loop3_cat3_a_run_over_llama_cpp_python_learns_its_window_from_a_silent_stream_and_answers(
        fake_session, fake, ending):
    server = LlamaCppPythonServer(window=2_048, ending=ending, answer=_answer)
    fake.handler = server
    session = fake_session(tools=(), provider="openai_compatible", model=server.model,
                           window=PLATFORM_DEFAULT_CONTEXT_WINDOW)
    connection = session.version.model_connection
    # What an admin keeps for a small local model: a short answer reserve and margin.
    ModelConnection.objects.filter(pk=connection.pk).update(max_output_tokens=256, safety_margin_tokens=128)
    type(session.version).objects.filter(pk=session.version.pk).update(max_output_tokens=256,
                                                                       safety_margin_tokens=128)
    session.version.refresh_from_db()

    runs = []
    for n in range(1, 13):
        run = question_ask(session=session, content=QUESTION.format(n=n))
        run_execute(run_id=run.pk)
        run.refresh_from_db()
        runs.append(run)

    assert [run.status for run in runs] == [Run.Status.COMPLETED] * 12, [run.error for run in runs]
    connection.refresh_from_db()
    assert connection.learned_context_window == 2_048
    assert connection.context_window == PLATFORM_DEFAULT_CONTEXT_WINDOW  # the admin's figure is kept beside it
    assert connection.learned_window_note.startswith("provider_refusal")
    # Learned from the plain refusal, once: the streamed request and its plain ask, then never again.
    assert server.refused[:2] == [(True, server.refused[0][1]), (False, server.refused[0][1])]
    assert len(server.refused) == 2, server.refused
    refused_run = ModelCall.objects.get(outcome="context_overflow").run
    assert refused_run.model_calls.filter(purpose="compaction", outcome="ok").exists()
    assert refused_run.model_calls.filter(purpose="action", outcome="ok").exists()
    assert CompactionSnapshot.objects.filter(instance__run__session=session).exists()
    assert max(server.accepted) < 2_048
