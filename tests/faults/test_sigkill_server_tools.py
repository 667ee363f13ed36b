"""A worker SIGKILLed in the middle of a server tool's call (TOOL-5, RUN-6, LOOP-1).

A real Celery worker process calls a real MCP server (the SDK's, on loopback) whose tool has
a side effect and no hints — so it first waits for the session creator's approval (TOOL-8),
which the test gives. The test kills the worker once the server has done the effect and
before it answers; the reaper marks the run interrupted; the user resumes it. The call gets
an unknown outcome and is never sent again: the server counts one effect, one call.
"""
from __future__ import annotations

import json

import pytest

from runloop.loop import run_execute
from runloop.reaper import runs_reap_interrupted
from sessions.models import Run, SessionMessage
from sessions.selectors.approvals import approvals_waiting
from sessions.services.approvals import approval_decide
from sessions.services.dispatch import dispatcher_set
from sessions.services.questions import question_ask
from sessions.services.run_controls import run_resume
from tests.fakes.fake_provider import chat_stream
from tests.fakes.mcp_servers import ToolServerApp
from tests.faults.support import FaultWorker, celery_dispatcher, wait_for
from toolservers.services import toolserver_register

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("require_postgres")]


def test_a_worker_killed_during_a_side_effecting_server_call_never_sends_it_again(
        space, fake_session, strict, private_redis, tmp_path):
    with ToolServerApp(legacy=True) as server:
        server.increment_delay = 60.0  # the effect is done at once; the answer would come a minute later
        toolserver_register(space=space, data={"name": "shop", "url": server.url, "headers": server.headers})
        session = fake_session(tools=["shop.increment"])

        def provider(request):
            answered = any(m["role"] == "tool" for m in request.json["messages"])
            if answered:
                return chat_stream(["The order may or may not have been placed; please check."])
            return chat_stream(tool_calls=[{"id": "buy-1", "name": "shop__increment",
                                            "arguments": json.dumps({"by": 1})}])

        strict.handler = provider
        dispatch, close = celery_dispatcher(private_redis.url)
        dispatcher_set(dispatch)
        try:
            with FaultWorker(broker_url=private_redis.url, log_path=tmp_path / "worker.log") as worker:
                run = question_ask(session=session, content="Place the order")
                wait_for(lambda: Run.objects.get(pk=run.pk).status == Run.Status.WAITING, timeout=60,
                         what="the call waiting for approval")
                (approval,) = approvals_waiting(run=run)
                approval_decide(run=run, user=session.user, call_id=approval.call_id, decision="approve")
                wait_for(lambda: server.effects == 1, timeout=60)
                worker.kill()
        finally:
            dispatcher_set(lambda run_id: None)
            close()
        assert runs_reap_interrupted(stale_after=0) == [run.pk]
        run_resume(run=Run.objects.get(pk=run.pk))
        run_execute(run_id=run.pk)
        run.refresh_from_db()
        assert run.status == Run.Status.COMPLETED, run.error
        result = SessionMessage.objects.get(run=run, kind="tool_result").message
        assert result["status"] == "unknown" and "may or may not" in result["content"]
        assert server.effects == 1 and server.seen["tools/call"] == 1
        assert strict.rejections == []
