"""CTX-48: summaries are checked, and one that fails is replaced by a summary written by code.

Literal model outputs for the check (markdown headings, bold titles, "Section 3 — Files…",
a small model's list of sea animals, a copy of a user message, a reply the server cut),
and hypothesis properties on the pure engine: no summary that failed the check is ever
committed, and the code-written summary holds every user message of its range, in order,
within its room.
"""
from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from context import BytesEstimator
from context.compaction import SECTION_TITLES, HistoryFacts, RuntimeState, SummaryReply, compact
from context.compaction.check import sections_of, shortened_problems, summary_check, title_number
from context.compaction.code_summary import CODE_SUMMARY_MARK, code_summary, shorten
from context.compaction.history import history_facts
from context.compaction.view import continuation_message
from tests.context.test_ctx_compaction import drive_recording, nine, request, rounds

MARKDOWN = """## 1. Primary Request and Intent
The user wants the failing login test fixed.
## 2. Key Technical Concepts
- Django test client, sessions
## 3. Files and Code Sections
- `accounts/views.py`: the login view, changed to rotate the session key.
## 4. Errors and fixes
- `KeyError: 'next'` fixed by defaulting to "/".
## 5. Problem Solving
Solved the redirect; the cookie flag is still being checked.
## 6. All User Messages
- "Fix the login test"
- "Always answer in French"
## 7. Pending Tasks
- Check the cookie flag.
## 8. Current Work
Reading settings.py.
## 9. Optional Next Step
Check SESSION_COOKIE_SECURE, as the user asked: "Fix the login test".
"""

BOLD_ANY_ORDER = """**Pending tasks:** none
**All user messages:**
1. Compare the regions
**Next step:** draft the table
**Current work:** reading the Q3 figures
**Errors and fixes:** (none)
**Problem-solving progress:** the North region is done
**Files, resources & code:** report.xlsx (id 4)
**Key technical concepts:** pivot tables
**Primary requests and intent:** compare the regions' growth
"""

SECTIONS_WORDED = "\n".join([
    "Section 1 — Primary requests and intent: fix the build.",
    "Section 2 — Technical concepts: make, gcc.",
    "Section 3 — Files…: Makefile.",
    "Section 4 — Errors & fixes: missing header, added.",
    "Section 5 — Progress: builds on Linux.",
    "Section 6 — User messages: \"fix the build\"",
    "Section 7 — Pending tasks: macOS.",
    "Section 8 — Current work: the macOS runner.",
    "Section 9 — Next steps: run the macOS job.",
])

SEA_ANIMALS = ("1. The Blue Whale: the largest animal on Earth.\n2. The Shrimp: small and many.\n"
               "3. The Octopus: eight arms.\n4. The Jellyfish: no brain.\n5. The Seahorse: the male carries the eggs.\n"
               "6. The Dolphin: clever.\n7. The Shark: old.\n8. The Turtle: slow.\n9. The Crab: sideways.")


def test_ctx48_titles_are_matched_leniently_as_models_write_them() -> None:
    for text in (MARKDOWN, BOLD_ANY_ORDER, SECTIONS_WORDED, nine(["Q1"])):
        assert summary_check(text) == [], text[:40]
        assert sorted(sections_of(text)) == list(range(1, 10))
    assert title_number("### 9) **Optional Next Step:**") == 9
    assert title_number("- what is the next step?") is None  # a question quoted in section 6
    assert title_number("1. The Blue Whale: the largest animal on Earth.") is None


def test_ctx48_a_list_of_sea_animals_is_no_summary() -> None:
    assert summary_check(SEA_ANIMALS) == ["missing_sections"]


def test_ctx48_a_summary_saying_nothing_beyond_the_user_messages_is_refused() -> None:
    bare = "\n".join(f"{n}. {title}: " + ("\"Fix the login test\"" if n == 6 else "(none)")
                     for n, title in enumerate(SECTION_TITLES, start=1))
    assert summary_check(bare) == ["only_user_messages"]


def test_ctx48_a_copy_of_one_message_is_refused() -> None:
    question = "Please compare the growth of the four regions over the last three quarters and tell me why."
    assert "copy_of_message" in summary_check(question, history=[question, "Answer 1."])
    demo = "(Offline demo model) You asked: 'summarize'. I received 12 messages."
    assert "copy_of_message" in summary_check(demo, history=["Q1", demo + " More."])
    # Carrying a message inside a real summary is not a copy.
    assert summary_check(MARKDOWN, history=["Fix the login test"]) == []


def test_ctx48_a_cut_reply_is_refused_however_whole_it_looks() -> None:
    assert summary_check(MARKDOWN, truncated=True) == ["cut"]


def junk(_call) -> SummaryReply:
    return SummaryReply(SEA_ANIMALS)


