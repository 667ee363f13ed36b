"""How records read in the chat (SPEC §3, display column): literal records in, display items out."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from sessions.run_errors import UNKNOWN_TITLE, RunErrorCode
from web.errors import error_explain
from web.folded import FOLDED_NOTICE
from web.transcript import (
    RESULT_PREVIEW_CHARS,
    Answer,
    Bubble,
    ErrorBox,
    Notice,
    Step,
    Summary,
    items_from_records,
    items_written,
    supplements_written,
    text_from_deltas,
)


def rec(kind: str, *, at: int = 0, **message) -> SimpleNamespace:
    return SimpleNamespace(kind=kind, message=message, seq=at)


def call(call_id: str, name: str = "calculator", arguments: str = '{"expression": "6*7"}') -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_a_finished_run_reads_as_question_answer_steps_and_answer():
    items = items_from_records([
        rec("user", role="user", content="What is 6*7?"),
        rec("assistant", role="assistant", content="Let me **compute**.", tool_calls=[call("c1")]),
        rec("tool_result", role="tool", tool_call_id="c1", name="calculator", content="42", status="ok"),
        rec("assistant", role="assistant", content="It is 42."),
        rec("run_status", status="completed"),
    ], durations={"c1": 7})
    assert [type(item) for item in items] == [Bubble, Answer, Step, Answer]
    assert items[0].text == "What is 6*7?"
    assert items[1].html == "<p>Let me <strong>compute</strong>.</p>"
    step = items[2]
    assert (step.name, step.status, step.status_label, step.result, step.duration_label) == (
        "calculator", "ok", "done", "42", "7 ms")
    assert step.arguments == '{\n  "expression": "6*7"\n}'


def test_a_call_without_a_result_says_so():
    items = items_from_records([rec("assistant", role="assistant", content=None,
                                    tool_calls=[call("c9", "http_fetch")])])
    assert items[0].status is None and items[0].status_label == "no result"


@pytest.mark.parametrize(("status", "label"), [("error", "error"), ("cancelled", "cancelled"),
                                               ("timeout", "timed out"), ("unknown", "outcome unknown")])
def test_each_tool_status_has_a_label(status, label):
    items = items_from_records([
        rec("assistant", role="assistant", content="", tool_calls=[call("c1")]),
        rec("tool_result", role="tool", tool_call_id="c1", content="…", status=status),
    ])
    assert items[0].status_label == label and items[0].status_class == status


def test_a_stopped_run_keeps_its_partial_answer_and_says_once_that_it_was_stopped():
    items = items_from_records([
        rec("user", role="user", content="Go"),
        rec("assistant", role="assistant", content="Half an ans", partial=True),
        rec("run_status", status="cancelled", reason="stopped by user"),
    ])
    assert items[1].html == "<p>Half an ans</p>" and items[1].partial is False  # the notice says it
    assert items[2] == Notice("You stopped this answer.", tone="stopped")


def test_an_interrupted_run_invites_a_resume():
    items = items_from_records([rec("run_status", status="interrupted", error={"code": "interrupted"})])
    assert items[0].tone == "stopped" and "resume" in items[0].text


@pytest.mark.parametrize("code", list(RunErrorCode), ids=lambda code: code.value)
def test_a_failed_run_gets_the_words_of_its_error_code(code):
    items = items_from_records([rec("run_status", status="failed", error={"code": code.value, "message": "Detail."})])
    assert items == [ErrorBox(code=code.value, title=code.title, hint=code.hint, message="Detail.")]


def test_the_codes_the_chat_promises_are_all_worded():
    assert {"rate_limited", "context_overflow", "provider_unavailable", "auth", "limit_reached",
            "invalid_request", "internal_error"} <= {code.value for code in RunErrorCode}


def test_an_unknown_error_code_gets_the_fallback_words():
    assert error_explain({"code": "martian", "message": "?"})["title"] == UNKNOWN_TITLE == "The run failed"
    assert error_explain(None)["code"] == "internal_error"


def test_metadata_and_summaries_are_not_part_of_the_chat():
    items = items_from_records([rec(kind, content="x") for kind in
                                ("model_change", "label", "extension_state", "context", "command")])
    assert items == []


def test_a_summary_is_a_marker_that_opens_to_the_summary_text():
    """The summary the model reads in place of earlier messages is the person's own data."""
    items = items_from_records([rec("compaction_summary", summary="<summary>1. Goal: compare regions</summary>",
                                    metrics={"tokens_before": 900})])
    assert items == [Summary(text="<summary>1. Goal: compare regions</summary>")]


