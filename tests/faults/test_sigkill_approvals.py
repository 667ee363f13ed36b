"""An approved call runs exactly once, whatever kills the worker (TOOL-9, TOOL-5, RUN-6).

The kill matrix: a real Celery worker process (``tests.faults.worker_main``) on PostgreSQL
is SIGKILLed at each point of an approved call's life, for the three kinds of server tool
at once — the model asks for ``lookup`` (read-only), ``set_flag`` (idempotent) and
``send_payment`` (destructive) in one step, and all three wait (policy ``always``). Then a
fresh worker finishes the run (the reaper, a resume, the loop; in the test's process).
Each case checks, with a server that writes one line per effect to a file: every call
took effect once (at most once where the kill fell between its "started" mark and the
server); a call whose result was never stored is an ``unknown`` outcome;
the run ends with the model's answer; no request the model received carried a call
without its result.

The points, in the order a call lives through them:

- ``before_request_stored``: inside the transaction that stores the waiting calls — the
  resumed run must ask again, never run a call nobody approved;
- ``requeued``: the decisions are stored and the run re-queued; the worker that received
  it dies before claiming it;
- ``call_sent``, for each tool: the server has done that call's effect and holds its answer;
- ``result_uncommitted``, for each tool: its answer arrived and is being written: the kill
  rolls the write back;
- ``result_committed``, for each tool: right after its result's commit;
- ``next_model_call``: while the model is answering the results.

One worker process a case (12 cases); the run reaches its wait in the test's process where
the point comes after it (cheaper than a second worker, and the same code). A worker killed
while the run waits — before any decision — is ``test_a_waiting_run_survives_a_worker_restart``;
the whole product killed, ``test_make_run_approvals.py``.
"""
from __future__ import annotations

from collections import Counter

import pytest

from runloop.loop import run_execute
from runloop.reaper import runs_reap_interrupted
from sessions.models import Run, SessionMessage, ToolApproval
from sessions.services.questions import question_ask
from tests.fakes.counting_server import TOOLS
from tests.faults.approvals import (
    FUNCTIONS,
    PayModel,
    assert_exactly_once,
    at_the_kill,
    decide_all,
    effect_counts,
    effects,
    finish_elsewhere,
)
from tests.faults.support import FaultWorker, event_seqs_are_gap_free, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]

APPROVALS_TABLE = ToolApproval._meta.db_table
RECORDS_TABLE = SessionMessage._meta.db_table

# The points a step's calls pass together: (the worker's fault hooks, what the kill left
# of every call).
GROUP_POINTS = {
    "before_request_stored": ({"AGENTLOOM_FAULT_KILL_ON_INSERT": APPROVALS_TABLE}, "not_started"),
    "requeued": ({"AGENTLOOM_FAULT_KILL_BEFORE_CLAIM": "1"}, "not_started"),
    "next_model_call": ({}, "stored"),
}
# The points each call passes on its own, killed at the chosen tool's (the calls are made in
# call order, so its position counts the inserts and events before it): (hooks, what the
# kill left of that call). What each call then ends as follows from what the kill left of
# it (``approvals.ENDS``).
CALL_POINTS = {
    "call_sent": (lambda n: {}, "sent"),
    "result_uncommitted": (lambda n: {"AGENTLOOM_FAULT_KILL_ON_INSERT": f"{RECORDS_TABLE}:tool_result#{n}"}, "sent"),
    "result_committed": (lambda n: {"AGENTLOOM_FAULT_KILL_AT": f"tool_finished#{n}"}, "stored"),
}
CASES = [(point, None) for point in GROUP_POINTS] + [(point, tool) for point in CALL_POINTS for tool in TOOLS]


def _waiting(run_id: int) -> Run:
    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.WAITING, (run.status, run.error)
    assert ToolApproval.objects.filter(run=run, status="awaiting").count() == len(TOOLS)
    assert effects() == []  # nothing runs before a person says yes
    return run


@pytest.mark.parametrize(("point", "tool"), CASES, ids=[f"{p}-{t}" if t else p for p, t in CASES])
def test_an_approved_call_takes_effect_once_wherever_the_worker_is_killed(
        point, tool, pay_session, alice, counting, strict, redis_dispatch, tmp_path):
    if tool is None:
        hooks, expected = GROUP_POINTS[point]
    else:
        make_hooks, expected = CALL_POINTS[point]
        hooks = make_hooks(TOOLS.index(tool) + 1)
    model = PayModel(hang_after_results=point == "next_model_call")
    strict.handler = model
    session = pay_session()
    log = tmp_path / "worker.log"
    if point == "before_request_stored":
        with FaultWorker(broker_url=redis_dispatch.url, log_path=log, env=hooks) as worker:
            run = question_ask(session=session, content="Pay ACME")
            assert worker.died_by_sigkill(timeout=60), worker.output()
        assert not ToolApproval.objects.filter(run=run).exists()  # the kill rolled the waiting calls back
        run = finish_elsewhere(run.pk)  # resumed: it must ask again, not run them
        run = _waiting(run.pk)
        decide_all(run, alice)
        run_execute(run_id=run.pk)
        states = None
    else:
        run = question_ask(session=session, content="Pay ACME")
        run_execute(run_id=run.pk)  # the run reaches its wait here; no worker is needed for that
        run = _waiting(run.pk)
        if point == "call_sent":
            counting.hold.add(tool)
        with FaultWorker(broker_url=redis_dispatch.url, log_path=log, env=hooks) as worker:
            decide_all(run, alice)  # the last decision re-queues the run to this worker
            if point == "call_sent":
                wait_for(lambda: effect_counts()[tool], timeout=60, what=f"the effect of {tool}")
                worker.kill()
                counting.hold.clear()
            elif point == "next_model_call":
                assert model.arrived.wait(timeout=60), worker.output()
                worker.kill()
            else:
                assert worker.died_by_sigkill(timeout=60), f"not killed at {point}:\n{worker.output()}"
        model.resumed.set()
        left = Run.Status.QUEUED if point == "requeued" else Run.Status.RUNNING
        assert Run.objects.get(pk=run.pk).status == left  # the kill left it where the point says
        states = at_the_kill(run)
        if tool is None:
            assert set(states.values()) == {expected}, states
        else:
            assert states[FUNCTIONS[tool]] == expected, states
        finish_elsewhere(run.pk)
    assert_exactly_once(run, model, strict, at_kill=states)
    event_seqs_are_gap_free(run)


def test_a_waiting_run_survives_a_worker_restart(pay_session, alice, counting, strict, redis_dispatch, tmp_path):
    """No worker holds a waiting run: killing the one that ran it changes nothing, the reaper
    leaves it, and a new worker runs the approved calls once."""
    model = PayModel()
    strict.handler = model
    session = pay_session()
    with FaultWorker(broker_url=redis_dispatch.url, log_path=tmp_path / "a.log") as first:
        run = question_ask(session=session, content="Pay ACME")
        wait_for(lambda: Run.objects.get(pk=run.pk).status == Run.Status.WAITING, timeout=60,
                 what="the run waiting")
        first.kill()
    assert runs_reap_interrupted(stale_after=0) == []  # a waiting run has no heartbeat to miss
    run = _waiting(run.pk)
    with FaultWorker(broker_url=redis_dispatch.url, log_path=tmp_path / "b.log") as second:
        decide_all(run, alice)
        wait_for(lambda: Run.objects.get(pk=run.pk).status not in Run.ACTIVE_STATUSES, timeout=60,
                 what="the run finished")
        assert second.process.poll() is None, second.output()
    assert_exactly_once(run, model, strict)
    assert effect_counts() == Counter(TOOLS)
