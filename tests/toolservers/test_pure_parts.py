"""The pure parts of tool servers, literal in and literal out: function names (TOOL-3),
results as records (TOOL-4), what changed between listings (TOOL-1, TOOL-3), and the
operator's file (TOOL-2)."""
from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context.tool_names import FUNCTION_NAME, function_name, function_names
from tests.fakes.mcp_servers import tiny_png
from toolservers.config import ServersFileError, servers_parse
from toolservers.listing import changes_text, drift_blocks_call, listing_changes, tool_drift
from toolservers.results import MAX_IMAGE_BYTES, result_content

# --- function names ---------------------------------------------------------------------


def test_tool3_a_server_tool_is_named_server__tool():
    assert function_names([("git", "git_status"), ("time", "get_current_time")]) == [
        "git__git_status", "time__get_current_time"]


def test_tool3_dots_and_other_characters_become_underscores():
    assert function_name("files", "read.file v2") == "files__read_file_v2"
    assert function_name("fs", "lire-été") == "fs__lire-_t_"


def test_tool3_a_long_name_is_shortened_from_the_front_and_keeps_the_tools_own_name():
    tool = "summarize_the_quarterly_revenue_report_for_every_region_and_product_line_x"  # 75 characters
    name = function_name("finance", tool)
    assert len(name) == 64 and name.endswith("product_line_x") and name == tool[-64:]


def test_tool3_an_80_character_name_keeps_the_whole_tool_name_when_it_fits():
    server, tool = "warehouse_inventory_serv_x", "reserve_stock_for_the_order_and_notify_the_buyer_now"
    assert len(f"{server}__{tool}") == 80
    name = function_name(server, tool)
    assert len(name) == 64 and name.endswith(tool) and FUNCTION_NAME.fullmatch(name)


def test_tool3_collisions_with_each_other_and_with_built_ins_are_made_unique_stably():
    refs = [("a", "b-c"), ("a", "b.c"), ("a", "b c"), ("x", "calculator")]
    names = function_names(refs, reserved=["a__b-c", "calculator"])
    assert len(set(names)) == 4 and "a__b-c" not in names and "calculator" not in names
    assert all(name.endswith(("b-c", "b_c", "calculator")) for name in names)
    assert function_names(refs, reserved=["a__b-c", "calculator"]) == names  # the same every time


@settings(max_examples=300)  # names and strings, not histories: the CI profile's 2,000 cost 20 s for nothing new
@given(st.lists(st.tuples(st.from_regex(r"[a-z][a-z0-9_]{0,30}", fullmatch=True),
                          st.text(min_size=1, max_size=130)), max_size=12),
       st.lists(st.from_regex(FUNCTION_NAME, fullmatch=True), max_size=6))
def test_tool3_every_name_is_valid_for_every_provider_and_unique_in_the_request(refs, reserved):
    names = function_names(refs, reserved=reserved)
    assert len(names) == len(refs)
    assert all(FUNCTION_NAME.fullmatch(name) for name in names)
    assert len(set(names)) == len(names) and not set(names) & set(reserved)


# --- results ----------------------------------------------------------------------------


def test_tool4_text_stays_text_and_structured_content_is_kept_beside_it():
    converted = result_content({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                                "structuredContent": {"sum": 3}, "isError": False})
    assert converted.content == "a\nb" and converted.structured == {"sum": 3} and not converted.is_error


def test_tool4_structured_content_alone_reaches_the_model_as_json():
    assert result_content({"content": [], "structuredContent": {"sum": 3}}).content == '{"sum": 3}'


def test_tool4_an_image_becomes_an_image_part_and_a_bad_one_a_note():
    data = base64.b64encode(tiny_png()).decode()
    converted = result_content({"content": [{"type": "text", "text": "Look:"},
                                            {"type": "image", "data": data, "mimeType": "image/png"},
                                            {"type": "image", "data": "not base64!", "mimeType": "image/png"},
                                            {"type": "image", "data": data, "mimeType": "image/svg+xml"}]})
    assert converted.content == [
        {"type": "text", "text": "Look:"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}},
        {"type": "text", "text": "[an image of type image/png that cannot be shown]"},
        {"type": "text", "text": "[an image of type image/svg+xml that cannot be shown]"}]


def test_tool4_an_image_over_the_limit_is_left_out_with_a_note():
    data = base64.b64encode(b"\0" * (MAX_IMAGE_BYTES + 1)).decode()
    converted = result_content({"content": [{"type": "image", "data": data, "mimeType": "image/png"}]})
    assert "larger than" in converted.content


