"""CTX-1, CTX-7 to CTX-9 and the record kinds of SPEC §3."""

from __future__ import annotations

import copy

from recordkit import assistant, call, image, record, result, run_status, text, tool_call_msg, user

from context import project_records, truncate_text
from context.records import SUPPLEMENT_PREFIX, UNKNOWN_OUTCOME_TEXT


def tool(call_id: str, content) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def test_ctx1_projection_is_pure_and_never_changes_or_aliases_the_records() -> None:
    records = [
        user(1, [text("What is on the page?"), image()]),
        assistant(2, "Looking.", [call("c1", "browser_use")]),
        result(3, "c1", [text("a page"), image()], name="browser_use"),
        user(4, "ok"),
    ]
    before = copy.deepcopy(records)
    first = project_records(records)
    assert records == before
    assert project_records(records) == first
    first[0]["content"][1]["image_url"]["url"] = "changed"
    first[2]["content"].append(text("changed"))
    assert records == before


def test_ctx1_every_metadata_kind_projects_to_nothing() -> None:
    kinds = ["run_status", "model_change", "label", "extension_state", "context", "compaction_summary",
             "a_kind_invented_next_year"]
    records = [user(1, "Hello")] + [
        record(2 + n, kind, {"role": "user", "content": f"metadata {kind}", "summary": "s"})
        for n, kind in enumerate(kinds)
    ]
    assert project_records(records) == [{"role": "user", "content": "Hello"}]


def test_ctx1_a_command_is_a_user_visible_text_unless_excluded() -> None:
    records = [
        user(1, "List files"),
        record(2, "command", {"command": "ls", "exit_code": 0, "output": "README.md", "exclude": False}),
        record(3, "command", {"command": "cat .env", "exit_code": 0, "output": "SECRET", "exclude": True}),
    ]
    assert project_records(records) == [
        {"role": "user", "content": "List files"},
        {"role": "user", "content": "[Command run by the user]\n$ ls\nexit code: 0\nREADME.md"},
    ]


def test_ctx1_a_message_hidden_in_the_ui_still_reaches_the_model() -> None:
    records = [user(1, "Visible"), user(2, "Hidden from the UI, not from the model", display=False)]
    assert project_records(records) == [
        {"role": "user", "content": "Visible"},
        {"role": "user", "content": "Hidden from the UI, not from the model"},
    ]


def test_ctx1_a_supplement_is_a_user_message_marked_as_a_supplement() -> None:
    records = [user(1, "Write a poem"), record(2, "supplement", {"role": "user", "content": "about cats"})]
    assert project_records(records)[1] == {"role": "user", "content": SUPPLEMENT_PREFIX + "about cats"}


def test_ctx1_a_delegation_result_answers_the_delegate_call() -> None:
    records = [
        user(1, "Research it"), assistant(2, None, [call("d1", "delegate", '{"task": "x"}')]),
        record(3, "delegation_result", {"role": "tool", "tool_call_id": "d1", "content": "report", "status": "ok"}),
    ]
    assert project_records(records)[2] == tool("call_1", "report")


def test_ctx1_reasoning_is_kept_opaque_for_the_adapters() -> None:
    records = [user(1, "Q"), assistant(2, "A", reasoning="thinking...")]
    blocks = [{"type": "thinking", "thinking": "t", "signature": "sig"}]
    records_opaque = [user(1, "Q"), assistant(2, "A", reasoning=blocks)]
    assert project_records(records)[1] == {"role": "assistant", "content": "A", "reasoning_content": "thinking..."}
    assert project_records(records_opaque)[1] == {"role": "assistant", "content": "A", "reasoning": blocks}


def test_ctx7_a_120000_character_result_keeps_head_and_tail_with_one_marker() -> None:
    records = [user(1, "Build"), assistant(2, None, [call("b1", "build")]),
               result(7, "b1", "H" * 60_000 + "T" * 60_000, name="build")]
    content = project_records(records)[2]["content"]
    assert content == "H" * 11_919 + (
        "\n\n[... truncated: 96162 of 120000 characters omitted from the middle (record seq 7); "
        "the full text is kept in the records and read_record pages through it ...]\n\n"
    ) + "T" * 11_919
    assert len(content) <= 24_000


