"""RUN-4: what a run froze is read back whole and typed (``sessions.frames.run_budget``)."""
from __future__ import annotations

from sessions.frames import run_budget
from sessions.services.questions import question_ask


def test_run4_a_run_reads_back_what_it_froze_even_after_its_agent_changed(make_session, alice):
    session = make_session(alice)
    run = question_ask(session=session, content="How long may the answer be?")
    frozen = run_budget(run.budget, version=run.version)
    version = run.version
    version.max_output_tokens, version.context_window = 17, 999_999  # changed later: never moves the run
    assert run_budget(run.budget, version=version) == frozen
    assert frozen["max_output_tokens"] != 17 and set(frozen) == {
        "provider", "model", "context_window", "max_output_tokens", "safety_margin_tokens", "context_policy", "limits"}


def test_run4_a_row_frozen_before_a_field_existed_reads_that_field_from_its_version(make_session, alice):
    run = question_ask(session=make_session(alice), content="And now?")
    old = {"model": "frozen-model", "limits": {"max_model_calls": 3, "max_tool_calls": True, "max_depth": "2"}}
    read = run_budget(old, version=run.version)
    assert read["model"] == "frozen-model" and read["provider"] == run.version.provider
    assert read["context_window"] == run.version.context_window and read["context_policy"] is None
    assert read["limits"] == {"max_model_calls": 3}  # a flag or a text is no limit