def test_ctx47_a_compaction_that_only_folded_tool_results_says_so_and_marks_each_folded_step():
    records = [SimpleNamespace(kind="assistant", seq=1, message={"role": "assistant", "tool_calls": [call("c1")]}),
               SimpleNamespace(kind="tool_result", seq=2,
                               message={"tool_call_id": "c1", "content": "42", "status": "ok"}),
               SimpleNamespace(kind="assistant", seq=3, message={"role": "assistant", "tool_calls": [call("c2")]}),
               SimpleNamespace(kind="tool_result", seq=4,
                               message={"tool_call_id": "c2", "content": "43", "status": "ok"}),
               SimpleNamespace(kind="compaction_summary", seq=5, message={
                   "summary": None, "metrics": {"tiers": ["mask"], "masked_results": 1, "masked_seqs": [2]}})]
    items = items_from_records(records)
    steps = [item for item in items if isinstance(item, Step)]
    assert [step.folded_seq for step in steps] == [2, None]  # the chat says which result the model sees folded
    assert steps[0].result == "42"  # the records are untouched: opening the step reads it whole
    # A marker of its own kind (not a summary), which the chat can undo (CTX-51, web/undone.py).
    assert items[-1] == Summary(FOLDED_NOTICE, kind="folded", folded=1) and items[-1].seq == 5
    assert "folded" in FOLDED_NOTICE and "open one to read it whole" in FOLDED_NOTICE
    # Folded, then summarized: the summary's marker says both.
    records[-1].message = {"summary": "<summary>1. Goal</summary>", "metrics": {"tiers": ["mask", "summary"],
                                                                              "masked_results": 1, "masked_seqs": [2]}}
    assert items_from_records(records)[-1] == Summary(text="<summary>1. Goal</summary>", folded=1)


def test_ctx51_an_undone_summary_says_so_on_its_marker_and_only_the_newest_offers_undo():
    from sessions.selectors.compactions import UndoTarget
    from web.undone import summaries_marked

    records = [rec("compaction_summary", at=4, summary="first"), rec("compaction_summary", at=9, summary="second"),
               rec("compaction_undone", at=12, summary_seq=9, by="creator")]
    items = items_from_records(records)
    summaries_marked(items, records, None)
    assert [(item.seq, getattr(item, "undone", False)) for item in items] == [(4, False), (9, True)]
    fresh = items_from_records(records[:2])
    summaries_marked(fresh, records[:2], UndoTarget(snapshot_id=77, run_id=1, summary_seq=9))
    assert [getattr(item, "undo_compaction", None) for item in fresh] == [None, 77]


def test_a_compaction_checkpoint_shows_a_quiet_notice():
    items = items_from_records([rec("compaction", messages=[])])
    assert isinstance(items[0], Notice) and "summarized" in items[0].text and items[0].tone == "quiet"


def test_supplements_show_as_the_persons_words():
    items = items_from_records([rec("supplement", role="user", content="Use metric.", supplement=True)])
    assert items == [Bubble(kind="supplement", text="Use metric.")]


def test_long_tool_results_are_clipped_with_the_count_of_what_is_not_shown():
    items = items_from_records([
        rec("assistant", role="assistant", content="", tool_calls=[call("c1")]),
        rec("tool_result", role="tool", tool_call_id="c1", content="x" * (RESULT_PREVIEW_CHARS + 25), status="ok"),
    ])
    assert len(items[0].result) == RESULT_PREVIEW_CHARS and items[0].result_omitted == 25


def test_an_answer_over_the_chat_bound_keeps_its_head_and_its_tail():
    answer = "Summary first.\n" + "detail line\n" * 30_000 + "Conclusion: the payment test fails at line 42."
    items = items_from_records([rec("assistant", role="assistant", content=answer)])
    assert items[0].html.startswith('<p class="plain">Summary first.')
    assert "Conclusion: the payment test fails at line 42.</p>" in items[0].html
    assert "characters from the middle of this text are not shown here" in items[0].html


