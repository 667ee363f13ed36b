"""Tools take and give text from outside: no lone surrogate passes ``tool_invoke`` either way
(issue #44 item 4). The model's arguments are JSON text whose ``\\ud800`` escape decodes to
one; a tool's result (a server's, a fetched page's) can hold one.
"""
from __future__ import annotations

import json
from types import SimpleNamespace

from agents.tool_registry import Tool, ToolResult
from tests.fakes.fake_provider import FakeProvider
from tests.fakes.responses import RawResponse
from tools import ToolContext, registry, tool_invoke
from toolservers.protocol import tool_entry

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def ctx(**services) -> ToolContext:
    return ToolContext(run_id=1, session_id=1, instance_id=1, services=services)


def encodes(value) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def test_a_tool_gets_its_arguments_and_gives_its_result_without_a_lone_surrogate():
    seen = []

    def echo(arguments, context):
        seen.append(arguments["text"])
        return ToolResult(content=f"{arguments['text']} and \udc00", structured={"k\ud800": ["\udfff"]})

    tool = Tool(name="echo", description="", parameters=SCHEMA, run=echo, idempotent=True)
    outcome = tool_invoke(tool, json.dumps({"text": "a \ud800 b"}), ctx())  # the escape, as a model writes it
    assert seen == ["a \ufffd b"]
    assert outcome.status == "ok"
    assert outcome.content == "a \ufffd b and \ufffd" and outcome.structured == {"k\ufffd": ["\ufffd"]}


def test_an_error_a_tool_raises_with_a_lone_surrogate_is_stored_as_valid_text():
    def refuse(arguments, context):
        from agents.tool_registry import ToolError

        raise ToolError(f"cannot read {arguments['text']}")

    tool = Tool(name="refuse", description="", parameters=SCHEMA, run=refuse, idempotent=True)
    outcome = tool_invoke(tool, '{"text": "\\ud800"}', ctx())
    assert outcome.status == "error" and encodes(outcome.content) and "\ufffd" in outcome.content


def test_a_fetched_page_in_a_charset_that_decodes_to_a_lone_surrogate_comes_back_as_valid_text():
    # UTF-7 spells a lone surrogate as "+2AA-"; Python's decoder gives it back as one.
    page = RawResponse(b"before +2AA- after", headers={"Content-Type": "text/plain; charset=utf-7"})
    with FakeProvider(lambda request: page) as fake:
        options = {"transport": fake.forwarding_transport(), "resolver": lambda host, port: ["93.184.216.34"]}
        outcome = tool_invoke(registry["http_fetch"], '{"url": "http://example.org/page"}', ctx(fetch_options=options))
    assert outcome.status == "ok" and encodes(outcome.content)
    assert "before \ufffd after" in outcome.content


def test_a_listed_server_tool_with_a_lone_surrogate_is_kept_as_valid_text():
    listed = SimpleNamespace(name="look\ud800", description="Looks \udc00 up.", annotations=None,
                             input_schema={"type": "object", "properties": {"q\ud800": {"type": "string"}}})
    entry = tool_entry(listed)
    assert encodes(entry)
    assert entry["description"] == "Looks \ufffd up." and "q\ufffd" in entry["input_schema"]["properties"]
