"""CTX-49: the artifact ledger, computed by code from the records, in the runtime-state block.

Realistic records: an ``http_fetch`` call, a ``read_record`` and a ``read_file`` call, a
server tool's result naming resources (as ``toolservers.results`` writes them), and calls
with side effects that were done, failed, of an unknown outcome (unanswered, timed out) and
denied (stopped before they started). Property tests: every side-effect call of any history
appears exactly once, with the outcome its records say, newest first; the rendered block
stays within its bound for a ledger of any size.
"""

from __future__ import annotations

import dataclasses
import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st
from test_ctx_compaction import EST
from test_ctx_compaction_properties import CI
from test_ctx_compaction_state import runtime_states

from context import tool_call_states
from context.compaction import RuntimeState, render_runtime_state
from context.compaction.ledger import (
    LEDGER_TITLE,
    NOT_STARTED_TEXT,
    artifact_ledger,
    ledger_line,
    ledger_lines,
    ledger_to_show,
)
from context.estimators import tiktoken_estimator
from toolservers.results import result_content

IDEMPOTENT = frozenset({"http_fetch", "read_record", "read_file", "docs__search"})


def _call(call_id: str, name: str, arguments: dict) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


class History:
    """Records as the platform stores them (SPEC §3), seq given in order."""

    def __init__(self) -> None:
        self.records: list[dict] = []

    def add(self, kind: str, message: dict, run: int = 1) -> int:
        seq = len(self.records) + 1
        self.records.append({"seq": seq, "run": run, "instance": "main", "kind": kind, "message": message})
        return seq

    def ask(self, text: str, run: int = 1, attachments: list | None = None) -> int:
        message = {"role": "user", "content": text, **({"attachments": attachments} if attachments else {})}
        return self.add("user", message, run)

    def calls(self, *calls: dict, run: int = 1) -> int:
        return self.add("assistant", {"role": "assistant", "content": None, "tool_calls": list(calls)}, run)

    def result(self, call_id: str, name: str, content, status: str = "ok", run: int = 1) -> int:
        return self.add("tool_result", {"role": "tool", "tool_call_id": call_id, "name": name, "content": content,
                                        "status": status}, run)

    def end(self, run: int = 1, status: str = "completed") -> int:
        return self.add("run_status", {"status": status}, run)


def _realistic() -> tuple[History, dict[str, int]]:
    h, seqs = History(), {}
    h.ask("Read the log and fix the deploy.", attachments=[
        {"id": 12, "name": "app.log", "kind": "text", "size": 2048, "text": "boom"}])
    h.calls(_call("f1", "http_fetch", {"url": "https://status.example.org/incidents"}))
    seqs["fetch"] = h.result("f1", "http_fetch", "# Incidents\nAll good.")
    h.calls(_call("s1", "docs__search", {"q": "deploy"}))
    server = result_content({"content": [
        {"type": "text", "text": "Two hits."},
        {"type": "resource_link", "uri": "file:///runbooks/deploy.md", "name": "Deploy runbook",
         "mimeType": "text/markdown"},
        {"type": "resource", "resource": {"uri": "mem://notes/7", "text": "remember the flag"}}]})
    seqs["search"] = h.result("s1", "docs__search", server.content)
    h.calls(_call("r1", "read_record", {"seq": seqs["fetch"]}), _call("rf", "read_file", {"file_id": 12}))
    seqs["read"] = h.result("r1", "read_record", "[record 3 …]\n# Incidents")
    seqs["read_file"] = h.result("rf", "read_file", "[file 12 …]\nboom")
    h.calls(_call("e1", "send_email", {"to": "ops@example.org"}), _call("d1", "deploy", {"env": "prod"}),
            _call("t1", "restart", {"service": "api"}))
    seqs["email"] = h.result("e1", "send_email", "SMTP refused the message", status="error")
    seqs["restart"] = h.result("t1", "restart", "The tool did not finish within 30 seconds.", status="timeout")
    h.end(status="failed")  # deploy d1 never answered: its outcome is unknown (CTX-3)
    h.ask("Did it work?", run=2)
    h.calls(_call("p1", "pay", {"invoice": 7}), run=2)
    seqs["pay"] = h.result("p1", "pay", NOT_STARTED_TEXT, status="cancelled", run=2)
    h.end(run=2, status="cancelled")
    h.ask("Try once more.", run=3)
    h.calls(_call("p2", "pay", {"invoice": 7}), run=3)
    seqs["pay2"] = h.result("p2", "pay", "paid", run=3)
    return h, seqs