def test_ctx48_a_junk_summarizer_gives_the_summary_written_by_code_marked_as_such() -> None:
    messages = rounds(8)
    history = HistoryFacts(user_messages=tuple(m["content"] for m in messages if m["role"] == "user"),
                           calls=({"id": "call_1", "name": "read_log", "arguments": "{}", "status": "done"},),
                           last_answer="Answer 8: all fine.")
    result, calls = drive_recording(compact(replace(request(messages), history=history)), junk)
    assert result.outcome == "compacted" and len(calls) == 3
    assert [v["problems"] for v in result.metrics["summary_check"]] == [["missing_sections"]] * 3
    assert (result.metrics["summary_source"], result.metrics["summary_fallback"]) == ("code", "summary_failed")
    summary = result.summary
    assert CODE_SUMMARY_MARK in summary and "Blue Whale" not in summary
    kept = [m["content"] for m in result.messages if m["role"] == "user"][1:]
    summarized = [q for q in history.user_messages if q not in kept]
    positions = [summary.index(f"“{q}”") for q in summarized]
    assert summarized and positions == sorted(positions)
    assert "read_log({}): done" in summary and "Answer 8: all fine." in summary
    assert summary_check(summary) == []


def test_ctx48_without_records_the_code_summary_is_read_from_the_view() -> None:
    earlier = continuation_message(nine(["Always answer in French", "Q0 the first question"]))
    messages = [earlier, *rounds(8)]
    result, _ = drive_recording(compact(request(messages)), junk)
    assert result.outcome == "compacted" and result.metrics["summary_source"] == "code"
    assert result.summary.index("Always answer in French") < result.summary.index("Q0 the first question") \
        < result.summary.index("Q1 please check the logs of service 1")


def test_ctx48_the_ledger_is_rendered_when_there_is_one() -> None:
    ledger = ({"kind": "url", "label": "https://example.org/report", "ref": "record 12", "outcome": "done"},)
    req = replace(request(rounds(8)), runtime_state=RuntimeState(ledger=ledger))
    result, _ = drive_recording(compact(req), junk)
    assert "url: https://example.org/report (read back: record 12), done" in result.summary


def test_ctx48_history_facts_read_every_user_message_and_each_call_status() -> None:
    records = [
        {"seq": 1, "run": 1, "instance": "main", "kind": "user", "message": {"role": "user", "content": "Goal"}},
        {"seq": 2, "run": 1, "instance": "main", "kind": "assistant", "message": {
            "role": "assistant", "content": None, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "fetch", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "write", "arguments": "{}"}}]}},
        {"seq": 3, "run": 1, "instance": "main", "kind": "tool_result",
         "message": {"role": "tool", "tool_call_id": "a", "content": "ok", "status": "ok"}},
        {"seq": 4, "run": 1, "instance": "main", "kind": "supplement",
         "message": {"role": "user", "content": "Always answer in French"}},
        {"seq": 5, "run": 1, "instance": "main", "kind": "run_status", "message": {"status": "failed"}},
        {"seq": 6, "run": 2, "instance": "main", "kind": "user", "message": {"role": "user", "content": "Next"}},
        {"seq": 7, "run": 2, "instance": "main", "kind": "assistant", "message": {
            "role": "assistant", "content": "Done.", "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "run", "arguments": "{}"}}]}},
        {"seq": 8, "run": 2, "instance": "main", "kind": "tool_result",
         "message": {"role": "tool", "tool_call_id": "c", "content": "boom", "status": "error"}},
    ]
    facts = history_facts(records, open_runs={2})
    assert facts.user_messages == ("Goal", "Always answer in French", "Next")
    assert [(c["id"], c["status"]) for c in facts.calls] == [("a", "done"), ("b", "unknown"), ("c", "failed")]
    assert facts.last_answer == "Done."


# -- properties -----------------------------------------------------------------------------------

EST = BytesEstimator()
texts = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=300).filter(lambda t: t.strip())


def _heads_in_order(summary: str, messages: list[str], room_chars: int) -> bool:
    at = 0
    for message in messages:
        head = shorten(message, None)[:8]
        found = summary.find(head, at)
        if found < 0:
            return False
        at = found + len(head)
    return True


@settings(max_examples=150, deadline=None)
@given(users=st.lists(texts, min_size=1, max_size=12), room=st.integers(min_value=600, max_value=6_000))
def test_ctx48_the_code_summary_holds_every_user_message_in_order_within_its_room(users, room) -> None:
    req = replace(request(rounds(2)), history=HistoryFacts(user_messages=tuple(users)))
    text = code_summary(req, summarized=[], retained=[], max_units=room, cost_of=len)
    assert len(text) <= room
    assert shortened_problems(text, min_chars=1) == [] and CODE_SUMMARY_MARK in text
    whole = [shorten(u, None) for u in users]
    if len(code_summary(req, summarized=[], retained=[], max_units=10**6, cost_of=len)) <= room:
        at = 0  # room enough: every message verbatim (on one line), in order
        for message in whole:
            at = text.index(f"“{message}”", at) + len(message)
    elif "not shown)" not in text:  # shortened, none dropped: each message's head, in order
        assert _heads_in_order(text, users, room)


