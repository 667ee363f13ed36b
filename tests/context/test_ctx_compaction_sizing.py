"""CTX-31, CTX-34, CTX-36: a summary sized to what the compacted view can hold, shortened
only between sentences; the newest group kept verbatim; unsettled calls read from the
records, never from the view a compaction replaces.

The small-window cases are the ones a 2,048-token local model met: a summary asked for in
a fixed share of the window came out cut to a few hundred characters around an omission
note, which the model then repeated to the user; a compaction on resume summarized the
interrupted answer away, so the model started over.
"""

from __future__ import annotations

import math
import re

import pytest
from histories import build, histories
from hypothesis import event, given, settings
from hypothesis import strategies as st
from recordkit import assistant, call, record, result, run_status, user
from test_ctx_compaction import (
    BUDGET,
    EST,
    SYSTEM,
    WIDE,
    drive_recording,
    nine,
    request,
    rounds,
    scripted,
    short_rounds,
)
from test_ctx_compaction_properties import CI, scenarios, summarizer_for

from context import Budget, ContextPolicy, project_records, tool_call_states
from context.compaction import (
    EMPTY_SUMMARY,
    SECTION_TITLES,
    CompactionRequest,
    RuntimeState,
    SummaryReply,
    clean_summary,
    compact,
    continuation_message,
    continuation_summary,
    fit_summary,
    render_runtime_state,
)
from context.compaction.code_summary import CODE_SUMMARY_MARK
from context.compaction.planner import CHAT, split_groups
from context.records import INTERRUPTED_SUFFIX, UNKNOWN_OUTCOME_TEXT

# The window of the local model in the report: 2,048 tokens, 1,000 of them for the answer.
SMALL = Budget(context_window=2_048, max_output_tokens=1_000, safety_margin_tokens=64)
POLICY = ContextPolicy()
TOPICS = ("the Roman Empire", "photosynthesis", "the French Revolution", "black holes", "the printing press")


def conversation(count: int) -> list[dict]:
    messages: list[dict] = []
    for n in range(1, count + 1):
        topic = TOPICS[(n - 1) % len(TOPICS)]
        messages += [{"role": "user", "content": f"Question {n}: tell me about {topic}."},
                     {"role": "assistant", "content": f"Here is an account of {topic}. " + f"{topic.capitalize()} "
                      "matters for many reasons, and historians and scientists alike have studied it. " * 2}]
    return messages


def small_request(messages: list[dict], estimator, **options) -> CompactionRequest:
    return CompactionRequest(system=SYSTEM, messages=messages, sources=[(i, i) for i in range(1, len(messages) + 1)],
                             task_anchor=messages[-2], runtime_state=RuntimeState(), budget=SMALL, policy=POLICY,
                             estimator=estimator, tools=[], trigger="budget", max_summary_calls=4, **options)


def rambling(_call) -> SummaryReply:
    """A small model that ignores the length it was asked for, as the one in the report did."""
    body = "\n".join(f"{n}. {title}: " + " ".join(
        f"The history of {TOPICS[(n + k) % len(TOPICS)]} has been a long and storied tale, marked by turn {k}."
        for k in range(4)) for n, title in enumerate(SECTION_TITLES, start=1))
    return SummaryReply(f"<summary>\n{body}\n</summary>")


def words_in_order(part: str, whole: str) -> bool:
    """Every word of ``part`` is a whole word of ``whole``, in the same order."""
    remaining = iter(whole.split())
    return all(word in remaining for word in part.split())


# -- CTX-34: the summary's room ------------------------------------------------------------------