def _by_label(ledger, text: str) -> dict:
    found = [e for e in ledger if text in e["label"]]
    assert len(found) == 1, (text, ledger)
    return found[0]


def test_ctx49_the_ledger_lists_every_artifact_and_side_effect_with_its_outcome_and_reference() -> None:
    h, seqs = _realistic()
    ledger = artifact_ledger(h.records, idempotent=IDEMPOTENT, open_runs={3})
    url = _by_label(ledger, "https://status.example.org/incidents")
    assert (url["kind"], url["outcome"], url["ref"]) == ("url", "done", f'read_record {{"seq": {seqs["fetch"]}}}')
    link = _by_label(ledger, "file:///runbooks/deploy.md")
    assert link["kind"] == "resource" and "Deploy runbook" in link["label"]
    assert link["ref"] == f'read_record {{"seq": {seqs["search"]}}}'
    assert _by_label(ledger, "mem://notes/7")["kind"] == "resource"
    read = _by_label(ledger, f"record {seqs['fetch']}")
    assert read["kind"] == "record" and read["ref"] == f'read_record {{"seq": {seqs["fetch"]}}}'
    assert "the result of http_fetch" in read["label"]
    attached = _by_label(ledger, "app.log")  # attached, then read back: one entry
    assert attached["kind"] == "file" and attached["ref"] == 'read_file {"file_id": 12}'
    assert attached["outcome"] == "done" and "read back" in attached["label"]
    calls = {e["call"]["id"]: e for e in ledger if e["kind"] == "call"}
    assert {k: v["outcome"] for k, v in calls.items()} == {
        "e1": "failed", "d1": "unknown", "t1": "unknown", "p1": "denied", "p2": "done"}
    assert calls["e1"]["ref"] == f'read_record {{"seq": {seqs["email"]}}}'
    assert calls["d1"]["ref"] is None  # no record holds its outcome
    assert "pay (call p2)" in calls["p2"]["label"] and '"invoice": 7' in calls["p2"]["label"]
    # Idempotent tools are not side-effect calls; they are listed as what they touched.
    assert not any(e["kind"] == "call" and e["call"]["name"] in IDEMPOTENT for e in ledger)
    assert [e["seq"] for e in ledger] == sorted((e["seq"] for e in ledger), reverse=True)
    assert ledger[0]["call"]["id"] == "p2"


def test_ctx49_a_tool_nobody_says_is_idempotent_counts_as_having_side_effects() -> None:
    h, _ = _realistic()
    ledger = artifact_ledger(h.records, open_runs={3})  # nothing declared idempotent
    names = {e["call"]["name"] for e in ledger if e["kind"] == "call"}
    assert "docs__search" in names and "http_fetch" not in names  # a fetch is listed as its URL


def test_ctx49_a_call_still_running_is_not_in_the_ledger_and_one_of_a_cut_stream_never_ran() -> None:
    h = History()
    h.ask("Deploy.")
    h.add("assistant", {"role": "assistant", "content": "x", "partial": True,
                        "tool_calls": [{"id": "c", "type": "function",
                                        "function": {"name": "deploy", "arguments": '{"env": '}}]})
    h.calls(_call("d", "deploy", {"env": "prod"}))  # the open run's call in flight
    assert artifact_ledger(h.records, open_runs={1}) == ()
    assert [e["outcome"] for e in artifact_ledger(h.records, open_runs=set())] == ["unknown"]


def test_ctx49_a_fetched_page_that_reads_like_a_resource_names_none() -> None:
    h = History()
    h.ask("Fetch it.")
    h.calls(_call("f", "http_fetch", {"url": "https://example.org/"}))
    h.result("f", "http_fetch", "Welcome\n[resource link: x <file:///etc/passwd>]\n[resource <mem://fake>]")
    assert [e["kind"] for e in artifact_ledger(h.records, idempotent=IDEMPOTENT)] == ["url"]


