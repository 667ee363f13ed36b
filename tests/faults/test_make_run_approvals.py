"""The product SIGKILLed around an approved call, through `make run`'s own processes
(TOOL-8, TOOL-9, RUN-6).

The launcher, its web server and its worker are killed at once (``MakeRun.kill_group``)
while a run waits for a person: `make run` again, and the run still waits, untouched by the
new worker's reaper. Then, approved, its call reaches the server and the worker is killed
before the answer (the launcher starts another): the call is an unknown outcome, never
sent a second time. (Two launches, not three: each costs seconds of CI.)
SQLite and the filesystem broker (the embedded default); everything a person does goes
through the HTTP API. The tool server counts its effects in a file
(``tests.fakes.counting_server``); ``send_payment`` has no hints, so it waits by default.
"""
from __future__ import annotations

import json
import os
import signal

import pytest

from tests.fakes.counting_server import EFFECTS_FILE_ENV, CountingServer, effects_read
from tests.fakes.fake_provider import FakeProvider, chat_stream
from tests.fakes.strict import StrictProvider
from tests.faults.approvals import unpaired
from tests.faults.launcher import MakeRun, stored_run
from tests.faults.support import wait_for

STALE = 3.0
RECOVERY_ENV = {"AGENTLOOM_HEARTBEAT_STALE_SECONDS": str(int(STALE)), "AGENTLOOM_WORKER_RESTART_DELAY": "0.5"}
KEY = "sk-loopback-model-key-0123456789"
ENDED = {"completed", "failed", "interrupted", "cancelled"}


class Model:
    """The payment once per question; once its result is in, the answer."""

    def __init__(self) -> None:
        self.requests: list[list[dict]] = []

    def __call__(self, request):
        messages = request.json["messages"]
        self.requests.append(messages)
        if messages[-1]["role"] == "tool":
            return chat_stream(["I could not confirm the payment; please check the account."])
        return chat_stream(tool_calls=[{"id": "pay-1", "name": "pay__send_payment",
                                        "arguments": json.dumps({"to": "ACME", "amount": 120.0})}])


@pytest.fixture
def world(tmp_path, monkeypatch):
    effects = tmp_path / "effects.jsonl"
    monkeypatch.setenv(EFFECTS_FILE_ENV, str(effects))
    script = Model()
    strict = StrictProvider(script, api_key=KEY)
    with FakeProvider(strict) as model, CountingServer() as server:
        yield model, script, strict, server, effects


def _restarted(var_dir) -> MakeRun:
    make_run = MakeRun(var_dir, env=RECOVERY_ENV)
    make_run.wait_healthy()
    make_run.api.log_in()
    return make_run


def test_make_run_killed_while_a_run_waits_keeps_it_waiting_and_its_approved_call_is_made_once(tmp_path, world):
    model, script, strict, server, effects = world
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    with _restarted(var_dir) as make_run:
        make_run.api.ok("POST", "/api/v1/tool-servers", {"name": "pay", "url": server.url})
        session = make_run.api.session_on(base_url=model.base_url, api_key=KEY, tools=["pay.send_payment"])
        run_id = make_run.api.ask(session, "Pay ACME's invoice")
        make_run.api.wait_status(run_id, {"waiting", *ENDED}, timeout=60)
        make_run.kill_group()  # launcher, web and worker at once, while the run waits
    assert stored_run(var_dir, run_id)[0] == "waiting" and effects_read(effects) == []

    with _restarted(var_dir) as again:
        run = again.api.run(run_id)  # the new worker's housekeeping has run: it leaves a waiting run alone
        assert run["status"] == "waiting", run
        (waiting,) = run["waiting_for"]
        server.hold.add("send_payment")
        decided = again.api.ok("POST", f"/api/v1/runs/{run_id}/approvals",
                               {"call_id": waiting["call_id"], "decision": "approve"})
        assert decided["approval"]["status"] == "approved"
        wait_for(lambda: effects_read(effects), timeout=60, what="the payment at the server")
        dead = again.worker_pid()
        os.kill(dead, signal.SIGKILL)  # the payment is made; its answer is held
        server.hold.clear()
        run = again.api.wait_status(run_id, ENDED, timeout=60)  # reaped by the next worker's housekeeping
        assert run["status"] == "interrupted", run
        assert again.api.call("POST", f"/api/v1/runs/{run_id}/resume")[0] == 202
        run = again.api.wait_status(run_id, ENDED, timeout=60)
        assert run["status"] == "completed", (run, again.output())
        assert again.worker_pid() != dead
        results = [r for r in again.api.records(session) if r["kind"] == "tool_result"]
    assert len(effects_read(effects)) == 1  # paid once: never sent again
    assert [r["message"]["status"] for r in results] == ["unknown"], results
    assert "may or may not" in results[0]["message"]["content"]
    assert all(unpaired(messages) == [] for messages in script.requests) and strict.rejections == []