def test_ctx34_a_small_window_summary_gets_the_room_the_view_has_left(o200k) -> None:
    messages = conversation(10)
    result_, calls = drive_recording(compact(small_request(messages, o200k)), rambling)
    assert (result_.outcome, result_.reason) == ("compacted", "committed")
    metrics = result_.metrics
    target = SMALL.target_tokens(POLICY)
    # More than the fixed share of the window the summary used to get, all the room up to
    # the target; the view ends up just under it, not a hundred tokens short.
    assert metrics["summary_cap"] > int(SMALL.effective_input * 0.15)
    assert target - 40 < metrics["tokens_after_calibrated"] <= target and metrics["target_reached"]
    # The call's output limit comes from that room too, not from the run's 1,000 tokens.
    assert {c.max_output_tokens for c in calls} == {metrics["summary_output_limit"]}
    assert metrics["summary_cap"] < metrics["summary_output_limit"] < SMALL.max_output_tokens
    # Over its room: asked once more, tighter, then shortened between sentences.
    assert len(calls) == 2 and metrics["retries"] == 1
    first, second = (c.messages[1]["content"] for c in calls)
    bound = [int(re.search(r"in at most ([\d,]+) characters", p).group(1).replace(",", "")) for p in (first, second)]
    assert bound[1] < bound[0] and "An earlier summary of this conversation was" in second
    summary = result_.summary
    assert [line.split(":")[0] for line in summary.splitlines()] == [f"{n}. {t}" for n, t in
                                                                     enumerate(SECTION_TITLES, start=1)]
    assert all(line.endswith((":", ".")) for line in summary.splitlines())
    assert words_in_order(summary, clean_summary(rambling(None).text))  # nothing added: no omission note
    assert metrics["summary_cut_chars"] == len(clean_summary(rambling(None).text)) - len(summary)


def test_ctx34_a_summary_that_fits_is_taken_whole_in_one_call(o200k) -> None:
    result_, calls = drive_recording(compact(small_request(conversation(10), o200k)),
                                     lambda _call: SummaryReply(f"<summary>\n{nine(['Question 1'])}\n</summary>"))
    assert result_.outcome == "compacted" and len(calls) == 1
    assert result_.summary == nine(["Question 1"]) and result_.metrics["summary_cut_chars"] == 0


def test_ctx48_a_reply_stopped_by_its_output_limit_is_never_committed_and_is_asked_for_again() -> None:
    whole = nine(["Q1 please check the logs of service 1"]).replace(
        "9. Next step:\n(none)", "9. Next step:\nConfirm the fix. Then deploy it to the staging host.")
    cut = whole[:-len("ing host.")]
    answers = [SummaryReply(f"<summary>\n{cut}", truncated=True), SummaryReply(f"<summary>\n{whole}\n</summary>")]
    result_, calls = drive_recording(compact(request(rounds(8))), lambda _call: answers.pop(0))
    assert result_.outcome == "compacted" and len(calls) == 2  # stopped: asked once more, tighter
    assert calls[1].max_output_tokens >= calls[0].max_output_tokens  # and allowed to finish
    assert result_.summary == whole and result_.metrics["summary_source"] == "model"
    assert [v["problems"] for v in result_.metrics["summary_check"]] == [["cut"], []]


def test_ctx48_replies_stopped_every_time_give_the_summary_written_by_code() -> None:
    cut = nine(["Q1 please check the logs of service 1"]) + "\nThen deploy it to the stag"
    result_, calls = drive_recording(compact(request(rounds(8))),
                                     lambda _call: SummaryReply(f"<summary>\n{cut}", truncated=True))
    assert result_.outcome == "compacted" and len(calls) == 3
    assert result_.metrics["summary_source"] == "code" and "deploy it to the stag" not in result_.summary


THINKING = 600  # tokens a reasoning model spends thinking before it writes a word of its summary


def thinking_model(form: str):
    """A reasoning model: it thinks first, and a limit smaller than its thinking stops it
    before the summary, as the provider reports (``finish_reason`` ``length``): nothing in
    the content (the thinking is a separate field) or an unfinished ``<think>`` block."""
    def answer(summary_call) -> SummaryReply:
        if summary_call.max_output_tokens < THINKING + 200:
            thought = "<think>Let me weigh each topic in turn. " * 60 if form == "think tag" else ""
            return SummaryReply(thought, truncated=True)
        return SummaryReply(f"<think>{'Weighing the topics. ' * 40}</think>\n<summary>\n{nine(['Question 1'])}\n"
                            "</summary>")
    return answer


@pytest.mark.parametrize("form", ["empty content", "think tag"])
def test_ctx35_a_reasoning_model_stopped_while_thinking_is_given_the_whole_output_reserve(o200k, form) -> None:
    result_, calls = drive_recording(compact(small_request(conversation(10), o200k)), thinking_model(form))
    tight = result_.metrics["summary_output_limit"]
    assert tight < THINKING + 200  # the room the view has for a summary: a thinking model is stopped in it
    assert [c.max_output_tokens for c in calls] == [tight, SMALL.max_output_tokens]
    assert (result_.outcome, result_.reason) == ("compacted", "committed")
    assert result_.summary == nine(["Question 1"]) and result_.metrics["retries"] == 1