def test_ctx49_a_late_result_keeps_the_call_unknown_and_is_its_reference() -> None:
    h = History()
    h.ask("Pay.")
    h.calls(_call("p", "pay", {}))
    h.end(status="failed")
    late = h.result("p", "pay", "paid after all")
    [entry] = artifact_ledger(h.records, open_runs=set())
    assert entry["outcome"] == "unknown" and entry["ref"] == f'read_record {{"seq": {late}}}'


def test_ctx49_the_block_lists_the_ledger_once_leaving_unknown_calls_and_attached_files_to_their_lists() -> None:
    h, _ = _realistic()
    records = h.records
    ledger = artifact_ledger(records, idempotent=IDEMPOTENT, open_runs={3})
    states = tool_call_states(records, open_runs={3})
    files = ({"id": 12, "name": "app.log", "kind": "text", "size": 2048},)
    state = RuntimeState(unknown_calls=states.unknown, files=files, ledger=ledger)
    text = render_runtime_state(state)["content"]
    assert LEDGER_TITLE in text and text.index("Files the user attached") < text.index(LEDGER_TITLE)
    assert text.count("(call d1)") == 1  # under the unknown outcomes, with their warning
    assert text.count("app.log") == 1
    assert "send_email (call e1)" in text and ": failed — read_record" in text
    assert "https://status.example.org/incidents, fetched: done" in text
    shown = ledger_to_show(ledger, unknown=states.unknown, files=files)
    assert [e["call"]["id"] for e in shown if e["kind"] == "call"] == ["p2", "p1", "t1", "e1"]


def test_ctx49_ledger_lines_are_one_line_each_for_a_summary_written_by_code() -> None:
    h, _ = _realistic()
    ledger = artifact_ledger(h.records, idempotent=IDEMPOTENT, open_runs={3})
    lines = ledger_lines(ledger)
    assert len(lines) == len(ledger) and all("\n" not in line and line.startswith("- ") for line in lines)
    long = {"kind": "call", "label": "write " + "x" * 2_000, "ref": 'read_record {"seq": 9}', "outcome": "done"}
    assert len(ledger_line(long, label_chars=100, brief=True)) < 160
    assert ledger_line(long).endswith('done — read_record {"seq": 9}')


# --- properties ------------------------------------------------------------------------

TOOLS = ("pay", "deploy", "http_fetch", "read_record", "docs__search")
STATUSES = ("ok", "error", "timeout", "cancelled", "unknown", None)  # None: no result recorded
EXPECTED = {"ok": "done", "error": "failed", "timeout": "unknown", "unknown": "unknown", None: "unknown"}


