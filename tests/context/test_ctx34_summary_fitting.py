"""CTX-34: a summary over its room is shortened between sentences, and never by emptying a
section to keep another whole -- whatever shape the model gave section 6."""

from __future__ import annotations

import hashlib
import re

from hypothesis import event, given
from hypothesis import strategies as st
from test_ctx_compaction import drive_recording, request, rounds
from test_ctx_compaction_sizing import words_in_order

from context.compaction import SummaryReply, compact, continuation_summary, fit_summary
from context.compaction.sections import SECTION_TITLES


def said(k: int) -> str:
    return f'The user then wrote "look at item {k} and tell me what you think".'


BODIES = {
    1: "The user wants the billing export fixed. They also want a weekly report.",
    2: "CSV encoding. Timezones in cron.",
    3: "export.py was changed to write UTF-8. cron.yaml was read.",
    4: "The export crashed on accents; fixed by encoding.",
    5: "The export works. The report is drafted.",
    6: " ".join(said(k) for k in range(1, 25)),  # every user message, as one paragraph
    7: "Send the weekly report.",
    8: "Drafting the report.",
    9: "Send the report to the user.",
}


def summary(order=range(1, 10), **bodies: str) -> str:
    """Sections ``order`` of a summary as a model writes them, one line each; ``s6="…"``
    replaces section 6's body, and so on."""
    chosen = {**BODIES, **{int(key[1:]): body for key, body in bodies.items()}}
    return "\n".join(f"{n}. {SECTION_TITLES[n - 1]}: {chosen[n]}" for n in order)


def test_ctx34_a_section_6_written_as_one_paragraph_gives_way_from_its_oldest_sentence() -> None:
    text = summary()
    assert len(text) == 2_113
    # It used to be one piece kept last of all: sections 1, 3, 4, 5 and 7 were emptied to
    # keep it whole, and at 1,500 characters it went whole while every other section stayed.
    assert fit_summary(text, max_units=1_700, cost_of=len) == summary(s6=" ".join(said(k) for k in range(8, 25)))
    assert fit_summary(text, max_units=700, cost_of=len) == summary(s6=f"{said(23)} {said(24)}")
    # Every section down to its first sentence before any is emptied; the newest user words stay.
    assert fit_summary(text, max_units=520, cost_of=len) == summary(
        s1="The user wants the billing export fixed.", s2="CSV encoding.", s3="export.py was changed to write UTF-8.",
        s5="The export works.", s6=said(24))


def test_ctx34_sections_in_another_order_or_missing_keep_what_they_can_in_their_order() -> None:
    text = summary(order=(9, 1, 6, 3))  # the next step first, sections 2, 4, 5, 7 and 8 left out
    assert fit_summary(text, max_units=400, cost_of=len) == summary(order=(9, 1, 6, 3), s6=f"{said(23)} {said(24)}")
    # Down to one sentence each, the longest is emptied first; the next step and the newest
    # user words last.
    assert fit_summary(text, max_units=250, cost_of=len) == "\n".join([
        "9. Next step: Send the report to the user.", "1. Primary requests and intent:",
        f"6. All user messages: {said(24)}", "3. Files, resources and code: export.py was changed to write UTF-8."])


def test_ctx34_user_messages_one_a_line_still_give_way_a_whole_line_at_a_time() -> None:
    lines = "\n" + "\n".join(f"- {said(k)}" for k in range(1, 25))
    fitted = fit_summary(summary(s6=lines), max_units=1_000, cost_of=len)
    assert fitted == summary(s6="\n" + "\n".join(f"- {said(k)}" for k in range(19, 25)))


def asked(k: int) -> str:
    return f"The user asked about invoice {hashlib.sha1(str(k).encode()).hexdigest()[:16]}."


def test_ctx34_a_reply_with_a_one_paragraph_section_6_over_its_room_keeps_sections_1_to_5() -> None:
    paragraph = " ".join(asked(k) for k in range(1, 400))
    reply = f"<summary>\n{summary(s6=paragraph)}\n</summary>"
    result_, calls = drive_recording(compact(request(rounds(8))), lambda _call: SummaryReply(reply))
    assert result_.outcome == "compacted" and result_.metrics["summary_cut_chars"] > 0
    written = continuation_summary(result_.messages[0])
    kept = written.split("6. All user messages: ", 1)[1].split("\n", 1)[0]
    assert kept.endswith(asked(399)) and asked(1) not in kept  # section 6 keeps its newest sentences
    assert written == summary(s6=kept)  # every other section whole, in order


# --- any summary -------------------------------------------------------------------------------

SENTENCES = st.lists(st.integers(1, 6), min_size=0, max_size=8)  # the words of each sentence


def _body(number: int, lengths: list[int]) -> list[str]:
    return [" ".join([f"S{number}x{k}"] + ["w"] * (size - 1)) + "." for k, size in enumerate(lengths)]


@st.composite
def summaries(draw):
    order = draw(st.permutations(range(1, 10)))
    order = order[:draw(st.integers(2, 9))]  # some sections missing, the rest in any order
    bodies = {n: _body(n, draw(SENTENCES)) for n in order}
    as_lines = draw(st.booleans())  # section 6: one message a line, or one paragraph
    return order, bodies, as_lines


def _render(order, bodies, as_lines: bool) -> str:
    lines = []
    for n in order:
        joiner = "\n" if n == 6 and as_lines else " "
        lead = "\n" if n == 6 and as_lines and bodies[n] else " "
        lines.append(f"{n}. {SECTION_TITLES[n - 1]}:{lead if bodies[n] else ''}{joiner.join(bodies[n])}")
    return "\n".join(lines)


def _shown(fitted: str, order) -> dict[int, list[str]]:
    """The sentences each section shows (by their ``S<n>x<k>`` tags)."""
    titles = "|".join(re.escape(f"{n}. {SECTION_TITLES[n - 1]}:") for n in order)
    found = {}
    for n, chunk in zip(order, re.split(titles, fitted)[1:]):
        found[n] = re.findall(rf"S{n}x\d+", chunk)
    return found


@given(drawn=summaries(), cut=st.floats(0.05, 1.0))
def test_ctx34_for_any_summary_no_section_is_emptied_while_another_keeps_more_than_one_sentence(drawn, cut) -> None:
    order, bodies, as_lines = drawn
    text = _render(order, bodies, as_lines)
    max_units = int(len(text) * cut)
    fitted = fit_summary(text, max_units=max_units, cost_of=len)
    assert len(fitted) <= max_units and words_in_order(fitted, text)
    titles = _render(order, {n: [] for n in order}, as_lines)
    if len(titles) > max_units:
        return  # not even the titles fit: the longest prefix of whole sentences
    assert _shown(titles, order) == {n: [] for n in order}
    shown = _shown(fitted, order)
    assert list(shown) == list(order)  # every section, in its order
    tags = {n: [f"S{n}x{k}" for k in range(len(bodies[n]))] for n in order}
    for n in order:
        if n == 6:
            assert shown[n] == tags[n][len(tags[n]) - len(shown[n]):]  # the newest, in order
        else:
            assert shown[n] == tags[n][:len(shown[n])]  # from the start, in order
    emptied = [n for n in order if tags[n] and not shown[n]]
    if emptied:
        event("a section emptied")
        assert all(len(shown[n]) <= 1 for n in order), (emptied, shown)
    if 6 in order and tags[6] and len(_render(order, {n: bodies[n][-1:] if n == 6 else [] for n in order},
                                              as_lines)) <= max_units:
        assert shown[6], "the user's newest summarized words go last of all"
