"""Crash recovery through `make run`'s own processes, on the embedded default (LOOP-1, RUN-6).

SQLite, the filesystem broker and the launcher's worker, in a temporary var dir on a free
port; the model is the strict fake provider on loopback, reached by the worker over a
real socket. The stale interval is 3 s, so the heartbeat and reap period is 0.75 s.
Everything a user does goes through the HTTP API; the only other look is at the SQLite
file after the launcher has exited.
"""
from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from datetime import datetime

import pytest

from tests.fakes.fake_provider import FakeProvider, Hang, chat_stream
from tests.fakes.strict import StrictProvider
from tests.faults.launcher import MakeRun, stored_run
from tests.faults.support import wait_for

STALE = 3.0
PERIOD = STALE / 4
RECOVERY_ENV = {"AGENTLOOM_HEARTBEAT_STALE_SECONDS": str(int(STALE)), "AGENTLOOM_WORKER_RESTART_DELAY": "0.5"}
KEY = "sk-loopback-model-key-0123456789"
SLACK = 1.0  # scheduling and polling on a shared 2-core machine


class Model:
    """A calculator call first; once its result is in, the answer — or, while ``hang`` is
    set, silence: the answer the worker dies in the middle of, after its tool finished."""

    def __init__(self) -> None:
        self.hang = threading.Event()
        self.arrived = threading.Event()

    def __call__(self, request):
        messages = request.json["messages"]
        question = max(i for i, m in enumerate(messages) if m["role"] == "user")
        if not any(m["role"] == "tool" for m in messages[question:]):
            number = sum(1 for m in messages if m.get("tool_calls")) + 1  # call ids stay unique in the session
            return chat_stream(tool_calls=[{"id": f"calc-{number}", "name": "calculator",
                                            "arguments": json.dumps({"expression": "6*7"})}])
        if self.hang.is_set():
            self.arrived.set()
            return Hang(seconds=60)
        return chat_stream(["It is 42."])


@pytest.fixture
def model():
    script = Model()
    strict = StrictProvider(script, api_key=KEY)
    with FakeProvider(strict) as server:
        yield server, script, strict


def _answered(make_run: MakeRun, session_id: int, question: str) -> int:
    run_id = make_run.api.ask(session_id, question)
    run = make_run.api.wait_status(run_id, {"completed", "failed", "interrupted", "cancelled"}, timeout=30)
    assert run["status"] == "completed", (run, make_run.output())
    return run_id


def _ask_and_hang(make_run: MakeRun, session_id: int, script: Model) -> int:
    """A question whose tool finishes and whose answer then never comes."""
    script.arrived.clear()
    script.hang.set()
    run_id = make_run.api.ask(session_id, "And now?")
    assert script.arrived.wait(timeout=30), make_run.output()
    return run_id


def _resume_completes_without_repeating_the_tool(make_run: MakeRun, script: Model, run_id: int) -> None:
    script.hang.clear()
    assert make_run.api.call("POST", f"/api/v1/runs/{run_id}/resume")[0] == 202
    run = make_run.api.wait_status(run_id, {"completed", "failed", "interrupted", "cancelled"}, timeout=30)
    assert run["status"] == "completed" and run["attempt"] == 1, run
    types = [event["type"] for event in make_run.api.events(run_id)]
    assert types.count("tool_started") == 1 and types.count("tool_finished") == 1  # RUN-6: never run twice
    assert types.count("run_started") == 2 and types[-1] == "run_finished"


def _killed_worker_is_recovered(make_run: MakeRun, session: int, script: Model) -> None:
    """The worker SIGKILLed mid-answer, as the OOM killer does: the launcher restarts it,
    the web keeps serving, the run becomes resumable within the stale interval plus one
    reap period, and resuming it completes it."""
    run_id = _ask_and_hang(make_run, session, script)
    dead = make_run.worker_pid()
    os.kill(dead, signal.SIGKILL)
    killed = time.monotonic()
    replacement_seen = resumable_at = None
    while resumable_at is None:  # every poll is an HTTP request: the web keeps serving
        assert time.monotonic() - killed < 30, make_run.output()
        _, health = make_run.api.health()
        pids = {int(worker["name"].rsplit(":", 1)[1]) for worker in health["workers"]}
        if replacement_seen is None and pids - {dead}:
            replacement_seen = time.monotonic()
        run = make_run.api.run(run_id)
        if run["status"] != "running":
            resumable_at = time.monotonic()
        time.sleep(0.05)
    assert run["status"] == "interrupted" and run["error"]["retryable"] is True, run
    took = resumable_at - killed
    # Not before its heartbeat went stale (a lower bound: a busy machine only makes it
    # later); how soon after is the scheduler's business: the loop above waits for the state.
    assert took >= STALE - PERIOD - SLACK, (took, replacement_seen)
    assert "The worker stopped (killed by SIGKILL)" in make_run.output()
    _resume_completes_without_repeating_the_tool(make_run, script, run_id)
    assert make_run.worker_pid() != dead


