"""Real transcripts (tau-bench, pi-mono) through the projector, the adapters and CTX-10."""

from __future__ import annotations

import copy
from collections import Counter

import pytest
from corpus import load_pi, load_tau, pi_records, tau_records, user_texts

from context import build_request_body, project_records, validate_request
from context.records import EMPTY_RESULT_TEXT, UNKNOWN_OUTCOME_TEXT

DIALECTS = ("openai", "anthropic", "deepseek")


def _text_of(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content)
    return content or ""


def _assert_user_messages_kept(records: list[dict], messages: list[dict]) -> None:
    """Every real user text appears, in order, inside the user messages sent."""
    sent = "\x00".join(_text_of(m) for m in messages if m["role"] == "user")
    position = 0
    for question in user_texts(records):
        found = sent.find(question, position)
        assert found >= 0, question[:80]
        position = found + len(question)


def _check_everywhere(system: str, records: list[dict]) -> list[dict]:
    projected = project_records(records)
    request = ([{"role": "system", "content": system}] if system else []) + projected
    for dialect in DIALECTS:
        body = build_request_body(request, dialect=dialect, model="m", max_output_tokens=1024)
        assert validate_request(body, dialect) == [], dialect
        _assert_user_messages_kept(records, body["messages"])
    return projected


@pytest.fixture(scope="module")
def tau(corpus_dir):
    return load_tau(corpus_dir)


def test_ctx10_all_200_tau_bench_conversations_project_to_valid_requests_in_every_mode(tau) -> None:
    assert len(tau) == 200
    for conversation in tau:
        system, records = tau_records(conversation["traj"])
        before = copy.deepcopy(records)
        projected = _check_everywhere(system, records)
        assert records == before
        # Every call there was answered at once, so every stored result is in the view.
        assert sum(m["role"] == "tool" for m in projected) == sum(r["kind"] == "tool_result" for r in records)
        ids = [c["id"] for m in projected for c in m.get("tool_calls", [])]
        assert len(ids) == len(set(ids))


def test_ctx5_tau_bench_conversations_that_reuse_call_ids_keep_each_result_with_its_call(tau) -> None:
    reusing = 0
    for conversation in tau:
        system, records = tau_records(conversation["traj"])
        raw = Counter(c["id"] for r in records if r["kind"] == "assistant"
                      for c in r["message"].get("tool_calls") or [])
        if not any(n > 1 for n in raw.values()):
            continue
        reusing += 1
        projected = project_records(records)
        results = [r["message"]["content"] or EMPTY_RESULT_TEXT for r in records if r["kind"] == "tool_result"]
        assert [m["content"] for m in projected if m["role"] == "tool"] == results
    assert reusing == 49


@pytest.fixture(scope="module")
def pi(corpus_dir):
    return pi_records(load_pi(corpus_dir))


def test_ctx10_the_pi_session_projects_to_valid_requests_in_every_mode(pi) -> None:
    projected = _check_everywhere("You are a coding agent.", pi)
    assert sum(r["kind"] == "user" for r in pi) == 88
    # Aborted turns were cut streams: their unanswered calls were never run and are gone.
    assert UNKNOWN_OUTCOME_TEXT not in [m.get("content") for m in projected]
    answered = {r["message"]["tool_call_id"] for r in pi if r["kind"] == "tool_result"}
    stored = sum(1 for r in pi if r["kind"] == "tool_result")
    assert len(answered) == stored == sum(m["role"] == "tool" for m in projected)


def test_ctx3_the_pi_session_read_as_complete_responses_gets_unknown_placeholders(pi) -> None:
    """If the aborted responses had been complete, their 18 unanswered calls would be
    closed-run calls with unknown outcome: still visible, never given an outcome."""
    complete = copy.deepcopy(pi)
    for record in complete:
        if record["kind"] == "assistant":
            record["message"]["partial"] = False
    projected = project_records(complete)
    assert sum(m.get("content") == UNKNOWN_OUTCOME_TEXT for m in projected) == 18
    for dialect in DIALECTS:
        body = build_request_body(projected, dialect=dialect, model="m", max_output_tokens=1024)
        assert validate_request(body, dialect) == []


def test_ctx1_the_pi_sessions_metadata_never_reaches_the_model(pi) -> None:
    projected = project_records(pi)
    kinds = Counter(r["kind"] for r in pi)
    assert kinds["model_change"] == 1 and kinds["extension_state"] == 103
    text = repr(projected)
    assert "thinking_level" not in text and "'anthropic'" not in text
