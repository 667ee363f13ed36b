"""Stop during a server tool's call, and resume after it (LOOP-7, TOOL-4, TOOL-5, RUN-6).

Stop sends the protocol's cancellation (the server sees ``notifications/cancelled`` and its
handler is interrupted). A repeatable tool's call then ends ``cancelled``; a call with a side
effect is left without a result, and a resume records it as an unknown outcome and never
sends it again: the server counts at most one effect. An admin's override, frozen at
publish, is what decides.
"""
from __future__ import annotations

import json
import threading

import pytest
from django.db import connections

from agents.server_tools import frozen_server_tools
from runloop.loop import run_execute
from sessions.models import Run, SessionMessage
from sessions.services.questions import question_ask
from sessions.services.run_controls import run_resume
from tests.fakes.fake_provider import chat_stream, sequence
from tests.fakes.mcp_servers import ToolServerApp
from tests.runloop.worker import wait_for
from tests.sessions.helpers import interrupted_after_calls
from tests.toolservers.runs import never_ask
from toolservers.services import toolserver_register

pytestmark = pytest.mark.django_db(transaction=True)


def _stop(run_id: int) -> None:
    Run.objects.filter(pk=run_id).update(cancel_requested=True)


def call(name, arguments, call_id="c1"):
    return {"id": call_id, "name": name, "arguments": json.dumps(arguments)}


def results(session):
    return [m.message for m in SessionMessage.objects.filter(session=session, kind="tool_result").order_by("seq")]


def _run(session, content="Go") -> Run:
    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def _resume(run) -> Run:
    run_resume(run=Run.objects.get(pk=run.pk))
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


@pytest.mark.parametrize("legacy", [False, True], ids=["stateless-revision", "stateful-revision"])
def test_loop7_stop_during_a_slow_call_cancels_it_on_the_server_and_ends_it_cancelled(
        space, alice, strict, fake, extra_sink, legacy):
    from tests.toolservers.runs import session_with

    with ToolServerApp(legacy=legacy) as server:
        toolserver_register(space=space, data={"name": "svc", "url": server.url, "headers": server.headers})
        session = session_with(space, alice, fake, "openai", ["svc.slow"])
        strict.handler = sequence(chat_stream(tool_calls=[call("svc__slow", {"steps": 300})]))
        extra_sink(lambda event: _stop(event.run_id) if event.type == "tool_progress" else None)
        run = _run(session, "Work slowly")
        assert run.status == Run.Status.CANCELLED
        assert results(session)[0]["status"] == "cancelled"
        # The server's handler is interrupted: by notifications/cancelled on the stateful revision,
        # by the request's end on the stateless one (its cancellation is the request itself).
        wait_for(lambda: server.cancellations == 1, timeout=20)
        assert server.seen["notifications/cancelled"] == (1 if legacy else 0)
        strict.handler = sequence(chat_stream(["Carrying on."]))
        assert _run(session, "Where were we?").status == Run.Status.COMPLETED
    assert strict.rejections == []


def test_tool5_a_side_effect_stopped_mid_call_is_unknown_on_resume_and_never_sent_again(
        server_agent, strict, fake, mcp_server):
    mcp_server.increment_delay = 30.0  # the effect happens at once; the answer would come much later
    session = server_agent(["tests.increment"], overrides=never_ask(["tests.increment"]))  # approved beforehand
    assert frozen_server_tools(session.version)[0]["idempotent"] is False  # no hints: not repeatable
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__increment", {"by": 1})]),
                              chat_stream(["I am not sure it happened; please check the counter."]))
    run = question_ask(session=session, content="Add one")

    def stop_once_the_effect_is_done() -> None:
        try:
            wait_for(lambda: mcp_server.effects == 1, timeout=30)
            _stop(run.pk)
        finally:
            connections.close_all()

    stopper = threading.Thread(target=stop_once_the_effect_is_done)
    stopper.start()
    run_execute(run_id=run.pk)
    stopper.join()
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and results(session) == []  # no invented result (LOOP-7)
    resumed = _resume(run)
    assert resumed.status == Run.Status.COMPLETED, resumed.error
    assert [r["status"] for r in results(session)] == ["unknown"]
    assert "[unknown outcome]" in results(session)[0]["content"]
    assert mcp_server.effects == 1 and mcp_server.seen["tools/call"] == 1
    assert strict.rejections == []


@pytest.mark.parametrize("override, effects, status", [(None, 0, "unknown"), (True, 5, "ok")])
def test_tool5_a_call_left_pending_by_a_vanished_worker_runs_again_on_resume_only_if_repeatable(
        server_agent, strict, mcp_server, override, effects, status):
    overrides = {"tests.increment": {"approval": "never", **({"idempotent": True} if override else {})}}
    session = server_agent(["tests.increment"], overrides=overrides)
    assert frozen_server_tools(session.version)[0]["idempotent"] is bool(override)  # frozen at publish
    run = interrupted_after_calls(session, [("c1", "tests__increment", json.dumps({"by": 5}))])
    strict.handler = sequence(chat_stream(["Done."]))
    resumed = _resume(run)
    assert resumed.status == Run.Status.COMPLETED, resumed.error
    assert [r["status"] for r in results(session)] == [status] and mcp_server.effects == effects
    assert strict.rejections == []


