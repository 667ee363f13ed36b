"""CTX-7: the bound is for the whole result, however many text blocks it has."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st
from recordkit import assistant, call, image, result, text, user

from context import Budget, answer_limit, project_records, truncate_content
from context.policy import PLATFORM_MAX_OUTPUT_TOKENS
from context.truncation import MIN_BLOCK_BUDGET, answer_bound, cap_for_storage, marker, structured_for_storage

MARKER = "\n\n[... truncated: "
MARKER_RE = re.compile(r"\n\n\[\.\.\. truncated: (\d+) of (\d+) characters omitted from the middle "
                       r"\(record seq [^)]*\); the full text is kept in the records and read_record pages "
                       r"through it \.\.\.\]\n\n")
# Text without combining marks or joiners: a cut may step back over those (never splitting
# a visible character), which would make "the first 64 characters are kept" approximate.
PLAIN = st.characters(blacklist_categories=("Cs", "Mn", "Me"), blacklist_characters="\u200d\ufe0e\ufe0f")
BLOCK = st.builds(text, st.text(PLAIN, max_size=3_000) | st.builds(lambda c, n: c * n, st.sampled_from("abxyz"),
                                                                    st.integers(0, 4_000)))
PART = st.one_of(BLOCK, BLOCK, BLOCK, st.builds(image, st.sampled_from(["data:a", "data:b"])))


def _texts(content: list[dict]) -> str:
    return "".join(p["text"] for p in content if p.get("type") == "text")


def test_ctx7_a_result_of_100_text_blocks_shows_the_model_the_limit_not_100_times_400() -> None:
    blocks = [text(f"<block {n}>" + "x" * 1_000 + f"</block {n}>") for n in range(100)]
    records = [user(1, "Go"), assistant(2, None, [call("m1", "multi")]), result(3, "m1", blocks, name="multi")]
    content = project_records(records)[2]["content"]
    shown = _texts(content)
    assert len(shown) <= 24_000  # was 40,000: each block kept at least 400
    assert shown.startswith("<block 0>") and shown.endswith("</block 99>")  # the head and the tail of the whole
    assert shown.count(MARKER) == 1
    total = sum(len(b["text"]) for b in blocks)
    assert f"of {total} characters omitted from the middle (record seq 3)" in shown
    # Blocks wholly inside the head or the tail are kept as they were, in order.
    assert content[0] == blocks[0] and content[-1] == blocks[-1]


def test_ctx7_blocks_that_can_each_keep_their_share_each_keep_their_head_and_tail() -> None:
    blocks = [text("a" * 9_000 + "A"), text("b" * 9_000 + "B"), text("c" * 9_000 + "C"), text("short")]
    cut = truncate_content(blocks, 24_000, 7)
    assert [p["text"][0] for p in cut] == ["a", "b", "c", "s"]
    assert [p["text"][-1] for p in cut[:3]] == ["A", "B", "C"] and cut[3] == text("short")
    assert all(p["text"].count(MARKER) == 1 for p in cut[:3]) and len(_texts(cut)) <= 24_000


def test_ctx7_stored_blocks_share_the_storage_bound_the_same_way() -> None:
    blocks = [text(f"[{n}]" + "y" * 5_000) for n in range(400)]
    stored = cap_for_storage(blocks, 100_000)
    assert len(_texts(stored)) <= 100_000  # was 400 x 400 = 160,000
    assert _texts(stored).startswith("[0]") and _texts(stored).endswith("y")
    assert "when this result was stored" in _texts(stored)


def test_ctx7_structured_content_is_stored_whole_up_to_the_cap_and_past_it_only_its_size() -> None:
    small = {"sum": 5, "note": "é"}
    assert structured_for_storage(small, 23) == (small, None)  # {"sum": 5, "note": "é"}: 23 characters
    assert structured_for_storage(small, 22) == (None, {"characters": 23, "limit": 22})
    assert structured_for_storage(None, 10) == (None, None)


@given(content=st.lists(PART, min_size=1, max_size=120), limit=st.integers(1_000, 30_000),
       seq=st.integers(0, 10**6))
def test_ctx7_any_list_of_blocks_is_cut_to_the_limit_keeping_the_head_and_the_tail_of_the_whole(
        content: list[dict], limit: int, seq: int) -> None:
    cut = truncate_content(content, limit, seq)
    whole, shown = _texts(content), _texts(cut)
    if len(whole) <= limit:
        assert cut == content
        return
    assert len(shown) <= limit + len(marker(len(whole), len(whole), seq))  # the limit, plus the note at most
    assert len(shown) <= limit  # in fact the note fits inside it
    keep = min(64, (MIN_BLOCK_BUDGET - len(marker(len(whole), len(whole), seq))) // 2)
    assert shown[:keep] == whole[:keep] and shown[-keep:] == whole[-keep:]
    assert MARKER in shown
    # Images keep their order and their place among the parts; nothing is invented.
    assert [p for p in cut if p.get("type") != "text"] == [p for p in content if p.get("type") != "text"]
    if shown.count(MARKER) == 1:  # cut as one text: a head of the whole, the note, a tail of the whole
        head, note, tail = shown.partition(MARKER)
        assert whole.startswith(head) and whole.endswith(tail.split(" ...]\n\n", 1)[1])
    else:  # each long block cut on its own: every block stays, in order
        assert len([p for p in cut if p.get("type") == "text"]) == len([p for p in content if p.get("type") == "text"])
    assert truncate_content(cut, limit, seq) == cut  # cutting again changes nothing


# --- an answer over the bound (a provider that ignored its output limit, an import) -------

def test_ctx7_an_answer_of_three_million_characters_is_shown_with_its_head_and_tail_and_a_note() -> None:
    answer = "I will start with the summary.\n" + "and then it kept going " * 130_000 + "THE END"
    records = [user(1, "Write it all"), assistant(2, answer), user(3, "Now just the conclusion, please")]
    repairs: list[dict] = []
    view = project_records(records, repairs_out=repairs)
    shown = view[1]["content"]
    # Without a caller's bound: what the platform's output reserve lets a model write.
    assert len(shown) <= answer_bound(PLATFORM_MAX_OUTPUT_TOKENS) and shown.count(MARKER) == 1
    assert shown.startswith("I will start with the summary.") and shown.endswith("THE END")
    assert f"of {len(answer)} characters omitted from the middle (record seq 2)" in shown
    assert view[2] == {"role": "user", "content": "Now just the conclusion, please"}
    assert [r["kind"] for r in repairs] == ["truncated"] and repairs[0]["seq"] == 2
    assert records[1]["message"]["content"] == answer  # the record keeps every character (CTX-1)


ANSWER = st.one_of(st.text(PLAIN, max_size=2_000),
                   st.builds(lambda a, n, b: a + "m" * n + b, st.text(PLAIN, min_size=1, max_size=50),
                             st.integers(0, 120_000), st.text(PLAIN, min_size=1, max_size=50)))


@given(answers=st.lists(st.tuples(ANSWER, st.booleans(), st.booleans()), min_size=1, max_size=6),
       limit=st.integers(1_000, 30_000))
def test_ctx7_no_answer_in_a_projection_is_longer_than_the_bound_and_each_keeps_its_head_and_tail(
        answers: list[tuple[str, bool, bool]], limit: int) -> None:
    records, seq = [], 0
    for n, (answer, as_blocks, partial) in enumerate(answers):
        seq += 1
        records.append(user(seq, f"Q{n}"))
        seq += 1
        message = assistant(seq, [text(answer)] if as_blocks else answer)
        message["message"]["partial"] = partial
        records.append(message)
    view = project_records(records, tool_result_limit=1_000, answer_limit=limit)
    shown = [m for m in view if m["role"] == "assistant"]
    written = [(a, p) for a, _, p in answers if a.strip()]  # a blank answer is no message (CTX-6)
    assert len(shown) == len(written)  # every answer stays, in order
    suffix = "\n\n[interrupted: this response was cut off before it finished]"
    for message, (answer, partial) in zip(shown, written):
        content = message["content"]
        if isinstance(content, list):  # the interrupted note is a block of its own, after the answer's
            if partial:
                assert content[-1] == {"type": "text", "text": suffix.lstrip()}
                content = content[:-1]
            body = _texts(content)
        else:  # the note follows the answer's text after a blank line
            body = content
            if partial:
                assert body.endswith(suffix)
                body = body[:-len(suffix)]
        assert len(body) <= limit
        if len(answer) <= limit:
            assert body == answer
        else:
            head, _, tail = body.partition(MARKER)
            assert answer.startswith(head) and answer.endswith(tail.split(" ...]\n\n", 1)[1])
            assert min(len(head), len(tail)) >= 64


def test_ctx7_an_answer_a_model_could_write_within_its_output_limit_is_shown_whole() -> None:
    # A generated module of about 9,000 tokens, well within a 16,000-token output limit.
    module = "".join(f"def function_{n}():\n    return {n}\n\n" for n in range(1_400))
    records = [user(1, "Write the module"), assistant(2, module), user(3, "Now fix function_1350")]
    limit = answer_limit(Budget(context_window=200_000, max_output_tokens=16_000, safety_margin_tokens=2_000))
    view = project_records(records, answer_limit=limit)
    assert len(module) > 24_000 and view[1]["content"] == module  # longer than a tool result may be
    small = answer_limit(Budget(context_window=8_192, max_output_tokens=1_024, safety_margin_tokens=512))
    assert small == 2 * (8_192 - 1_024 - 512)
    cut = project_records(records, answer_limit=small)[1]["content"]
    assert len(cut) == 24_000 and cut.count(MARKER) == 1  # never below what a tool result may show


def test_ctx7_blocks_cut_as_one_text_count_every_block_even_when_one_was_cut_before() -> None:
    # One long block already cut (its own marker), beside ten more: cut as one text, the
    # marker reports the whole result's original size -- the 50,000 characters the first
    # block stood for and the other ten blocks -- not the earlier cut's, nor the shown text's.
    blocks = [text(truncate_content("A" * 50_000, 10_000, seq=7)), *(text("b" * 3_000) for _ in range(10))]
    joined = "".join(p["text"] for p in truncate_content(blocks, 2_400, seq=7) if p.get("type") == "text")
    assert len(joined) <= 2_400 and joined.count(MARKER) == 1
    assert "of 80000 characters omitted from the middle (record seq 7)" in joined


# --- CTX-7's precedence: markers take at most a tenth of the bound -------------------------

def _marker_chars(content: list[dict]) -> int:
    return sum(len(found.group()) for p in content if p.get("type") == "text"
               for found in MARKER_RE.finditer(p["text"]))


def test_ctx7_55_long_blocks_are_cut_as_one_text_with_one_marker_not_55() -> None:
    # Each block could keep 436 characters (over MIN_BLOCK_BUDGET): it used to, and its 55
    # markers took 8,635 of the 24,000 characters (36%).
    blocks = [text(f"<{n:02d}>" + "x" * 991 + f"</{n:02d}>") for n in range(55)]
    cut = truncate_content(blocks, 24_000, 3)
    whole = _texts(blocks)
    mark = marker(55_000 - 2 * 11_920, 55_000, 3)  # half of (24,000 - the longest marker, 160) each side
    assert len(marker(55_000, 55_000, 3)) == 160 and len(mark) == 160
    assert _texts(cut) == whole[:11_920] + mark + whole[-11_920:]
    assert cut[:11] == blocks[:11] and cut[-11:] == blocks[-11:]  # blocks inside the head or the tail stay whole
    assert cut[11] == text(whole[11_000:11_920] + mark) and cut[12] == text(whole[-11_920:-11_000])
    assert len(cut) == 24 and _marker_chars(cut) == 160


def test_ctx7_blocks_keep_a_marker_each_only_while_the_markers_take_at_most_a_tenth() -> None:
    fifteen = [text(f"[{n:02d}]" + "y" * 1_996) for n in range(15)]  # 1,600 each, 15 markers of 157 = 2,355
    kept = truncate_content(fifteen, 24_000, 5)
    assert [p["text"].count(MARKER) for p in kept] == [1] * 15
    assert [p["text"][:5] for p in kept] == [f"[{n:02d}]y" for n in range(15)]
    assert _marker_chars(kept) == 2_355 and len(_texts(kept)) == 23_985
    sixteen = [text(f"[{n:02d}]" + "y" * 1_996) for n in range(16)]  # 16 markers would be 2,512 > 2,400
    one = truncate_content(sixteen, 24_000, 5)
    assert _texts(one).count(MARKER) == 1 and _marker_chars(one) == 159 and len(_texts(one)) == 23_999
    assert _texts(one).startswith("[00]y") and _texts(one).endswith("y" * 1_996)


def test_ctx7_blocks_cut_one_by_one_and_cut_again_as_one_text_keep_a_single_marker() -> None:
    blocks = [text(f"<{n}>" + "z" * 3_000 + f"</{n}>") for n in range(10)]
    once = truncate_content(blocks, 24_000, 9)  # ten markers, 1,580 characters: a block each
    assert [p["text"].count(MARKER) for p in once] == [1] * 10
    again = truncate_content(once, 4_000, 9)  # ten markers would be 40% of 4,000: one text
    shown = _texts(again)
    assert shown.count(MARKER) == 1 and len(shown) <= 4_000
    assert shown.startswith("<0>") and shown.endswith("</9>")
    # The note still reports the result's original size and record.
    assert "of 30070 characters omitted from the middle (record seq 9)" in shown


@given(content=st.lists(PART, min_size=1, max_size=120), limit=st.integers(2_000, 30_000),
       again=st.integers(2_000, 30_000), seq=st.integers(0, 10**6))
def test_ctx7_for_any_blocks_the_bound_holds_markers_take_a_tenth_and_cutting_again_keeps_one_marker(
        content: list[dict], limit: int, again: int, seq: int) -> None:
    whole = _texts(content)
    cut = truncate_content(content, limit, seq)
    for given_, bound, result_ in ((content, limit, cut),
                                   (cut, min(limit, again), truncate_content(cut, min(limit, again), seq))):
        shown = _texts(result_)
        if len(_texts(given_)) <= bound:
            assert result_ == given_
            continue
        assert len(shown) <= bound
        assert _marker_chars(result_) <= bound / 10
        assert shown[:32] == whole[:32] and shown[-32:] == whole[-32:]  # the head and the tail of the whole
        assert all(p["text"].count(MARKER) <= 1 for p in result_ if p.get("type") == "text")
        texts_in = len([p for p in given_ if p.get("type") == "text"])
        texts_out = len([p for p in result_ if p.get("type") == "text"])
        assert shown.count(MARKER) == 1 or texts_out == texts_in  # one text with one marker, or every block
        # What is shown and what the markers say they leave out add up to the whole.
        omitted = sum(int(found.group(1)) for found in MARKER_RE.finditer(shown))
        assert len(shown) - _marker_chars(result_) + omitted == len(whole)
        assert [p for p in result_ if p.get("type") != "text"] == [p for p in content if p.get("type") != "text"]
    assert truncate_content(cut, limit, seq) == cut  # cutting again at the same bound changes nothing