def test_tool4_resources_and_links_become_text_with_their_uri():
    converted = result_content({"content": [
        {"type": "resource_link", "uri": "file:///r.csv", "name": "r.csv", "mimeType": "text/csv",
         "description": "Report"},
        {"type": "resource", "resource": {"uri": "file:///n.txt", "mimeType": "text/plain", "text": "milk"}},
        {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": base64.b64encode(b"xyz").decode()}},
        {"type": "audio", "data": base64.b64encode(b"1234").decode(), "mimeType": "audio/wav"},
        {"type": "hologram"}]})
    assert converted.content.split("\n") == [
        "[resource link: r.csv <file:///r.csv> (text/csv) — Report]",
        "[resource <file:///n.txt> (text/plain)]", "milk",
        "[resource <file:///b.bin>: 3 bytes of binary content, not shown]",
        "[audio (audio/wav, 4 bytes) that the model cannot hear]",
        "[hologram content that AgentLoom does not read]"]


def test_tool4_is_error_is_kept():
    assert result_content({"content": [{"type": "text", "text": "no"}], "isError": True}).is_error


# --- listings ---------------------------------------------------------------------------

ECHO = {"name": "echo", "description": "Echo.", "input_schema": {"type": "object"}, "annotations": {}}


def test_tool1_changes_between_listings():
    old = [ECHO, {**ECHO, "name": "add"}]
    new = [{**ECHO, "input_schema": {"type": "object", "required": ["x"]}}, {**ECHO, "name": "sum"}]
    changes = listing_changes(old, new)
    assert changes == {"added": ["sum"], "removed": ["add"], "changed": [{"name": "echo", "fields": ["input_schema"]}]}
    assert changes_text(changes) == "Added sum; removed add; echo: input schema changed."
    assert changes_text(listing_changes(old, old)) == "No change."


def test_tool3_only_a_missing_tool_or_a_moved_schema_stops_a_call():
    assert tool_drift(ECHO, None) == {"state": "missing", "fields": []}
    assert tool_drift(ECHO, dict(ECHO)) is None
    described = tool_drift(ECHO, {**ECHO, "description": "Echo!"})
    assert described == {"state": "changed", "fields": ["description"]} and not drift_blocks_call(described)
    assert drift_blocks_call(tool_drift(ECHO, {**ECHO, "input_schema": {"type": "object", "properties": {}}}))
    assert drift_blocks_call(tool_drift(ECHO, None))


@pytest.mark.parametrize("change, why", [
    ({"description": "d" * 20_001}, "description is longer"),
    ({"input_schema": {"type": "object", "properties": {"x": {"enum": "not a list"}}}}, "not valid JSON Schema"),
    ({"input_schema": {"type": "array"}}, "not an object schema"),
    ({"input_schema": {"type": "object", "description": "x" * 70_000}}, "larger than 64 kB"),
])
def test_tool1_a_listed_tool_that_cannot_be_offered_is_skipped_with_why(change, why):
    from toolservers.protocol import tool_problem

    assert tool_problem(dict(ECHO)) is None
    assert why in tool_problem({**ECHO, **change})


# --- the operator's file ----------------------------------------------------------------


def test_tool2_the_common_mcp_servers_shape_is_read():
    servers = servers_parse(json.dumps({"mcpServers": {
        "time": {"command": "uvx", "args": ["mcp-server-time"]},
        "git": {"command": "python", "args": ["-m", "mcp_server_git"], "env": {"GIT_TOKEN": "s"},
                "spaces": [2], "timeout": 30}}}))
    assert servers["time"].args == ("mcp-server-time",) and servers["time"].spaces is None
    assert servers["git"].env == {"GIT_TOKEN": "s"}
    assert servers["git"].visible_to(2) and not servers["git"].visible_to(3)
    assert servers["git"].timeout == 30.0


@pytest.mark.parametrize("text, problem", [
    ("{", "is not JSON"), ("[]", "mcpServers"), ('{"mcpServers": {"Bad": {"command": "x"}}}', "a name is"),
    ('{"mcpServers": {"a": {"args": []}}}', "command must be"),
    ('{"mcpServers": {"a": {"command": "x", "url": "http://h"}}}', "unknown field 'url'"),
    ('{"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}}', "env must be"),
    ('{"mcpServers": {"a": {"command": "x", "spaces": ["Acme"]}}}', "spaces must be"),
    ('{"mcpServers": {"a": {"command": "x", "timeout": 0}}}', "timeout must be"),
    ('{"mcpServers": {"a": {"command": "x", "args": "--flag"}}}', "args must be"),
])
def test_tool2_a_bad_file_is_refused_with_the_first_problem(text, problem):
    with pytest.raises(ServersFileError, match=problem):
        servers_parse(text)