def test_ctx35_when_the_tighter_retry_fails_the_first_reply_is_shortened_instead() -> None:
    long = nine(["Q1 please check the logs of service 1"], current=" ".join(f"Step {k} went fine." for k in range(400)))
    answers = [SummaryReply(f"<summary>\n{long}\n</summary>"), SummaryReply(""), SummaryReply(None, "timeout")]
    result_, calls = drive_recording(compact(request(rounds(8))), lambda _call: answers.pop(0))
    assert result_.outcome == "compacted" and len(calls) == 3
    assert result_.summary.startswith("1. Primary requests and intent:") and result_.metrics["summary_cut_chars"]
    assert "went fine.\n9. Next step:\n(none)" in result_.summary
    assert EST.message(continuation_message(result_.summary)) <= result_.metrics["summary_cap"]


def test_ctx35_a_tighter_retry_never_takes_a_call_a_later_segment_needs() -> None:
    planned, _ = drive_recording(compact(request(short_rounds(30), budget=WIDE, max_calls=8)), scripted)
    segments = planned.metrics["planned_segments"]
    assert segments >= 3
    result_, calls = drive_recording(compact(request(short_rounds(30), budget=WIDE, max_calls=segments)), rambling)
    assert result_.outcome == "compacted" and len(calls) == segments and result_.metrics["retries"] == 0
    assert result_.metrics["summary_cut_chars"] > 0  # each over-long reply shortened instead


def test_ctx34_fitting_keeps_every_section_and_cuts_the_longest_first() -> None:
    text = "\n".join([f"1. Requests: {'Compare the regions. ' * 3}".strip(), "2. Concepts: (none)",
                      f"8. Current work: {'Reading the Q3 report. ' * 12}".strip(), "9. Next step: Ask for Q4."])
    fitted = fit_summary(text, max_units=170, cost_of=len)
    assert fitted.splitlines() == ["1. Requests: Compare the regions. Compare the regions.", "2. Concepts: (none)",
                                   "8. Current work: Reading the Q3 report. Reading the Q3 report.",
                                   "9. Next step: Ask for Q4."]
    # Without sections: the longest prefix of whole sentences; a single long sentence keeps whole words.
    assert fit_summary("One. Two three. Four five six.", max_units=16, cost_of=len) == "One. Two three."
    assert fit_summary("a bb ccc dddd eeeee", max_units=9, cost_of=len) == "a bb ccc"


def summary_of(users: list[str], *, current: str = "(none)", next_step: str = "(none)", files: str = "(none)") -> str:
    """A nine-section summary as a model writes it (``users`` one a line in section 6)."""
    bodies = {3: files, 6: "\n".join(users), 8: current, 9: next_step}
    return "\n".join(f"{n}. {title}:\n{bodies.get(n, '(none)')}" for n, title in enumerate(SECTION_TITLES, start=1))


def section_body(summary: str, number: int) -> str:
    found = re.search(rf"^{number}\. {SECTION_TITLES[number - 1]}:\n?(.*?)(?=^{number + 1}\. [A-Z]|\Z)", summary,
                      re.S | re.M)
    return found.group(1).strip() if found else ""


def test_ctx34_fitting_keeps_the_newest_user_messages_and_the_next_step() -> None:
    # Section 6 is the longest: before, its end went first, and with it the user's latest words.
    users = [f"{k}. Question {k}: tell me about topic {k}." for k in range(1, 31)]  # numbered, as models do
    next_step = 'Answer question 30, as the user asked: "tell me about topic 30". Then confirm with the user.'
    text = summary_of(users, next_step=next_step, current="Writing the answer about topic 29.")
    fitted = fit_summary(text, max_units=len(text) - 600, cost_of=len)
    assert len(fitted) <= len(text) - 600
    kept = section_body(fitted, 6).splitlines()
    assert kept == users[len(users) - len(kept):] and 10 < len(kept) < 30  # the newest, in order
    assert section_body(fitted, 9) == next_step  # "9. Question 9" inside section 6 is not section 9
    assert section_body(fitted, 8) == "Writing the answer about topic 29."
    titles = [f"{n}. {t}:" for n, t in enumerate(SECTION_TITLES, start=1)]
    assert [line for line in fitted.splitlines() if line in titles] == titles