def test_make_run_recovers_from_a_killed_worker_a_killed_process_group_and_ctrl_c(tmp_path, model):
    server, script, strict = model
    with MakeRun(tmp_path, env=RECOVERY_ENV) as make_run:
        make_run.wait_healthy()
        make_run.api.log_in()
        session = make_run.api.session_on(base_url=server.base_url, api_key=KEY, tools=["calculator"])
        first = _answered(make_run, session, "What is 6*7?")  # end to end through its own processes
        assert [r["kind"] for r in make_run.api.records(session) if r["run_id"] == first] == [
            "user", "assistant", "tool_result", "assistant", "run_status"]

        _killed_worker_is_recovered(make_run, session, script)
        _answered(make_run, session, "One more?")  # the session takes a new question

        orphan = _ask_and_hang(make_run, session, script)
        make_run.kill_group()  # launcher, web and worker at once
    assert stored_run(tmp_path, orphan)[0] == "running"  # the crash left it mid-flight

    with MakeRun(tmp_path, env=RECOVERY_ENV) as again:  # `make run` again, same var dir
        again.wait_healthy(web_only=True)
        again.api.log_in()
        again.wait_healthy()
        # Reaped by the worker's own housekeeping, with no new work asked of it (how soon is
        # the scheduler's business on a busy machine: the wait is for the state, not a time).
        run = again.api.wait_status(orphan, {"interrupted", "cancelled", "failed", "completed"}, timeout=60)
        assert run["status"] == "interrupted", run
        _resume_completes_without_repeating_the_tool(again, script, orphan)
        _answered(again, session, "Still there?")

        stopped = _ask_and_hang(again, session, script)
        assert again.interrupt() == 0  # Ctrl-C mid-answer stops web and worker
        assert "Traceback" not in again.output()
    status, error = stored_run(tmp_path, stopped)
    assert status == "interrupted" and error["retryable"] is True and "shut down" in error["message"]
    assert "Traceback" not in make_run.output()
    assert strict.rejections == []


def test_a_worker_that_crashes_at_start_is_restarted_with_back_off_then_make_run_gives_up_with_one_line(tmp_path):
    with MakeRun(tmp_path, env={"AGENTLOOM_FAULT_WORKER_EXIT_AT_START": "1",
                                "AGENTLOOM_WORKER_RESTART_DELAY": "0.2"}) as make_run:
        health_seen = []

        def web_answers():
            try:
                health_seen.append(make_run.api.health())
            except OSError:
                return None
            return True

        wait_for(web_answers, timeout=60, interval=0.2, what="the web server")
        code = make_run.process.wait(timeout=60)
        output = make_run.output()
    assert code == 1, output
    delays = [float(delay) for delay in re.findall(r"restarting it in ([0-9.]+) s", output)]
    assert delays == [0.2, 0.4, 0.8, 1.6], output  # doubling back-off
    assert len(re.findall(r"^The worker stopped \(exit status 3\)", output, re.MULTILINE)) == 4
    exits = [datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f") for stamp in re.findall(  # noqa: DTZ007  (gaps only)
        r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})[^\n]*AGENTLOOM_FAULT_WORKER_EXIT_AT_START is set", output)]
    assert len(exits) == 5, output  # five starts, no more: it stopped trying
    gaps = [(later - earlier).total_seconds() for earlier, later in zip(exits, exits[1:])]
    assert all(gap >= delay for gap, delay in zip(gaps, delays)), (gaps, delays)  # each wait was honoured
    giving_up = [line for line in output.splitlines() if "giving up" in line]
    assert giving_up == ["The worker crashed 5 times in a row, each within 60 s of starting (last: exit status 3); "
                         "giving up. Its log is above: fix the cause, then run `make run` again."]
    status, body = health_seen[0]
    assert status == 503 and body["worker"] == "none_seen"  # the web served meanwhile, and said why it was unhealthy
    with pytest.raises(OSError):
        make_run.api.health()  # and it stopped with the launcher