def test_ctx7_a_120000_character_multibyte_result_is_cut_on_character_boundaries() -> None:
    family = "👨\u200d👩\u200d👧"  # one visible emoji made of five code points
    records = [user(1, "Read"), assistant(2, None, [call("r1", "read")]),
               result(9, "r1", "界" * 60_000 + family * 12_000, name="read")]
    cut = project_records(records)[2]["content"]
    head, marker, tail = cut.partition("\n\n[... truncated:")
    assert head == "界" * 11_919
    assert marker and cut.count("[... truncated:") == 1 and "of 120000 characters" in cut
    kept_tail = tail.split("...]\n\n")[1]
    assert kept_tail == family * (len(kept_tail) // len(family))  # whole emoji only
    assert len(cut) <= 24_000
    assert cut.encode("utf-8").decode("utf-8") == cut


def test_ctx7_re_truncating_keeps_a_single_marker_and_the_original_figures() -> None:
    once = truncate_text("a" * 50_000 + "z" * 50_000, 24_000, 12)
    assert truncate_text(once, 24_000, 99) == once
    twice = truncate_text(once, 10_000, 99)
    assert twice.count("[... truncated:") == 1
    assert "of 100000 characters omitted" in twice and "(record seq 12)" in twice
    assert twice.startswith("a") and twice.endswith("z") and len(twice) <= 10_000


def test_ctx7_a_result_of_several_text_blocks_keeps_every_block_in_order() -> None:
    blocks = [text("a" * 30_000), text("small block"), text("c" * 30_000)]
    records = [user(1, "Go"), assistant(2, None, [call("m1", "multi")]), result(3, "m1", blocks, name="multi")]
    content = project_records(records)[2]["content"]
    assert [p["text"][0] for p in content] == ["a", "s", "c"]
    assert content[1] == text("small block")
    assert content[0]["text"].endswith("a") and content[2]["text"].endswith("c")
    assert sum(len(p["text"]) for p in content) <= 24_000
    assert all(p["text"].count("[... truncated:") == 1 for p in (content[0], content[2]))


def _browser_session() -> list[dict]:
    records = [user(1, [text("Fill the form; here is my ID card"), image("data:upload")])]
    seq = 2
    for step in range(1, 6):
        records.append(assistant(seq, None, [call(f"b{step}", "browser_use", f'{{"step": {step}}}')]))
        records.append(result(seq + 1, f"b{step}", [text(f"page {step}"), image(f"data:shot{step}")],
                              name="browser_use"))
        seq += 2
    records.append(assistant(seq, None, [call("p1", "plot")]))
    records.append(result(seq + 1, "p1", [text("chart"), image("data:chart")], name="plot"))
    return records


def test_ctx8_only_the_newest_screenshot_stays_and_other_images_are_untouched() -> None:
    projected = project_records(_browser_session())
    note = text("[earlier screenshot omitted: a newer screen observation supersedes it]")
    assert projected[0]["content"] == [text("Fill the form; here is my ID card"), image("data:upload")]
    assert [projected[2 * s]["content"] for s in range(1, 5)] == [[text(f"page {s}"), note] for s in range(1, 5)]
    assert projected[10]["content"] == [text("page 5"), image("data:shot5")]
    assert projected[12]["content"] == [text("chart"), image("data:chart")]


def test_ctx8_a_newer_browser_result_without_images_does_not_take_the_last_screenshot_away() -> None:
    records = _browser_session() + [
        assistant(20, None, [call("b6", "browser_use")]), result(21, "b6", "scrolled", name="browser_use")]
    projected = project_records(records)
    assert projected[10]["content"] == [text("page 5"), image("data:shot5")]
    assert projected[-1]["content"] == "scrolled"


def test_ctx8_a_result_flagged_observes_screen_counts_as_a_screen_tool() -> None:
    records = [user(1, "Look"),
               assistant(2, None, [call("s1", "desktop")]),
               result(3, "s1", [image("data:1"), image("data:2")], name="desktop", observes_screen=True),
               assistant(4, None, [call("s2", "desktop")]),
               result(5, "s2", [image("data:3")], name="desktop", observes_screen=True)]
    projected = project_records(records)
    assert projected[2]["content"] == [
        text("[2 earlier screenshots omitted: a newer screen observation supersedes them]")]
    assert projected[4]["content"] == [image("data:3")]
    assert project_records(records, screen_tools={"desktop"}) == projected


def checkpoint(seq: int, messages: list, covered: int, run: str = "r1") -> dict:
    return record(seq, "compaction", {"messages": messages, "summary": "s", "covered_seq": covered}, run)


def test_ctx9_two_checkpoints_in_a_row_never_duplicate_content() -> None:
    summary1 = {"role": "user", "content": "Summary one"}
    summary2 = {"role": "user", "content": "Summary two"}
    records = [user(1, "Q1"), assistant(2, "A1"), checkpoint(3, [summary1], 2),
               checkpoint(4, [summary2], 3), user(5, "Q2")]
    assert project_records(records) == [summary2, {"role": "user", "content": "Q2"}]


def test_ctx9_a_malformed_checkpoint_is_ignored_not_trusted() -> None:
    malformed = [
        checkpoint(3, [{"role": "narrator", "content": "x"}], 2),
        checkpoint(4, "not a list", 3),
        record(5, "compaction", {"messages": [{"role": "user", "content": "no covered_seq"}]}),
        checkpoint(6, [{"role": "user", "content": "covers the future"}], 99),
    ]
    records = [user(1, "Q1"), assistant(2, "A1"), *malformed, user(7, "Q2")]
    assert project_records(records) == [
        {"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "Q2"}]


def test_ctx9_pairing_and_ids_run_over_the_checkpoint_messages_too() -> None:
    kept = [{"role": "user", "content": "Summary"},
            {"role": "assistant", "content": None, "tool_calls": [tool_call_msg("call_9")]},
            tool("call_9", "kept result")]
    records = [user(1, "Q1"), checkpoint(2, kept, 1), assistant(3, None, [call("call_9")]),
               result(4, "call_9", "new result")]
    assert project_records(records) == [
        {"role": "user", "content": "Summary"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call_msg("call_1")]},
        tool("call_1", "kept result"),
        {"role": "assistant", "content": None, "tool_calls": [tool_call_msg("call_2")]},
        tool("call_2", "new result"),
    ]


def test_ctx9_a_checkpoint_that_never_saw_later_runs_cannot_erase_them() -> None:
    """RUN-9: resumed A compacts without having seen B; D must still see B."""
    records = [user(1, "A asks", run="A"), run_status(2, "A", "interrupted"),
               user(3, "B asks", run="B"), assistant(4, "B answered", run="B"),
               checkpoint(5, [{"role": "user", "content": "A's summary"}], 1, run="A"),
               user(6, "D asks", run="D")]
    assert [m["content"] for m in project_records(records)] == ["A asks", "B asks", "B answered", "D asks"]


def test_ctx9_a_start_view_replaces_the_records_up_to_its_watermark() -> None:
    view = [{"role": "user", "content": "Summary of 1-3"}]
    records = [user(1, "Q1"), assistant(2, "A1"), user(3, "Q2"), assistant(4, "A2"), user(5, "Q3")]
    assert project_records(records, start_view=view, start_watermark=3) == [
        view[0], {"role": "assistant", "content": "A2"}, {"role": "user", "content": "Q3"}]
    assert project_records(records[3:], start_view=view, start_watermark=3) == project_records(
        records, start_view=view, start_watermark=3)


def test_ctx9_an_unanswered_call_in_a_start_view_gets_a_placeholder() -> None:
    view = [{"role": "user", "content": "Q"},
            {"role": "assistant", "content": None, "tool_calls": [tool_call_msg("v1")]}]
    assert project_records([], start_view=view, start_watermark=10)[1:] == [
        {"role": "assistant", "content": None, "tool_calls": [tool_call_msg("call_1")]},
        tool("call_1", UNKNOWN_OUTCOME_TEXT)]