def test_ctx34_the_next_step_is_shortened_only_when_every_other_section_is_down_to_one_sentence() -> None:
    next_step = " ".join(f"Then run check {k}." for k in range(60))  # the longest section
    files = " ".join(f"Changed file_{k}.py." for k in range(30))
    text = summary_of(["Q1 deploy it"], files=files, next_step=next_step)
    fitted = fit_summary(text, max_units=len(text) - 300, cost_of=len)
    assert section_body(fitted, 9) == next_step and len(section_body(fitted, 3)) < len(files)
    # With nothing else left to give but one sentence a section, it gives way from its end;
    # no section is emptied to keep it whole (CTX-34).
    base = len(summary_of(["Q1 deploy it"]))
    tight = fit_summary(text, max_units=base + 200, cost_of=len)
    assert section_body(tight, 9) == " ".join(f"Then run check {k}." for k in range(10))
    assert section_body(tight, 3) == "Changed file_0.py."
    # Emptying comes last: the other sections first, then the next step.
    tighter = fit_summary(text, max_units=base + 10, cost_of=len)
    assert (section_body(tighter, 3), section_body(tighter, 9)) == ("", "Then run check 0.")
    assert section_body(tighter, 6) == "Q1 deploy it"  # the user's latest summarized words go last of all


# -- CTX-31: the newest group ---------------------------------------------------------------------


def test_ctx31_an_interrupted_answer_stays_verbatim_even_over_the_retained_budget() -> None:
    partial = {"role": "assistant", "content": "Here is the comparison, region by region: "
               + "the north grew, the south held. " * 260 + INTERRUPTED_SUFFIX}
    messages = [*rounds(6), {"role": "user", "content": "Q7 compare every region"}, partial]
    assert EST.message(partial) > BUDGET.target_tokens(POLICY) - 2_000  # more than the retained budget
    result_, _ = drive_recording(compact(request(messages, anchor=messages[-2])), scripted)
    assert (result_.outcome, result_.reason) == ("compacted", "committed")
    assert result_.messages[-2:] == messages[-2:]  # the question and its interrupted answer, as they were
    assert not result_.metrics["target_reached"]  # below the threshold is what a commit needs


def test_ctx31_a_newest_answer_no_view_could_hold_is_summarized_rather_than_ending_the_run() -> None:
    huge = {"role": "assistant", "content": "Findings: " + "every region grew steadily. " * 420}
    messages = [*rounds(2), {"role": "user", "content": "Q3 compare"}, huge]
    assert EST.message(huge) > BUDGET.trigger_threshold(POLICY)
    result_, _ = drive_recording(compact(request(messages, anchor=messages[-2])), scripted)
    assert result_.outcome == "compacted" and huge not in result_.messages


# -- CTX-36: calls whose outcome nobody reported, from the records ------------------------------------


def test_ctx36_an_unknown_outcome_is_read_from_the_records_however_often_the_view_was_summarized() -> None:
    records = [
        user(1, "Pay the invoice", run="r1"),
        assistant(2, None, [call("pay 1!", "pay", '{"amount": 5}')], run="r1"),  # not a portable id
        run_status(3, run="r1", status="interrupted"),
        user(4, "Did it go through?", run="r2"),
        record(5, "compaction", {"messages": [{"role": "user", "content": "summary"}], "covered_seq": 4}, run="r2"),
        assistant(6, None, [call("c2", "book"), call("c3", "look")], run="r2"),
        result(7, "c2", "[unknown outcome] interrupted", run="r2", status="unknown"),
        result(8, "c3", "looked", run="r2"),
        assistant(9, None, [call("c4", "deploy")], run="r2"),
    ]
    states = tool_call_states(records, open_runs={"r2"})
    assert states.unknown == ({"id": "pay 1!", "name": "pay", "arguments": '{"amount": 5}'},
                              {"id": "c2", "name": "book", "arguments": "{}"})
    assert states.pending == ({"id": "c4", "name": "deploy", "arguments": "{}"},)
    # The checkpoint summarized the placeholder out of the view; the records still have it.
    assert UNKNOWN_OUTCOME_TEXT not in str(project_records(records, open_runs={"r2"}))
    more = [*records, record(10, "compaction", {"messages": [{"role": "user", "content": "s2"}], "covered_seq": 9},
                             run="r2")]
    assert tool_call_states(more, open_runs={"r2"}) == states


