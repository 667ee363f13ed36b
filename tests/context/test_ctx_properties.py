"""Properties over generated histories (Hypothesis): CTX-1, 2, 5, 9, 10, 11 at once.

The main property runs max_examples of the active profile: 200 by default, 500 under
HYPOTHESIS_PROFILE=ci.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from histories import build, histories
from hypothesis import given, settings
from hypothesis import strategies as st

from context import build_request_body, project_records, truncate_text, validate_request
from context.records import UNKNOWN_OUTCOME_TEXT

DIALECTS = ("openai", "anthropic", "deepseek")


def _text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content)
    return content or ""


def _users_in_order(messages: list[dict], texts: list[str]) -> bool:
    sent = "\x00".join(_text(m) for m in messages if m["role"] == "user")
    position = 0
    for words in texts:
        found = sent.find(words, position)
        if found < 0:
            return False
        position = found + len(words)
    return True


@given(events=histories())
def test_ctx10_any_history_projects_to_a_request_every_provider_accepts(events: list[Any]) -> None:
    history = build(events)
    before = copy.deepcopy(history.records)
    projected = project_records(history.records)

    assert history.records == before  # CTX-1
    dumped = json.dumps(projected, ensure_ascii=False)
    assert "META" not in dumped  # metadata, excluded commands and malformed checkpoints
    for message in projected:
        if message["role"] == "tool":
            assert "RES" in _text(message) or message["content"] == UNKNOWN_OUTCOME_TEXT, message
    kept = [words for seq, words in history.user_texts if seq > history.last_checkpoint]
    assert _users_in_order(projected, kept)

    if not projected:
        assert validate_request(projected) == [validate_request([])[0]]
        return
    projected_before = copy.deepcopy(projected)
    for dialect in DIALECTS:
        body = build_request_body(projected, dialect=dialect, model="m", max_output_tokens=64)
        assert validate_request(body, dialect) == []
        assert "META" not in json.dumps(body, ensure_ascii=False)
        assert _users_in_order(body["messages"], kept)
    # The adapters share parts with what they read and must never change them (CTX-1).
    assert projected == projected_before and history.records == before


@settings(max_examples=100)
@given(events=histories(), watermark_at=st.integers(0, 40))
def test_ctx9_a_start_view_made_from_a_prefix_still_projects_to_a_valid_request(events, watermark_at) -> None:
    history = build(events)
    cut = min(watermark_at, len(history.records))
    view = project_records(history.records[:cut], open_runs=())
    projected = project_records(history.records, start_view=view, start_watermark=cut)
    if projected:
        body = build_request_body(projected, dialect="anthropic", model="m", max_output_tokens=64)
        assert validate_request(body, "anthropic") == []


@settings(max_examples=200)
@given(text=st.text(min_size=0, max_size=3000), limit=st.integers(300, 2500), seq=st.integers(0, 10**6))
def test_ctx7_truncation_keeps_a_prefix_a_suffix_one_marker_and_the_limit(text: str, limit: int, seq: int) -> None:
    cut = truncate_text(text, limit, seq)
    if len(text) <= limit:
        assert cut == text
        return
    assert len(cut) <= limit
    head, marker, tail = cut.partition("\n\n[... truncated: ")
    assert marker and text.startswith(head) and text.endswith(tail.split(" ...]\n\n", 1)[1])
    assert truncate_text(cut, limit, seq) == cut
    assert truncate_text(cut, limit - 100, seq).count("[... truncated: ") == 1


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["role", "content", "tool_calls", "tool_call_id", "function", "id", "type", "text"]),
        inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300)
@given(messages=st.lists(_json, max_size=6), mode=st.sampled_from(["openai", "anthropic", "deepseek"]))
def test_ctx10_the_validator_reports_problems_and_never_crashes_on_garbage(messages, mode) -> None:
    problems = validate_request(messages, mode)
    assert all(isinstance(p.rule, str) and p.message for p in problems)
    roles = {"system", "developer", "user", "assistant", "tool"}
    garbage = not messages or any(not isinstance(m, dict) or not isinstance(m.get("role"), str)
                                  or m["role"] not in roles for m in messages)
    if garbage:  # an empty request, or anything that is not a chat message, is never valid
        assert problems, messages


_kinds = st.sampled_from(["user", "supplement", "assistant", "tool_result", "delegation_result", "command",
                          "compaction", "run_status", "label", 7, None])
_records = st.lists(st.fixed_dictionaries({
    "seq": st.one_of(st.integers(-2, 50), st.none(), st.text(max_size=2)),
    "run": st.one_of(st.sampled_from(["r1", "r2"]), st.none(), st.lists(st.integers(), max_size=1)),
    "instance": st.just("main"),
    "kind": _kinds,
    "message": _json,
}), max_size=12)


@settings(max_examples=300)
@given(records=_records)
def test_ctx1_garbage_records_never_crash_the_projector_and_still_project_validly(records) -> None:
    projected = project_records(records)
    if projected:
        for dialect in DIALECTS:
            body = build_request_body(projected, dialect=dialect, model="m", max_output_tokens=8)
            assert validate_request(body, dialect) == []
