"""CTX-52: the continuity benchmark's fact planting and fact detection (benchmarks/_continuity.py).

The benchmark itself is not a test (it reports shares and PASS/FAIL per goal); these check
only that what it counts is counted right: every kind is planted once where it says, a
fact is found wherever a request carries its marker and nowhere else, and the three
summarizers write what they are meant to.
"""
from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from context import project_records
from context.compaction import SECTION_TITLES, summarizer_input, summary_prompt

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "_continuity.py"
_spec = importlib.util.spec_from_file_location("continuity_harness", _PATH)
assert _spec is not None and _spec.loader is not None
harness = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = harness  # dataclasses look their module up there
_spec.loader.exec_module(harness)


def _session() -> object:
    s = harness.open_session("generated", "test", "You are a coding agent.", 7)
    harness.generated_steps(s, 3)
    return s


def test_ctx52_every_kind_is_planted_once_in_the_record_it_names():
    s = _session()
    assert sorted(f.kind for f in s.facts) == sorted(harness.KINDS)
    assert len({f.marker for f in s.facts}) == len(harness.KINDS)
    by_seq = {r["seq"]: r for r in s.records}
    for fact in s.facts:
        assert fact.marker in json.dumps(by_seq[fact.seq]["message"])
        others = [r for r in s.records if r["seq"] != fact.seq and fact.marker in json.dumps(r["message"])]
        assert others == [], fact  # one record holds it: its absence elsewhere is a loss
    goal = next(f for f in s.facts if f.kind == "goal")
    pin = next(f for f in s.facts if f.kind == "pin")
    assert goal.seq == 1 and s.pinned == {goal.seq, pin.seq}  # CTX-50: the first question pinned by default


def test_ctx52_the_unknown_call_has_no_result_and_its_run_ended():
    s = _session()
    fact = next(f for f in s.facts if f.kind == "unknown_call")
    call = next(r for r in s.records if r["seq"] == fact.seq)
    call_id = call["message"]["tool_calls"][0]["id"]
    assert not any(r["message"].get("tool_call_id") == call_id for r in s.records)
    assert any(r["kind"] == "user" and r["seq"] > fact.seq and r["run"] != call["run"] for r in s.records)
    # The projector gives it the unknown-outcome placeholder (CTX-3): the request stays valid.
    view = project_records(s.records, open_runs=set())
    unknown = [m for m in view if m["role"] == "tool" and str(m["content"]).startswith("[unknown outcome]")]
    assert len(unknown) == 1


def test_ctx52_an_uncompacted_view_carries_every_fact():
    s = _session()
    view = project_records(s.records, open_runs=set())
    found = harness.present(s.facts, [{"role": "system", "content": s.system}, *view])
    assert set(found.values()) == {"text"}, found


def test_ctx52_a_fact_is_found_in_content_and_in_call_arguments_whatever_the_case():
    fact = harness.Fact("artifact", "quartz-otter-3", 2)
    parts = [{"type": "text", "text": "see QUARTZ-OTTER-3"}]
    assert harness.present([fact], [{"role": "user", "content": parts}])[fact] == "text"
    assert harness.present([fact], [{"role": "assistant", "content": None, "tool_calls": [{
        "id": "c", "type": "function", "function": {"name": "http_fetch",
                                                     "arguments": '{"url": "https://x.org/quartz-otter-3"}'}}]}])[fact]
    assert not harness.present([fact], [{"role": "user", "content": "quartz-otter-4 is another one"}])[fact]


def test_ctx52_a_result_fact_counts_when_a_reference_reads_its_record_back_and_only_then():
    s = _session()
    result = next(f for f in s.facts if f.kind == "subagent")
    goal = next(f for f in s.facts if f.kind == "goal")
    assert result.readable and not goal.readable
    folded = f'[tool result folded] read it whole: read_record {{"seq": {result.seq}}}'
    note = [{"role": "tool", "tool_call_id": "c", "content": folded}]
    assert harness.present([result], note)[result] == "reference"
    other = [{"role": "tool", "tool_call_id": "c", "content": f'read_record {{"seq": {result.seq + 1}}}'}]
    assert harness.present([result], other)[result] == ""
    assert harness.present([goal], [{"role": "user", "content": f'read_record {{"seq": {goal.seq}}}'}])[goal] == ""
    counted = harness.tally(harness.present([result, goal], note))
    assert counted == {"subagent": (1, 1), "subagent (its text)": (0, 1), "goal": (0, 1)}


@given(st.lists(st.text(alphabet="abcdefghij klmnop.,\n", max_size=60), min_size=1, max_size=6),
       st.integers(min_value=0, max_value=5))
def test_ctx52_present_exactly_when_a_message_holds_the_marker(texts, where):
    fact = harness.Fact("decision", "violet-ibex-9", 1)
    messages = [{"role": "user", "content": t} for t in texts]
    assert not harness.present([fact], messages)[fact]
    messages[where % len(messages)]["content"] += " recorded as violet-ibex-9."
    assert harness.present([fact], messages)[fact]


def _prompt(s: object) -> str:
    view = project_records(s.records, open_runs=set())
    return str(summary_prompt(summarizer_input(view), max_chars=6_000)[-1]["content"])


def test_ctx52_the_faithful_summarizer_writes_nine_sections_from_what_it_was_given():
    s = _session()
    reply = harness.faithful(_prompt(s))
    body = re.search(r"<summary>\n(.*)\n</summary>", reply, re.S).group(1)
    assert [int(n) for n in re.findall(r"^(\d)\. ", body, re.M)] == list(range(1, 10))
    assert all(title in body for title in SECTION_TITLES)
    assert len(body) <= 6_000
    found = harness.present(s.facts, [{"role": "user", "content": reply}])
    assert all(found.values()), [f.kind for f, how in found.items() if not how]  # room enough: nothing dropped


def test_ctx52_the_terse_summarizer_keeps_the_shape_and_drops_the_detail():
    s = _session()
    reply = harness.terse(_prompt(s))
    assert all(title in reply for title in SECTION_TITLES)
    assert not any(harness.present(s.facts, [{"role": "user", "content": reply}]).values())


def test_ctx52_the_junk_summarizer_ignores_the_instruction():
    s = _session()
    reply = harness.junk(_prompt(s))
    assert "<summary>" not in reply and not any(title in reply for title in SECTION_TITLES)
    assert not any(harness.present(s.facts, [{"role": "user", "content": reply}]).values())


def test_ctx52_a_summary_request_of_the_cached_form_is_read_as_its_notes():
    """CTX-46: the action request then the instruction; the summarizer reads the same facts."""
    from context.compaction.prompt import cached_summary_instruction

    s = _session()
    view = project_records(s.records, open_runs=set())
    messages = [{"role": "system", "content": s.system}, *view, cached_summary_instruction(kept=0, max_chars=6_000)]
    text = harness.prompt_text(messages, cached=True)
    assert "at most 6,000 characters" in text and "<conversation>" in text
    reply = harness.faithful(text)
    assert len(reply) <= 6_000 + len("<summary>\n\n</summary>")
    found = harness.present(s.facts, [{"role": "user", "content": reply}])
    assert all(found.values()), [f.kind for f, how in found.items() if not how]
