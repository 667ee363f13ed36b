"""CTX-47: a folded result's note says to read it back with ``read_record``; the platform
offers that tool to every agent with tools whose policy folds (from the first request, so
the tool list stays one cached prefix), and to no other."""
from __future__ import annotations

import pytest

from runloop.loop import run_execute
from sessions.models import Run
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream

pytestmark = pytest.mark.django_db(transaction=True)


def _tool_names(request) -> list[str]:
    return [tool.get("function", tool)["name"] for tool in request.json.get("tools") or []]


@pytest.mark.parametrize(("tools", "policy", "expected"), [
    (("calculator",), None, ["calculator", "read_record"]),
    (("calculator",), {"mask_tool_results": False}, ["calculator"]),
    (("calculator", "read_record"), None, ["calculator", "read_record"]),
    ((), None, []),
])
def test_read_record_is_offered_where_results_may_be_folded(fake_session, strict, fake, tools, policy, expected):
    strict.handler = lambda request: chat_stream(["Done."])
    session = fake_session(tools=tools, context_policy=policy)
    run = question_ask(session=session, content="Hello")
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    sent = [request for request in fake.requests if request.method == "POST"]
    assert [_tool_names(request) for request in sent] == [expected]