def test_ctx36_after_an_interruption_a_call_is_one_call_in_one_state() -> None:
    records = [user(1, "Deploy", run="r1"), assistant(2, None, [call("toolu 01", "deploy")], run="r1"),
               run_status(3, run="r1", status="interrupted")]
    # The run is the open one (a compaction asked for on it), but it ended: unknown, not pending.
    states = tool_call_states(records, open_runs={"r1"})
    assert (states.pending, states.unknown) == ((), ({"id": "toolu 01", "name": "deploy", "arguments": "{}"},))
    block = render_runtime_state(RuntimeState(pending_calls=states.pending, unknown_calls=states.unknown))
    assert block["content"].count("deploy") == 1 and "toolu 01" in block["content"]
    # Resumed, it is pending again (RUN-6 settles it first); a cut stream's call never ran.
    resumed = [*records, run_status(4, run="r1", status="resumed"),
               assistant(5, "Deploy", [call("c9", "deploy", '{"a"')], run="r1", partial=True)]
    states = tool_call_states(resumed, open_runs={"r1"})
    assert (states.pending, states.unknown) == (({"id": "toolu 01", "name": "deploy", "arguments": "{}"},), ())


# -- properties ------------------------------------------------------------------------------------


@settings(max_examples=400 if CI else 100, deadline=None)
@given(scenario=scenarios())
def test_ctx31_for_any_view_the_newest_group_stays_verbatim_when_a_view_can_hold_it(scenario) -> None:
    req, style = scenario
    outcome, _ = drive_recording(compact(req), summarizer_for(style))
    if outcome.outcome != "compacted":
        return
    costs = [EST.message(m) for m in req.messages]
    newest = split_groups(req.messages, req.sources, costs)[-1]
    if newest.kind != CHAT:
        return
    group = req.messages[newest.start:newest.stop]
    anchor_cost = EST.message(req.task_anchor) if req.task_anchor is not None else 0
    state = render_runtime_state(req.runtime_state)
    fixed = EST.request([SYSTEM], req.tools) + anchor_cost + (EST.message(state) if state else 0)
    room = (math.ceil(req.budget.trigger_threshold(req.policy)) - 1 - fixed
            - EST.message(continuation_message(EMPTY_SUMMARY, restated_anchor=True)))
    cost = newest.cost - (anchor_cost if req.task_anchor in group else 0)
    has_tools = any(m["role"] == "tool" for m in group)
    event("newest kept over the retained budget" if cost > req.budget.target_tokens(req.policy) - fixed
          and cost <= room else "newest within budget or too large")
    if cost <= room:
        assert outcome.messages[-len(group):] == group
    elif has_tools:  # cut to fit (CTX-42) where its cut outputs fit the room, else summarized: never lost
        tail = outcome.messages[-len(group):]
        kept = [m["role"] for m in tail] == [m["role"] for m in group] and tail[0] == group[0]
        covered = outcome.metrics.get("covered")
        seqs = [source for source in req.sources[newest.start:newest.stop] if source is not None]
        # Summarized: its records are in the covered range; a view with no record ranges
        # (sources all None) says so by retaining nothing after the summary.
        summarized = (bool(covered) and all(covered[0] <= first and last <= covered[1] for first, last in seqs)
                      if seqs else outcome.metrics["retained_messages"] == 0)
        event("newest tool group cut to fit" if kept else "newest tool group summarized: no cut fits")
        assert kept or summarized


@settings(max_examples=400 if CI else 100, deadline=None)
@given(scenario=scenarios())
def test_ctx34_for_any_view_the_summary_holds_only_what_the_summarizer_wrote(scenario) -> None:
    req, style = scenario
    summarize = summarizer_for(style)
    written: list[str] = []

    def recording(summary_call):
        reply = summarize(summary_call)
        written.append(clean_summary(reply.text))
        return reply

    outcome, _ = drive_recording(compact(req), recording)
    if outcome.outcome != "compacted":
        return
    summary = continuation_summary(outcome.messages[0])
    if outcome.metrics["summary_source"] == "code":  # CTX-48: none passed the check; code wrote it, and says so
        assert CODE_SUMMARY_MARK in summary
        return
    event(f"cut: {outcome.metrics['summary_cut_chars'] > 0}")
    vocabulary = set(" ".join(written).split())
    earlier = {w for m in req.messages if m["role"] == "user" and isinstance(m["content"], str)
               for w in m["content"].split()}  # an earlier summary carried forward
    assert set(summary.split()) <= vocabulary | earlier  # no omission note, no marker, no cut word
    assert "omitted" not in summary and "shortened" not in summary


