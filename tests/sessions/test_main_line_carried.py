"""What a new run carries over from its session's main line is read in one statement
(issue #29), and it says what the readers of each part say (CTX-23, RUN-8, LOOP-4, CTX-44).

``main_line_carried`` stands for four reads on every question: the session's last seq,
``main_counts``, ``view_best_for_run`` and the latest main frame. Alice's session is walked
through what those readers tell apart — answers and cut answers, a sub-agent's records,
views inside and past the watermark, a later run's frame — and at every point the one
statement must agree with them.
"""
from __future__ import annotations

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from sessions.models import Instance, Run, Session, SessionMessage, SessionView
from sessions.selectors.instances import main_instance
from sessions.selectors.records import view_best_for_run
from sessions.services.model_steps import PARTIAL_PREFIX, main_counts
from sessions.services.questions import main_line_carried, question_ask
from sessions.services.records import record_append
from sessions.services.runs import run_finish
from tests.sessions.helpers import answer, claim

pytestmark = pytest.mark.django_db


def _by_the_readers(session: Session) -> tuple[int, dict]:
    last_seq = Session.objects.get(pk=session.pk).last_seq
    turns, steps = main_counts(session_id=session.pk, up_to_seq=last_seq)
    view = view_best_for_run(run=Run(session_id=session.pk, inherited_watermark=last_seq))
    latest = Instance.objects.filter(run__session=session, parent__isnull=True).order_by("-run_id").first()
    frame = (latest.frame or {}) if latest else {}
    return last_seq, {"user_turns": turns, "model_steps": steps,
                      "baseline_user_turns": view.baseline_user_turns if view else 0,
                      "baseline_model_steps": view.baseline_model_steps if view else 0,
                      "plan": frame.get("plan"), "compaction_failure": frame.get("compaction_failure")}


def _agrees(session: Session) -> dict:
    with CaptureQueriesContext(connections["default"]) as reads:
        watermark, carried = main_line_carried(session_id=session.pk)
    assert len(reads.captured_queries) == 1
    frame = carried.pop("frame")
    carried.update(plan=frame.get("plan"), compaction_failure=frame.get("compaction_failure"))
    assert (watermark, carried) == _by_the_readers(session)
    return carried


def _answered(session: Session, question: str, text: str, *, key: str = "assistant-1") -> Run:
    run = claim(question_ask(session=session, content=question))
    answer(run, text, key)
    assert run_finish(run=run, status=Run.Status.COMPLETED)
    return run


def test_one_statement_carries_what_the_readers_of_the_main_line_say(alice, make_session):
    session = make_session(alice)
    assert _agrees(session) == {"user_turns": 0, "model_steps": 0, "baseline_user_turns": 0,
                                "baseline_model_steps": 0, "plan": None, "compaction_failure": None}
    first = _answered(session, "Q1", "A1")
    assert _agrees(session)["model_steps"] == 1

    # A cut answer is no step; a sub-agent's records are not the main line's.
    second = claim(question_ask(session=session, content="Q2"))
    answer(second, "half an ans", f"{PARTIAL_PREFIX}assistant-1")
    child = Instance.objects.create(run=second, parent=main_instance(run=second), key="sub-1", depth=1)
    record_append(session=session, run=second, instance=child, kind="user", message={"role": "user",
                                                                                     "content": "sub task"},
                  entry_key="question")
    record_append(session=session, run=second, instance=child, kind="assistant",
                  message={"role": "assistant", "content": "sub answer"}, entry_key="assistant-1")
    assert run_finish(run=second, status=Run.Status.CANCELLED, reason="stopped by user")
    carried = _agrees(session)
    assert (carried["user_turns"], carried["model_steps"]) == (2, 1)

    # The best view is the highest watermark within the last seq; a later one does not count.
    last_seq = Session.objects.get(pk=session.pk).last_seq
    for watermark, baseline in ((2, 1), (last_seq, 2), (last_seq + 5, 9)):
        SessionView.objects.create(session=session, watermark=watermark, messages=[], baseline_user_turns=baseline,
                                   baseline_model_steps=baseline * 10, estimator_id="bytes-v1", source_run=first)
    assert _agrees(session)["baseline_user_turns"] == 2

    # The plan and the back-off come from the latest run's main frame, not an older one.
    Instance.objects.filter(run=first, parent__isnull=True).update(frame={"plan": [{"step": "old"}]})
    main = main_instance(run=second)
    main.frame = {"plan": [{"step": "latest", "status": "in_progress"}],
                  "compaction_failure": {"failures": 2}, "supplements": []}
    main.save(update_fields=["frame"])
    carried = _agrees(session)
    assert carried["plan"] == [{"step": "latest", "status": "in_progress"}]
    assert carried["compaction_failure"] == {"failures": 2}

    # And the question asked through it starts from exactly that.
    third = question_ask(session=session, content="Q3")
    started = main_instance(run=third)
    assert third.inherited_watermark == last_seq
    assert (started.user_turns, started.model_steps, started.baseline_user_turns) == (3, 1, 2)
    assert SessionMessage.objects.filter(run=third).count() == 1
