"""Token accounting that holds for every model (CTX-24, CTX-25, CAT-3), end to end.

The model servers here count tokens their own way (``tests/fakes/windowed.py``: a quarter
of the request's JSON) and refuse what does not fit the way real servers do. The agents
use a model id no tokenizer table knows, as Ollama, vLLM and llama.cpp users have.
"""
from __future__ import annotations

import sys

import pytest

from context import calibrated, estimators
from models_catalog.models import ModelConnection, TokenCalibration
from runloop.loop import run_execute
from sessions.models import CompactionSnapshot, ModelCall, Run
from sessions.services.questions import question_ask
from tests.conftest import SHARED
from tests.fakes.windowed import WindowedServer

pytestmark = pytest.mark.django_db(transaction=True)

LOCAL = {"tools": (), "provider": "openai_compatible", "model": "local-llama-3.1-8b-q4"}
QUESTION = ("Question {n}. Please explain in detail, with examples, how the quarterly figures moved "
            "across every region, and what that means for next year. ") * 3


def _local_session(fake_session, *, window: int, output: int = 500, policy: dict | None = None,
                   model: str = LOCAL["model"]):
    session = fake_session(**{**LOCAL, "model": model}, window=window, context_policy=policy)
    connection = session.version.model_connection
    # What an admin enters for a small local model: the output reserve, the margin left blank.
    ModelConnection.objects.filter(pk=connection.pk).update(max_output_tokens=output, safety_margin_tokens=window // 32)
    type(session.version).objects.filter(pk=session.version.pk).update(max_output_tokens=output,
                                                                       safety_margin_tokens=window // 32)
    session.version.refresh_from_db()
    return session


def _ask_all(session, count: int) -> list[Run]:
    runs = []
    for n in range(1, count + 1):
        run = question_ask(session=session, content=QUESTION.format(n=n))
        run_execute(run_id=run.pk)
        run.refresh_from_db()
        runs.append(run)
    return runs


@pytest.fixture(params=["vocabulary-beside-the-repo", "nothing-beside-the-repo", "tiktoken-unavailable"])
def tokenizer_setting(request, monkeypatch, tmp_path):
    """The estimator must be close with tiktoken's files beside the repository or not —
    and even without tiktoken at all (the bytes-v1 fallback, calibrated)."""
    monkeypatch.setattr(estimators, "_encodings", {})
    if request.param == "vocabulary-beside-the-repo":
        if not (SHARED / "tiktoken").is_dir():
            pytest.skip("no tiktoken folder beside the repository here")
        monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(SHARED / "tiktoken"))
    elif request.param == "nothing-beside-the-repo":
        monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    else:
        monkeypatch.setitem(sys.modules, "tiktoken", None)  # `import tiktoken` fails
    return request.param


def test_ctx25_an_unknown_model_answers_six_long_questions_compacting_and_uses_its_window(
        fake_session, fake, tokenizer_setting):
    server = WindowedServer(window=4_000)
    fake.handler = server
    session = _local_session(fake_session, window=4_000)
    runs = _ask_all(session, 6)
    assert [run.status for run in runs] == [Run.Status.COMPLETED] * 6, [run.error for run in runs]
    assert server.refused == []
    snapshot = CompactionSnapshot.objects.filter(instance__run__session=session).order_by("id").first()
    assert snapshot is not None
    metrics = snapshot.metrics  # CTX-41: both figures, each under its own name, with the ratio used
    ratio = metrics["calibration_ratio"]
    assert metrics["tokens_before_calibrated"] == calibrated(metrics["tokens_before_estimated"], ratio)
    assert metrics["tokens_after_calibrated"] == calibrated(metrics["tokens_after_estimated"], ratio)
    assert metrics["tokens_after_estimated"] < metrics["tokens_before_estimated"]
    effective_input = 4_000 - 500 - 4_000 // 32
    assert server.largest_before_first_summary() >= 0.6 * effective_input, server.accepted
    expected = "bytes-v1" if tokenizer_setting == "tiktoken-unavailable" else "dense-o200k-v1"
    assert set(ModelCall.objects.values_list("estimator_id", flat=True)) == {expected}
    # A new session of the same connection starts calibrated, not from nothing.
    calibration = TokenCalibration.objects.get(connection=session.version.model_connection)
    assert calibration.samples >= 6 and calibration.ratios


def test_ctx25_a_provider_that_sends_no_usage_still_gets_compaction_in_time(fake_session, fake):
    server = WindowedServer(window=4_000, usage=False)
    fake.handler = server
    session = _local_session(fake_session, window=4_000)
    runs = _ask_all(session, 6)
    assert [run.status for run in runs] == [Run.Status.COMPLETED] * 6, [run.error for run in runs]
    assert server.refused == []  # the proxy's safety factor kept every request inside the window
    assert CompactionSnapshot.objects.filter(instance__run__session=session).exists()
    assert not TokenCalibration.objects.exists()


def test_cat3_a_refusal_below_the_configured_window_lowers_it_compacts_and_retries_once(fake_session, fake):
    server = WindowedServer(window=3_000)  # the server keeps 3,000; the admin entered 4,000
    fake.handler = server
    session = _local_session(fake_session, window=4_000, policy={"context_ratio": 0.95, "target_ratio": 0.5})
    runs = _ask_all(session, 6)
    assert [run.status for run in runs] == [Run.Status.COMPLETED] * 6, [run.error for run in runs]
    assert len(server.refused) == 1  # learned once, never refused again
    connection = ModelConnection.objects.get(pk=session.version.model_connection_id)
    assert connection.learned_context_window == 3_000 and connection.context_window == 4_000
    assert connection.learned_window_note.startswith("provider_refusal")
    refused_run = ModelCall.objects.get(outcome="context_overflow").run
    assert refused_run.model_calls.filter(purpose="compaction", outcome="ok").exists()
    assert refused_run.model_calls.filter(purpose="action", outcome="ok").exists()


def test_cat3_a_llamacpp_server_that_answers_an_oversized_stream_with_an_empty_200_teaches_its_window(
        fake_session, fake):
    server = WindowedServer(window=2_048, refusal="llamacpp", usage=False)  # the admin entered 4,096
    fake.handler = server
    session = _local_session(fake_session, window=4_096, output=256)
    runs = _ask_all(session, 5)
    assert [run.status for run in runs] == [Run.Status.COMPLETED] * 5, [run.error for run in runs]
    connection = ModelConnection.objects.get(pk=session.version.model_connection_id)
    assert connection.learned_context_window == 2_048
    # The empty stream was asked again without streaming: that is how the window was learned.
    unstreamed = [r for r in fake.requests if r.json and r.json.get("stream") is False]
    assert len(unstreamed) == 1


def test_cat3_a_server_that_keeps_refusing_after_compaction_fails_the_run_without_looping(fake_session, fake):
    server = WindowedServer(window=4_000)
    fake.handler = server
    session = _local_session(fake_session, window=4_000)
    _ask_all(session, 1)
    server.window = 300  # now nothing fits: refusal, compaction, refusal again
    run = _ask_all(session, 1)[0]
    assert run.status == Run.Status.FAILED and run.error["code"] == "context_window"
    assert len(server.refused) <= 2


QUESTION_6000 = ("Please compare the two quarterly reports line by line and tell me what changed. " * 75)[:6_000]


def test_ctx25_without_tiktoken_an_ollama_model_with_a_4000_token_window_answers_a_6000_character_question(
        fake_session, fake, monkeypatch):
    # Only bytes-v1 is left: at a prior of 1.0 its fourfold over-count put this question
    # over the hard limit, nothing was sent, and no provider count could ever correct it.
    monkeypatch.setattr(estimators, "_encodings", {})
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    server = WindowedServer(window=4_000)
    fake.handler = server
    session = _local_session(fake_session, window=4_000, model="llama3.1:8b-instruct-q4_K_M")
    first = question_ask(session=session, content=QUESTION_6000)
    run_execute(run_id=first.pk)
    first.refresh_from_db()
    assert first.status == Run.Status.COMPLETED, first.error
    assert server.refused == [] and [purpose for purpose, _ in server.accepted] == ["action"]
    call = ModelCall.objects.get(run=first)
    assert call.estimator_id == "bytes-v1" and call.estimated_tokens > 4_000  # the raw byte count
    # The provider's count now stands in for the prior: the next question is judged by it.
    calibration = TokenCalibration.objects.get(connection_id=session.version.model_connection_id)
    assert calibration.ratios == [server.accepted[0][1] / call.estimated_tokens]
    second = question_ask(session=session, content="And in one sentence?")
    run_execute(run_id=second.pk)
    second.refresh_from_db()
    assert second.status == Run.Status.COMPLETED, second.error
    assert server.refused == []
