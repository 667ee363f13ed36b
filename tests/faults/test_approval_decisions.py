"""Decisions on waiting calls, against a server that counts its effects (TOOL-9).

A decision sent twice — one tab after the other, or two tabs at the same moment — is one
decision and one effect; a denied call never reaches the server, and the model's next
request carries its result with the person's reason, paired with its call. The server
writes one line per effect to a file (``tests.fakes.counting_server``). On both provider
wires: the strict fake refuses any request with a call unpaired on its own wire.
"""
from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connections

from core.errors import Conflict
from runloop.loop import run_execute
from sessions.models import Run, RunEvent, ToolApproval
from sessions.selectors.approvals import approvals_waiting
from sessions.services.approvals import approval_decide
from sessions.services.questions import question_ask
from tests.fakes.counting_server import TOOLS
from tests.faults.approvals import (
    CALLS,
    FUNCTIONS,
    PayModel,
    assert_exactly_once,
    decide_all,
    effect_counts,
    results_by_function,
    unpaired,
)

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ["openai", "anthropic"]  # every request after a decision is checked on both wires

REASON = "Not before the invoice is checked."


def _asked(session) -> Run:
    run = question_ask(session=session, content="Pay ACME")
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.WAITING, run.error
    return run


def _decided_events(run: Run) -> list[dict]:
    return [event.payload for event in RunEvent.objects.filter(run=run, type="approval_decided").order_by("seq")]


def test_a_denied_call_never_runs_and_the_model_reads_the_reason(pay_session, alice, counting, strict,
                                                                  dispatched_runs):
    model = PayModel()
    strict.handler = model
    run = _asked(pay_session())
    payment = next(a for a in approvals_waiting(run=run) if a.tool == FUNCTIONS["send_payment"])
    approval_decide(run=run, user=alice, call_id=payment.call_id, decision="deny", reason=REASON)
    assert Run.objects.get(pk=run.pk).status == Run.Status.WAITING  # two calls still wait
    decide_all(run, alice)
    assert dispatched_runs == [run.pk, run.pk]  # the question, then the last decision's re-queue
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    assert effect_counts() == Counter({"lookup": 1, "set_flag": 1})  # the payment never reached the server
    denied = results_by_function(run)[FUNCTIONS["send_payment"]]
    assert [r["status"] for r in denied] == ["denied"] and REASON in denied[0]["content"]
    # The wire names calls its own way (call_1, …): the results follow the calls' order.
    sent = [m["content"] for m in model.tool_messages()]
    assert len(sent) == len(CALLS) and [REASON in content for content in sent] == [False, False, True], sent
    assert all(unpaired(messages) == [] for messages in model.requests)
    assert [(e["call_id"], e["decision"], e["reason"], e["by"]) for e in _decided_events(run)][0] == (
        payment.call_id, "denied", REASON, "alice")
    assert strict.rejections == []


def test_a_decision_sent_twice_is_one_decision_and_one_effect(pay_session, alice, counting, strict):
    model = PayModel()
    strict.handler = model
    run = _asked(pay_session())
    first = decide_all(run, alice)
    again = [approval_decide(run=run, user=alice, call_id=a.call_id, decision="approve") for a in first]
    assert [(a.pk, a.status, a.decided_at) for a in again] == [(a.pk, a.status, a.decided_at) for a in first]
    with pytest.raises(Conflict) as refused:
        approval_decide(run=run, user=alice, call_id=first[0].call_id, decision="deny", reason="changed my mind")
    assert refused.value.code == "already_decided"
    assert len(_decided_events(run)) == len(TOOLS)
    run_execute(run_id=run.pk)
    run_execute(run_id=run.pk)  # a second delivery of the re-queued run claims nothing
    assert_exactly_once(run, model, strict)


@pytest.mark.usefixtures("require_postgres")
def test_two_tabs_approving_at_the_same_moment_make_one_decision_and_one_effect(pay_session, alice, counting,
                                                                                  strict, dispatched_runs):
    model = PayModel()
    strict.handler = model
    run = _asked(pay_session())
    calls = [a.call_id for a in approvals_waiting(run=run)]
    start = threading.Barrier(2)
    failures: list[BaseException] = []

    def tab() -> None:
        try:
            start.wait(timeout=10)
            for call_id in calls:
                approval_decide(run=Run.objects.get(pk=run.pk), user=alice, call_id=call_id, decision="approve")
        except BaseException as exc:  # reported below: a thread's failure must fail the test
            failures.append(exc)
        finally:
            connections.close_all()

    tabs = [threading.Thread(target=tab) for _ in range(2)]
    for thread in tabs:
        thread.start()
    for thread in tabs:
        thread.join(timeout=30)
    assert failures == []
    assert len(_decided_events(run)) == len(TOOLS)
    assert ToolApproval.objects.filter(run=run, status="approved").count() == len(TOOLS)
    assert dispatched_runs.count(run.pk) == 2  # the question, and one re-queue for both tabs
    for _ in dispatched_runs[1:]:
        run_execute(run_id=run.pk)
    assert_exactly_once(run, model, strict)
