"""An approved call runs exactly once, whatever kills the worker (TOOL-9, TOOL-5, RUN-6).

The kill matrix: a real Celery worker process (``tests.faults.worker_main``) on PostgreSQL
is SIGKILLed at each point of an approved call's life, for the three kinds of server tool
at once — the model asks for ``lookup`` (read-only), ``set_flag`` (idempotent) and
``send_payment`` (destructive) in one step, and all three wait (policy ``always``). Then a
fresh worker finishes the run (the reaper, a resume, the loop; in the test's process).
Each case checks, with a server that writes one line per effect to a file: every call
took effect exactly once; a call whose result was never stored is an ``unknown`` outcome;
the run ends with the model's answer; no request the model received carried a call
without its result.

The points, in the order a call lives through them:

- ``before_request_stored``: inside the transaction that stores the waiting calls — the
  resumed run must ask again, never run a call nobody approved;
- ``requeued``: the decisions are stored and the run re-queued; the worker that received
  it dies before claiming it;
- ``call_sent``: the server has done the effects and holds its answers;
- ``result_uncommitted``: the answers arrived and are being written: the kill rolls the
  write back;
- ``result_committed``: right after the results' commit;
- ``next_model_call``: while the model is answering the results.

One worker process a case; the run reaches its wait in the test's process where the point
comes after it (cheaper than a second worker, and the same code). A worker killed while
the run waits — before any decision — is ``test_a_waiting_run_survives_a_worker_restart``.
"""
from __future__ import annotations

from collections import Counter

import pytest

from runloop.loop import run_execute
from runloop.reaper import runs_reap_interrupted
from sessions.models import Run, ToolApproval
from sessions.services.questions import question_ask
from tests.fakes.counting_server import TOOLS
from tests.faults.approvals import (  # noqa: F401
    PayModel,
    assert_exactly_once,
    at_the_kill,
    broker,
    counting,
    decide_all,
    effect_counts,
    effects,
    finish_elsewhere,
    pay_session,
)
from tests.faults.support import FaultWorker, event_seqs_are_gap_free, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]

APPROVALS_TABLE = ToolApproval._meta.db_table
RECORDS_TABLE = "agent_sessions_sessionmessage"

# point → (the worker's fault hooks, what the kill must have left of the calls: at least one
# call in the first state, none in the others). What each call then ends as follows from
# what the kill left of it (``approvals.ENDS``): the calls of a step may run one by one or
# together, and the matrix holds either way.
POINTS = {
    "before_request_stored": ({"AGENTLOOM_FAULT_KILL_ON_INSERT": APPROVALS_TABLE}, ("not_started", set())),
    "requeued": ({"AGENTLOOM_FAULT_KILL_BEFORE_CLAIM": "1"}, ("not_started", {"started", "sent", "stored"})),
    "call_sent": ({}, ("sent", {"stored"})),
    "result_uncommitted": ({"AGENTLOOM_FAULT_KILL_ON_INSERT": f"{RECORDS_TABLE}:tool_result"}, ("sent", {"stored"})),
    "result_committed": ({"AGENTLOOM_FAULT_KILL_AT": "tool_finished"}, ("stored", set())),
    "next_model_call": ({}, ("stored", {"started", "sent", "not_started"})),
}


def _waiting(run_id: int) -> Run:
    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.WAITING, (run.status, run.error)
    assert ToolApproval.objects.filter(run=run, status="awaiting").count() == len(TOOLS)
    assert effects() == []  # nothing runs before a person says yes
    return run


@pytest.mark.parametrize("point", list(POINTS))
def test_an_approved_call_takes_effect_once_wherever_the_worker_is_killed(
        point, pay_session, alice, counting, strict, broker, tmp_path):
    hooks, (expected, excluded) = POINTS[point]
    model = PayModel(hang_after_results=point == "next_model_call")
    strict.handler = model
    session = pay_session()
    log = tmp_path / "worker.log"
    if point == "before_request_stored":
        with FaultWorker(broker_url=broker.url, log_path=log, env=hooks) as worker:
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
            counting.hold.set()
        with FaultWorker(broker_url=broker.url, log_path=log, env=hooks) as worker:
            decide_all(run, alice)  # the last decision re-queues the run to this worker
            if point == "call_sent":
                wait_for(effects, timeout=60, what="an effect")
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
        assert expected in states.values() and not excluded & set(states.values()), states
        finish_elsewhere(run.pk)
    assert_exactly_once(run, model, strict, at_kill=states)
    event_seqs_are_gap_free(run)


def test_a_waiting_run_survives_a_worker_restart(pay_session, alice, counting, strict, broker, tmp_path):
    """No worker holds a waiting run: killing the one that ran it changes nothing, the reaper
    leaves it, and a new worker runs the approved calls once."""
    model = PayModel()
    strict.handler = model
    session = pay_session()
    with FaultWorker(broker_url=broker.url, log_path=tmp_path / "a.log") as first:
        run = question_ask(session=session, content="Pay ACME")
        wait_for(lambda: Run.objects.get(pk=run.pk).status == Run.Status.WAITING, timeout=60,
                 what="the run waiting")
        first.kill()
    assert runs_reap_interrupted(stale_after=0) == []  # a waiting run has no heartbeat to miss
    run = _waiting(run.pk)
    with FaultWorker(broker_url=broker.url, log_path=tmp_path / "b.log") as second:
        decide_all(run, alice)
        wait_for(lambda: Run.objects.get(pk=run.pk).status not in Run.ACTIVE_STATUSES, timeout=60,
                 what="the run finished")
        assert second.process.poll() is None, second.output()
    assert_exactly_once(run, model, strict)
    assert effect_counts() == Counter(TOOLS)