def test_an_answer_stopped_by_its_output_limit_says_so_and_what_to_do_next():
    items = items_from_records([rec("assistant", role="assistant", content="The first half of it",
                                    finish_reason="length", output_limit=4096)])
    assert items[0].cut_at_limit and not items[0].partial
    assert items[0].limit_note == "The answer was cut at 4,096 tokens (this agent's output limit)."
    # A record from before the limit was kept with it says the same without the figure.
    older = items_from_records([rec("assistant", role="assistant", content="Half", finish_reason="length")])
    assert older[0].limit_note == "The answer was cut at this agent's output limit."
    # Stopped while still thinking: nothing to show but the note.
    items = items_from_records([rec("assistant", role="assistant", content="", reasoning="hmm",
                                    finish_reason="length", output_limit=512)])
    assert isinstance(items[-1], Notice)
    assert items[-1].text == "The answer was cut at 512 tokens (this agent's output limit)."
    assert items[-1].cut_at_limit
    assert not items_from_records([rec("assistant", role="assistant", content="Done.")])[0].cut_at_limit


def test_the_chat_shows_the_output_limit_note_under_the_answer():
    from django.template.loader import render_to_string

    run = SimpleNamespace(run=SimpleNamespace(status="completed", pk=7), last_seq=3, live=False, plan=[],
                          items=[Answer(html="<p>The first half</p>", cut_at_limit=True, output_limit=1024)],
                          continuable=True)
    html = render_to_string("web/_run.html", {"run": run, "agent_name": "Helper"})
    assert '<p class="note cut-at-limit">The answer was cut at 1,024 tokens (this agent&#x27;s output limit).' in html
    assert '<button type="button" class="button continue-button" data-continue="7">Continue</button>' in html


def test_image_parts_are_named_not_shown():
    items = items_from_records([rec("user", role="user", content=[
        {"type": "text", "text": "Look"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}])])
    assert items[0].text == "Look\n[image]"


def test_a_working_run_shows_its_question_and_hands_its_supplements_to_the_browser_by_id():
    records = [rec("user", role="user", content="Q"), rec("assistant", role="assistant", content="A"),
               rec("supplement", role="user", content="S1")]
    records[2].entry_key = "supplement-abc"
    assert items_written(records) == [Bubble("user", "Q")]
    assert supplements_written(records, queued=[{"id": "x", "content": "S2"}]) == {"abc": "S1", "x": "S2"}


def test_streamed_text_drops_a_retried_attempt_and_ignores_sub_instances():
    events = [
        ("message_delta", {"text": "Hel", "instance": "main"}),
        ("run_error", {"code": "rate_limited", "retrying_in": 1.0, "reset": True, "instance": "main"}),
        ("message_delta", {"text": "Hello ", "instance": "main"}),
        ("message_delta", {"text": "sub-agent chatter", "instance": "17"}),
        ("error", {"code": "rate_limited", "retrying_in": 1.0, "reset": True, "instance": "17"}),
        ("message_delta", {"text": "world"}),
    ]
    assert text_from_deltas(events) == "Hello world"


def test_tool_arguments_are_shown_as_indented_json_and_other_text_as_it_came():
    items = items_from_records([
        rec("user", role="user", content="Q"),
        rec("assistant", role="assistant", content=None, tool_calls=[
            call("c1", arguments='{"expression": "6*7", "why": "<b>x</b>"}'), call("c2", arguments="not json {")]),
    ])
    assert items[1].arguments == '{\n  "expression": "6*7",\n  "why": "<b>x</b>"\n}'
    assert items[2].arguments == "not json {"


def test_ctx48_a_summary_written_by_code_says_so_in_plain_words():
    from django.template.loader import render_to_string

    by_code = items_from_records([rec("compaction_summary", summary="1. Primary requests and intent (written …",
                                      metrics={"summary_source": "code"})])
    by_model = items_from_records([rec("compaction_summary", summary="1. Primary requests and intent: x",
                                       metrics={"summary_source": "model"})])
    assert by_code[0].by_code and not by_model[0].by_code
    run = SimpleNamespace(run=SimpleNamespace(status="completed", pk=1, waiting_reason=""), items=by_code, plan=None,
                          last_seq=3, live=False)
    html = render_to_string("web/_run.html", {"run": run, "agent_name": "Agent"})
    assert "Earlier messages were summarized by the platform, not by the model" in html
    assert "did not pass the platform's check" in html
    run.items = by_model
    html = render_to_string("web/_run.html", {"run": run, "agent_name": "Agent"})
    assert "not by the model" not in html and "Earlier messages were summarized" in html
