"""Server tools in runs on both wires, OpenAI-style and Anthropic's Messages API (TOOL-3, TOOL-4):
where the wire matters — the frozen definitions byte for byte, function names, big, error and
image results — with 0 invalid requests at the strict fakes."""
from __future__ import annotations

import json

import pytest

from agents.server_tools import frozen_server_tools
from sessions.models import Run, SessionMessage
from tests.fakes.fake_provider import chat_stream, sequence
from tests.toolservers.runs import ask_and_run, call, chat_requests, never_ask, results, session_with, tool_definitions

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")


def test_tool3_requests_carry_the_frozen_definitions_byte_for_byte_in_every_step_and_run(
        server_agent, strict, fake, mcp_server):
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__echo", {"text": "hello"})]),
                              chat_stream(["It said hello."]), chat_stream(["Again, hello."]))
    session = server_agent(["calculator", "tests.echo", "tests.add"])
    frozen = frozen_server_tools(session.version)
    assert [entry["function"] for entry in frozen] == ["tests__echo", "tests__add"]
    first = ask_and_run(session)
    mcp_server.reschema_tool("add")  # the server moves on; the version does not
    second = ask_and_run(session, "Once more")
    assert first.status == second.status == Run.Status.COMPLETED, (first.error, second.error)
    # The server's tools, between the built-in calculator and the read_record the platform
    # offers for folded results (CTX-47).
    named = [tool_definitions(r.json) for r in chat_requests(fake)]
    assert all([d[0] for d in tools] == ["calculator", "tests__echo", "tests__add", "read_record"] for tools in named)
    definitions = [json.dumps(tools[1:3]) for tools in named]
    assert len(set(definitions)) == 1  # the same bytes in all three requests
    assert json.loads(definitions[0]) == [[e["function"], e["description"], e["input_schema"]] for e in frozen]
    assert results(session)[0]["content"] == "hello" and results(session)[0]["status"] == "ok"
    assert strict.rejections == []

def test_tool4_a_400_kb_result_reaches_the_model_as_head_and_tail_and_the_whole_is_readable(
        server_agent, strict, fake):
    size = 400_000
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__big", {"size": size})]),
                              chat_stream(["The log ends with an error."]))
    session = server_agent(["tests.big", "read_record"])
    assert ask_and_run(session, "Read the log").status == Run.Status.COMPLETED
    record = SessionMessage.objects.get(session=session, kind="tool_result")
    assert len(record.message["content"]) == size  # stored whole
    sent = json.dumps(chat_requests(fake)[-1].json)
    assert "BEGIN-OF-LOG" in sent and "END-OF-LOG" in sent and len(sent) < 60_000
    strict.handler = sequence(chat_stream(tool_calls=[call("read_record", {"seq": record.seq, "offset": 200_000,
                                                                           "length": 100})]),
                              chat_stream(["Read."]))
    assert ask_and_run(session, "Read the middle").status == Run.Status.COMPLETED
    assert "line of an ordinary log" in results(session)[-1]["content"]
    assert strict.rejections == []

def test_tool4_an_error_result_is_status_error_and_the_run_goes_on(server_agent, strict, fake):
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__fail", {"reason": "no stock"})]),
                              chat_stream(["It failed: no stock."]))
    session = server_agent(["tests.fail"])
    run = ask_and_run(session)
    assert run.status == Run.Status.COMPLETED
    result = results(session)[0]
    assert result["status"] == "error" and "refused: no stock" in result["content"]
    assert "refused: no stock" in json.dumps(chat_requests(fake)[-1].json)
    assert strict.rejections == []

def test_tool4_an_image_result_is_kept_as_an_image_part_and_reaches_the_model(server_agent, strict, fake, dialect):
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__picture", {})]), chat_stream(["A red square."]))
    session = server_agent(["tests.picture"])
    session.version.model_connection.supports_images = True
    session.version.model_connection.save()
    assert ask_and_run(session).status == Run.Status.COMPLETED
    content = results(session)[0]["content"]
    assert content[0] == {"type": "text", "text": "Here is the picture."}
    assert content[1]["type"] == "image_url" and content[1]["image_url"]["url"].startswith("data:image/png;base64,")
    sent = json.dumps(chat_requests(fake)[-1].json)
    assert ('"type": "image"' in sent) if dialect == "anthropic" else ('"image_url"' in sent)
    assert strict.rejections == []

def test_tool1_a_server_on_the_older_http_sse_transport_runs_tools_too(space, alice, strict, fake, dialect,
                                                                       sse_server):
    from toolservers.services import toolserver_register

    toolserver_register(space=space, data={"name": "legacy", "url": sse_server.url, "headers": sse_server.headers})
    session = session_with(space, alice, fake, dialect, ["legacy.echo"])
    strict.handler = sequence(chat_stream(tool_calls=[call("legacy__echo", {"text": "over sse"})]),
                              chat_stream(["Fine."]))
    assert ask_and_run(session).status == Run.Status.COMPLETED
    assert results(session)[0]["content"] == "over sse"
    assert strict.rejections == []

def test_tool3_dots_long_names_and_collisions_give_valid_unique_function_names(space, alice, strict, fake,
                                                                               server_agent, mcp_server):
    from toolservers.models import ToolServer
    from toolservers.services import toolserver_refresh

    long_name = "summarize_the_quarterly_revenue_report_for_every_region_nows"  # 60: with "tests__", 67
    for name in ("files.read", "files_read", long_name):
        mcp_server.mcp.add_tool(lambda text: text, name=name, description=f"{name} tool.")
    toolserver_refresh(server=ToolServer.objects.get(name="tests"))
    chosen = ["calculator", "tests.files.read", "tests.files_read", f"tests.{long_name}"]
    session = server_agent(chosen, overrides=never_ask(chosen))  # tools without hints: about names, not approvals
    names = [entry["function"] for entry in frozen_server_tools(session.version)]
    assert names[0] == "tests__files_read" and names[1] != names[0] and names[1].endswith("tests__files_read")
    assert len(long_name) == 60 and len(names[2]) == 64 and names[2].endswith(long_name)
    strict.handler = sequence(chat_stream(tool_calls=[call(names[1], {"text": "dotless"})]), chat_stream(["Ok."]))
    assert ask_and_run(session).status == Run.Status.COMPLETED
    assert results(session)[0]["content"] == "dotless" and mcp_server.calls == []
    assert strict.rejections == []