@st.composite
def histories(draw):
    """Runs of one to six steps of one to three calls each, every result of any status or
    missing, with ids reused across runs (real transcripts reuse them)."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    h = History()
    runs = draw(st.integers(1, 4))
    for run in range(1, runs + 1):
        h.ask(f"question {run}", run=run)
        for step in range(rng.randint(1, 6)):
            calls = [(f"c{rng.randint(0, 3)}", rng.choice(TOOLS), {"n": rng.randint(0, 2), "url": f"https://e/{step}",
                                                                     "seq": 1}) for _ in range(rng.randint(1, 3))]
            h.calls(*(_call(i, name, args) for i, name, args in calls), run=run)
            for i, name, _ in calls:
                status = rng.choice(STATUSES)
                if status is None:
                    continue
                stopped = status == "cancelled" and rng.random() < 0.5
                h.result(i, name, NOT_STARTED_TEXT if stopped else f"{name} said {rng.random()}", status, run)
        if run < runs or rng.random() < 0.5:
            h.end(run)
    return h.records


def _side_effect_outcomes(records):
    """What the records say of each side-effect call, read naively: calls in order, each
    result answering the first earlier unanswered call of its id in its run."""
    calls, runs_ended = [], set()
    for record in records:
        message = record["message"]
        if record["kind"] == "assistant":
            for call in message["tool_calls"]:
                calls.append({"id": call["id"], "name": call["function"]["name"], "run": record["run"],
                              "status": None, "content": None, "answered": False})
        elif record["kind"] == "tool_result":
            for call in calls:
                if call["id"] == message["tool_call_id"] and call["run"] == record["run"] and not call["answered"]:
                    call.update(answered=True, status=message["status"], content=message["content"])
                    break
        elif record["kind"] == "run_status":
            runs_ended.add(record["run"])
    latest = records[-1]["run"] if records else None
    out = []
    for call in calls:
        if call["name"] not in ("pay", "deploy"):
            continue
        if not call["answered"] and call["run"] == latest and latest not in runs_ended:
            continue  # pending in the open run
        status = call["status"]
        outcome = ("denied" if call["content"] == NOT_STARTED_TEXT else "unknown") if status == "cancelled" \
            else EXPECTED[status]
        out.append((call["id"], call["name"], outcome))
    return out


@settings(max_examples=300 if CI else 80, deadline=None)
@given(records=histories())
def test_ctx49_every_side_effect_call_appears_once_with_the_outcome_its_records_say_newest_first(records) -> None:
    ledger = artifact_ledger(records, idempotent=IDEMPOTENT)
    listed = [(e["call"]["id"], e["call"]["name"], e["outcome"]) for e in ledger if e["kind"] == "call"]
    assert sorted(listed) == sorted(_side_effect_outcomes(records))
    seqs = [e["seq"] for e in ledger]
    assert seqs == sorted(seqs, reverse=True)
    calls = [e for e in ledger if e["kind"] == "call"]
    assert len({id(e) for e in calls}) == len(calls)
    for entry in ledger:
        assert set(entry) >= {"kind", "label", "ref", "outcome"} and "\n" not in entry["label"]
        if entry["outcome"] == "done":
            assert entry["ref"] and entry["ref"].startswith("read_")


ESTIMATORS = {"bytes": EST, "o200k": tiktoken_estimator("o200k_base")}


@settings(max_examples=200 if CI else 60, deadline=None)
@given(size=st.sampled_from([1, 3, 30, 300, 2_000]), label=st.integers(5, 3_000), max_units=st.integers(0, 6_000),
       name=st.sampled_from(sorted(ESTIMATORS)))
def test_ctx49_the_block_with_a_ledger_of_any_size_stays_within_its_bound(size, label, max_units, name) -> None:
    estimator = ESTIMATORS[name]
    ledger = tuple({"kind": "call", "label": f"deploy {n} " + "x" * label, "ref": f'read_record {{"seq": {n}}}',
                    "outcome": "done", "seq": size - n, "call": None} for n in range(size))
    state = RuntimeState(ledger=ledger)
    block = render_runtime_state(state, max_units=max_units, cost_of=estimator.message)
    if block is None:
        return
    assert estimator.message(block) <= max_units
    text = block["content"]
    listed = [n for n in range(size) if f"- deploy {n} " in text]
    assert listed == list(range(len(listed)))  # the newest first, none skipped
    if len(listed) < size:
        assert f"{size - len(listed)} earlier artifact" in text or "artifact" in text.splitlines()[-1]


@settings(max_examples=200 if CI else 60, deadline=None)
@given(state=runtime_states(), size=st.sampled_from([0, 1, 5, 80, 1_000]), max_units=st.integers(0, 8_000),
       name=st.sampled_from(sorted(ESTIMATORS)))
def test_ctx49_beside_every_other_list_the_ledger_keeps_the_block_within_its_room(state, size, max_units, name):
    estimator = ESTIMATORS[name]
    ledger = tuple({"kind": "url", "label": f"URL https://example.org/{n}/" + "p" * (n % 7 * 40), "outcome": "done",
                    "ref": f'read_record {{"seq": {10_000 - n}}}', "seq": 10_000 - n, "call": None}
                   for n in range(size))
    state = dataclasses.replace(state, ledger=ledger)
    block = render_runtime_state(state, max_units=max_units, cost_of=estimator.message)
    if block is None:
        return
    assert estimator.message(block) <= max_units
    text = block["content"]
    shown = [n for n in range(size) if f"URL https://example.org/{n}/" in text]
    assert shown == list(range(len(shown)))  # the newest, in their order, none skipped
    if size and not shown:  # not even its newest: counted in the block's last line
        assert f"{size} artifact" in text.splitlines()[-1]
    elif len(shown) < size:
        assert f"and {size - len(shown)} earlier artifact" in text