sentence = st.text(alphabet="abcdefgh xyz", min_size=1, max_size=40).map(str.strip).filter(bool)
summaries = st.lists(st.tuples(st.booleans(), st.lists(sentence, min_size=1, max_size=6)), min_size=1, max_size=12)


@settings(max_examples=400 if CI else 200, deadline=None)
@given(parts=summaries, max_units=st.integers(1, 600))
def test_ctx34_for_any_text_fitting_keeps_whole_words_in_order_within_the_bound(parts, max_units) -> None:
    lines = [(f"{n}. Title {n}: " if numbered else "") + ". ".join(found) + "."
             for n, (numbered, found) in enumerate(parts, start=1)]
    text = "\n".join(lines)
    fitted = fit_summary(text, max_units=max_units, cost_of=len)
    assert len(fitted) <= max_units
    assert words_in_order(fitted, text)
    if len(text) <= max_units:
        assert fitted == text


@settings(max_examples=400 if CI else 200, deadline=None)
@given(events=histories())
def test_ctx36_for_any_history_the_unsettled_calls_are_the_ones_the_view_marks(events) -> None:
    # The view marks a call unknown with the placeholder (CTX-3) or its result's status (RUN-6).
    records = [r if r["kind"] != "compaction" else {**r, "kind": "label"} for r in build(events).records]
    states = tool_call_states(records)

    def placeholders(open_runs=None) -> int:
        view = project_records(records, open_runs=open_runs)
        return sum(1 for m in view if m["role"] == "tool" and m["content"] == UNKNOWN_OUTCOME_TEXT)

    answered_unknown = sum(1 for m in project_records(records) if m["role"] == "tool"
                           and str(m["content"]).startswith(("[tool status: unknown]", "[{'type': 'text', 'text': "
                                                                                       "'[tool status: unknown]")))
    assert len(states.unknown) == placeholders() + answered_unknown
    # Close every run: the calls still pending get the placeholder too, and no other call does.
    assert len(states.pending) == placeholders(open_runs=set()) - placeholders()
    # A checkpoint that summarizes everything changes nothing in what is still unsettled.
    last = records[-1] if records else {"seq": 0, "run": "r1"}
    checkpoint = record(last["seq"] + 1, "compaction", {"messages": [{"role": "user", "content": "s"}],
                                                        "covered_seq": last["seq"]}, run=last["run"])
    assert tool_call_states([*records, checkpoint]) == states


@settings(max_examples=400 if CI else 100, deadline=None)
@given(sizes=st.lists(st.integers(0, 30), min_size=9, max_size=9), users=st.integers(0, 40),
       cut=st.floats(0.05, 1.0))
def test_ctx34_for_any_nine_section_summary_fitting_keeps_the_newest_users_and_the_next_step(sizes, users, cut) -> None:
    bodies = {n: " ".join(f"S{n} fact {k}." for k in range(size)) or "(none)" for n, size in enumerate(sizes, 1)}
    lines = [f"- Q{k} asked about item {k}." for k in range(1, users + 1)] or ["(none)"]
    bodies[6] = "\n".join(lines)
    text = "\n".join(f"{n}. {title}:\n{bodies[n]}" for n, title in enumerate(SECTION_TITLES, start=1))
    max_units = int(len(text) * cut)
    fitted = fit_summary(text, max_units=max_units, cost_of=len)
    assert len(fitted) <= max_units and words_in_order(fitted, text)
    newest = lines[-1]

    def least(*keep: int) -> int:
        """The length of the titles with only these sections' protected text."""
        shown = {6: newest, 9: bodies[9]}
        return len("\n".join(f"{n}. {title}:" + (f"\n{shown[n]}" if n in keep else "")
                             for n, title in enumerate(SECTION_TITLES, start=1)))

    if least(6) <= max_units:  # the user's latest summarized words go last of all
        kept = section_body(fitted, 6).splitlines()
        assert kept and kept == lines[len(lines) - len(kept):]  # the newest, in order
    # Every other section down to its first sentence before the next step gives way (CTX-34).
    firsts = {n: (newest if n == 6 else bodies[n].split(". ")[0].rstrip(".") + "." if bodies[n] != "(none)"
                  else bodies[n]) for n in range(1, 10)}
    firsts[9] = bodies[9]
    if len("\n".join(f"{n}. {title}:\n{firsts[n]}" for n, title in enumerate(SECTION_TITLES, 1))) <= max_units:
        event("section 9 whole")
        assert section_body(fitted, 9) == bodies[9]