REPLIES = st.sampled_from(["good", "sea", "copy", "empty", "cut", "bare", "loop", "error"])


def _reply(kind: str, users: list[str]) -> SummaryReply:
    if kind == "good":
        return SummaryReply(f"<summary>\n{nine(users)}\n</summary>")
    if kind == "sea":
        return SummaryReply(SEA_ANIMALS)
    if kind == "copy":
        return SummaryReply(users[0])
    if kind == "cut":
        return SummaryReply(f"<summary>\n{nine(users)}", truncated=True)
    if kind == "bare":
        return SummaryReply("\n".join(f"{n}. {t}: " + (" ".join(users) if n == 6 else "(none)")
                                      for n, t in enumerate(SECTION_TITLES, start=1)))
    if kind == "loop":
        return SummaryReply("The agent read the log and the log said the agent read the log.\n" * 40)
    if kind == "error":
        return SummaryReply(None, error_code="timeout")
    return SummaryReply("")


@settings(max_examples=150, deadline=None)
@given(count=st.integers(min_value=4, max_value=10), kinds=st.lists(REPLIES, min_size=6, max_size=6))
def test_ctx48_a_summary_that_failed_the_check_is_never_committed(count, kinds) -> None:
    messages = rounds(count)
    users = [m["content"] for m in messages if m["role"] == "user"]
    answers, used = list(kinds), []

    def summarizer(_call) -> SummaryReply:
        used.append(answers.pop(0))
        return _reply(used[-1], users)

    result, calls = drive_recording(compact(request(messages)), summarizer)
    checked = [kind for kind in used if kind != "error"]  # a provider error gives no reply to check
    if result.outcome != "compacted":
        assert result.messages is None
        return
    metrics = result.metrics
    assert shortened_problems(result.summary) == []
    if metrics["summary_source"] == "model":
        # The committed text is a reply that passed, or that reply shortened between sentences.
        assert [] in [v["problems"] for v in metrics["summary_check"]]
        passed = [i for i, v in enumerate(metrics["summary_check"]) if v["problems"] == []]
        assert all(checked[i] == "good" for i in passed)
        assert "Blue Whale" not in result.summary
    else:
        assert metrics["summary_source"] == "code" and CODE_SUMMARY_MARK in result.summary
        assert all(v["problems"] for v in metrics["summary_check"])
        assert "Blue Whale" not in result.summary


def test_ctx48_the_range_ends_before_the_messages_kept_verbatim_even_when_the_records_run_past_the_view() -> None:
    from context.compaction.code_summary import messages_in_range

    history = HistoryFacts(user_messages=("Goal", "Always answer in French", "Q3", "Q4", "Q5 asked later"))
    from context.records import SUPPLEMENT_PREFIX

    retained = [{"role": "user", "content": "Q3"}, {"role": "assistant", "content": "A3"},
                {"role": "user", "content": SUPPLEMENT_PREFIX + "Q4"}]
    assert messages_in_range(history, retained) == ["Goal", "Always answer in French"]
    assert messages_in_range(history, []) == list(history.user_messages)
    assert messages_in_range(history, [{"role": "user", "content": "not in the records"}]) == list(
        history.user_messages)


def test_ctx48_the_opening_messages_keep_their_words_while_the_others_are_shortened_or_left_out() -> None:
    """The goal and a standing rule given in the session's opening messages survive a small
    room: the others are shortened first, and only messages after the opening ones go."""
    rule = "One standing rule for the whole session (amber-lynx): never change files under vendor/, ever."
    users = ["The goal (cobalt-heron): ship the release.", rule,
             *(f"Message {n}: " + "more detail on the quarterly figures. " * 6 for n in range(30)), "What now?"]
    req = replace(request(rounds(2)), history=HistoryFacts(user_messages=tuple(users)))
    for room in (3_000, 1_800, 900):
        text = code_summary(req, summarized=[], retained=[], max_units=room, cost_of=len)
        assert len(text) <= room and "amber-lynx" in text and "cobalt-heron" in text, room
        assert "Message 5: more detail on the quarterly figures. more detail" not in text  # the others shortened
    text = code_summary(req, summarized=[], retained=[], max_units=900, cost_of=len)
    section = text.split("6. ")[1]
    assert section.index("amber-lynx") < section.index("not shown)")  # left out after the opening ones
