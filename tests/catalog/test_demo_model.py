"""The offline demo model's pure decisions: which tool a question asks for, the arguments
built from a tool's schema (always valid for it), what it reads of attached files, when
the calculator is meant, how a stopped answer goes on, and its pace. No database."""
from __future__ import annotations

import json
import math
from datetime import date

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from context.attachments import question_content
from models_catalog.demo import LABEL, MAX_PIECES, DemoChatClient, find_arithmetic, plan_reply
from models_catalog.demo_arguments import tool_arguments
from models_catalog.demo_tools import choose_tool
from models_catalog.providers.events import StreamEnd, TextDelta, ToolCallDelta

TODAY = date(2026, 12, 7)
ZONE = {"type": "string", "description": "IANA timezone name (e.g., 'America/New_York', 'Europe/London'). "
                                         "Use 'UTC' as local timezone if no timezone provided by the user."}
GET_TIME = {"description": "Get current time in a specific timezones",
            "parameters": {"type": "object", "properties": {"timezone": ZONE}, "required": ["timezone"]}}
CONVERT = {"description": "Convert time between timezones", "parameters": {
    "type": "object", "required": ["source_timezone", "time", "target_timezone"], "properties": {
        "source_timezone": {**ZONE, "description": "Source IANA timezone name"},
        "time": {"type": "string", "description": "Time to convert in 24-hour format (HH:MM)"},
        "target_timezone": {**ZONE, "description": "Target IANA timezone name"}}}}
CLOCK = {"description": "The current date and time, in UTC or the given IANA time zone.",
         "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}}}
CALCULATOR = {"description": "Evaluate an arithmetic expression: + - * / // % ^, parentheses, sqrt.",
              "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                             "required": ["expression"]}}
GIT_LOG = {"description": "Shows the commit logs", "parameters": {"type": "object", "required": ["repo_path"],
           "properties": {"repo_path": {"type": "string"},
                          "max_count": {"type": "integer", "default": 10, "minimum": 1, "maximum": 50}}}}


def _tool(name, function):
    return {"type": "function", "function": {"name": name, **function}}


# --- choosing a tool ---------------------------------------------------------------------

def test_a_question_naming_a_servers_tool_chooses_it_and_the_simplest_of_equals():
    tools = {"time__convert_time": CONVERT, "time__get_current_time": GET_TIME, "calculator": CALCULATOR}
    assert choose_tool("What time is it in Tokyo?", tools) == "time__get_current_time"  # fewer arguments
    assert choose_tool("Convert 14:30 from London to Tokyo", tools) == "time__convert_time"
    assert choose_tool("Show me the git log of /srv/app", {"git__git_log": GIT_LOG}) == "git__git_log"


def test_between_a_builtin_and_a_servers_tool_that_fit_as_well_the_servers_is_chosen():
    tools = {"current_time": CLOCK, "time__get_current_time": GET_TIME}
    assert choose_tool("What time is it?", tools) == "time__get_current_time"
    assert choose_tool("What time is it?", {"current_time": CLOCK}) == "current_time"


def test_no_tool_for_a_question_that_names_none_and_never_the_calculator_by_words():
    tools = {"time__get_current_time": GET_TIME, "calculator": CALCULATOR}
    assert choose_tool("Tell me about owls", tools) is None
    assert choose_tool("Please calculate an arithmetic expression for my taxes", tools) is None
    assert choose_tool("Get me the current weather", tools) is None  # "get" and "current" name no tool


# --- arguments from a schema -------------------------------------------------------------

def test_time_zones_come_from_the_question_as_iana_names_or_cities_in_order():
    assert tool_arguments(GET_TIME["parameters"], "What time is it in Tokyo?") == {"timezone": "Asia/Tokyo"}
    assert tool_arguments(GET_TIME["parameters"], "Time in America/Sao_Paulo?") == {"timezone": "America/Sao_Paulo"}
    assert tool_arguments(GET_TIME["parameters"], "What time is it?") == {"timezone": "UTC"}
    assert tool_arguments(CONVERT["parameters"], "Convert 9:05 from New York to Europe/Paris") == {
        "source_timezone": "America/New_York", "time": "09:05", "target_timezone": "Europe/Paris"}


def test_an_optional_property_is_sent_only_when_the_question_names_its_value():
    assert tool_arguments(CLOCK["parameters"], "What time is it?") == {}
    assert tool_arguments(CLOCK["parameters"], "What time is it in Paris?") == {"timezone": "Europe/Paris"}
    assert tool_arguments(GIT_LOG["parameters"], "git log of /srv/app") == {"repo_path": "/srv/app"}


def test_enums_numbers_urls_quotes_and_defaults():
    schema = {"type": "object", "required": ["mode", "count", "url", "title", "verbose"], "properties": {
        "mode": {"type": "string", "enum": ["fast", "thorough"], "default": "fast"},
        "count": {"type": "integer", "minimum": 1, "maximum": 20},
        "url": {"type": "string", "format": "uri"},
        "title": {"type": "string", "maxLength": 30},
        "verbose": {"type": "boolean", "default": True}}}
    asked = 'Fetch 5 pages of https://example.org/docs, thorough please, titled "Weekly notes"'
    assert tool_arguments(schema, asked) == {"mode": "thorough", "count": 5, "url": "https://example.org/docs",
                                             "title": "Weekly notes", "verbose": True}
    assert tool_arguments(schema, "Go", today=TODAY) == {"mode": "fast", "count": 1, "url": "https://example.com/",
                                                         "title": "Go", "verbose": True}
    out_of_bounds = tool_arguments(schema, "Fetch 500 pages")  # 500 is past maximum: not used
    assert out_of_bounds["count"] == 1


def test_references_any_of_and_all_of_are_read():
    schema = {"$defs": {"Zone": {"type": "string", "description": "time zone"}},
              "type": "object", "required": ["where", "when"],
              "properties": {"where": {"$ref": "#/$defs/Zone"},
                             "when": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}]}},
              "allOf": [{"required": ["unit"], "properties": {"unit": {"enum": ["s", "ms"]}}}]}
    assert tool_arguments(schema, "Berlin in 3 seconds") == {"where": "Europe/Berlin", "when": 3, "unit": "s"}


# --- arguments always validate (over schemas) --------------------------------------------

NAMES = ["timezone", "query", "url", "path", "count", "limit", "date", "time", "email", "name", "text", "mode"]
QUESTIONS = st.one_of(st.text(max_size=60), st.sampled_from([
    "What time is it in Tokyo?", "Convert 14:30 from London to New York", "Fetch https://example.org/a 3 times",
    'Search for "owls" since 2026-01-31', "Mail bob@example.com about /srv/app/notes.txt", "", "7 x 6",
]))


def _strings():
    plain = st.fixed_dictionaries({"type": st.just("string")}, optional={
        "minLength": st.integers(0, 5), "maxLength": st.integers(5, 40),
        "format": st.sampled_from(["date", "date-time", "uri", "email", "time"]),
        "default": st.text(max_size=12), "examples": st.lists(st.text(max_size=12), max_size=2),
        "description": st.sampled_from(["IANA time zone", "Time in HH:MM", "A file path", "Free text"])})
    listed = st.fixed_dictionaries({"enum": st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=4,
                                                     unique=True)}, optional={"type": st.just("string")})
    return st.one_of(plain, listed)


@st.composite
def _numbers(draw):
    integer = draw(st.booleans())
    step = draw(st.sampled_from([None, 1, 2, 5] if integer else [None, 0.5, 0.25, 2]))
    low = draw(st.integers(-10, 10))
    width = draw(st.integers(math.ceil(2 * (step or 1)), 40))
    schema = {"type": "integer" if integer else "number"}
    if step:
        schema["multipleOf"] = step
    if draw(st.booleans()):
        schema["exclusiveMinimum" if draw(st.booleans()) else "minimum"] = low
    if draw(st.booleans()):
        schema["exclusiveMaximum" if draw(st.booleans()) else "maximum"] = low + width
    if draw(st.booleans()):
        schema["default"] = draw(st.integers(-50, 50))
    return schema


LEAVES = st.one_of(_strings(), _numbers(), st.just({"type": "boolean"}), st.just({"type": "null"}),
                   st.just({"type": ["string", "null"]}), st.just({}))


def _containers(children):
    arrays = st.builds(lambda items, low, extra, unique: {
        "type": "array", "items": items, "minItems": low if not unique else min(low, 1),
        "maxItems": (low if not unique else min(low, 1)) + extra, **({"uniqueItems": True} if unique else {})},
        children, st.integers(0, 3), st.integers(0, 3), st.booleans())
    objects = st.builds(lambda props, data, closed: {
        "type": "object", "properties": props,
        "required": [name for name in props if data.draw(st.booleans())],
        **({"additionalProperties": False} if closed else {})},
        st.dictionaries(st.sampled_from(NAMES), children, max_size=4), st.data(), st.booleans())
    alternatives = st.builds(lambda a, b: {"anyOf": [a, b]}, children, children)
    return st.one_of(arrays, objects, alternatives)


@st.composite
def _tool_schemas(draw):
    properties = draw(st.dictionaries(st.sampled_from(NAMES), st.recursive(LEAVES, _containers, max_leaves=8),
                                      max_size=5))
    required = [name for name in properties if draw(st.booleans())]
    schema = {"type": "object", "properties": properties, "required": required}
    if properties and draw(st.booleans()):  # one property through a reference
        name = next(iter(properties))
        schema["$defs"] = {"Shared": properties[name]}
        properties[name] = {"$ref": "#/$defs/Shared"}
    if draw(st.booleans()):
        schema["additionalProperties"] = False
    return schema


@settings(max_examples=100, deadline=None)
@given(schema=_tool_schemas(), question=QUESTIONS)
def test_arguments_built_for_any_schema_validate_against_it_and_are_the_same_each_time(schema, question):
    arguments = tool_arguments(schema, question, today=TODAY)
    errors = [error.message for error in Draft202012Validator(schema).iter_errors(arguments)]
    assert errors == [], (schema, arguments)
    assert tool_arguments(schema, question, today=TODAY) == arguments
    assert set(schema["required"]) <= set(arguments)


# --- the calculator only for arithmetic --------------------------------------------------

def test_dates_and_clock_times_are_not_arithmetic():
    assert find_arithmetic("What is 17*23?") == "17*23" and find_arithmetic("6 x 7") == "6*7"
    assert find_arithmetic("What happened on 2026-12-07?") is None
    assert find_arithmetic("the meeting of 07/12/2026 at 14:30") is None
    assert find_arithmetic("Summarize the attached files") is None


# --- attached files ----------------------------------------------------------------------

NOTES = {"id": 12, "name": "notes.txt", "content_type": "text/plain", "size": 120, "kind": "text",
         "encoding": "utf-8", "text": "Meeting 2026-12-07\nBudget: 12-4 approved\n\nNext: hire two people\n"}
REPORT = {"id": 14, "name": "report.pdf", "kind": "pdf", "pages": 3, "pages_read": 3, "size": 9000,
          "text": "Quarterly report\nSales rose."}
SCREEN = {"id": 13, "name": "screen.png", "content_type": "image/png", "kind": "image", "width": 8,
          "height": 8, "size": 100, "data": "iVBORw0KGgo="}
TOOLS = {"calculator": CALCULATOR, "update_plan": {"description": "Write your plan"}}


def _asked(text, *files):
    return {"role": "user", "content": question_content({"content": text, "attachments": list(files)})}


def test_asked_to_summarize_attached_files_it_summarizes_each_and_never_calls_the_calculator():
    text, call = plan_reply([_asked("Summarize these files from 2026-12-07", NOTES, REPORT, SCREEN)], TOOLS)
    assert call is None
    assert text.startswith(f"{LABEL} You attached 3 files with your question.")
    assert "**notes.txt** (text/plain, 120 bytes, utf-8): 4 lines, 9 words; " \
           "it begins “Meeting 2026-12-07 / Budget: 12-4 approved”." in text
    assert "**report.pdf** (8.8 KB, 3 pages): 2 lines, 4 words; it begins “Quarterly report / Sales rose.”." in text
    assert "**screen.png** (image/png, 100 bytes, 8×8): an image; I cannot see images" in text


def test_a_long_file_says_its_middle_is_left_out():
    long = {**NOTES, "text": "first line\n" + "word " * 20_000 + "\nlast line"}
    text, _ = plan_reply([{"role": "user", "content": question_content(
        {"content": "What is in it?", "attachments": [long]}, limit=2_000)}], {})
    assert "characters, is left out: read_file reads it)" in text and "it begins “first line" in text


def test_a_later_question_about_the_files_reads_those_attached_earlier():
    history = [_asked("Here you go", NOTES), {"role": "assistant", "content": "Thanks."},
               {"role": "user", "content": "Can you summarize the file?"}]
    text, call = plan_reply(history, TOOLS)
    assert call is None and "You attached 1 file earlier in this conversation" in text and "notes.txt" in text


def test_arithmetic_in_the_question_still_computes_with_files_attached():
    text, call = plan_reply([_asked("What is 17*23?", NOTES)], {"calculator": CALCULATOR})
    assert call == ("calculator", json.dumps({"expression": "17*23"}))


# --- calls, results, stops ---------------------------------------------------------------

def test_it_calls_a_servers_tool_then_answers_from_its_result():
    tools = {"time__get_current_time": GET_TIME}
    question = [{"role": "user", "content": "What time is it in Tokyo?"}]
    text, call = plan_reply(question, tools)
    assert call == ("time__get_current_time", '{"timezone": "Asia/Tokyo"}')
    assert text == (f"{LABEL} Your question asks for `time · get_current_time`: "
                    'let me call it with timezone "Asia/Tokyo".')
    result = '{"timezone": "Asia/Tokyo", "datetime": "2026-12-07T18:00:00+09:00", "is_dst": false}'
    history = question + [{"role": "assistant", "content": text, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": call[0], "arguments": call[1]}}]},
        {"role": "tool", "tool_call_id": "c1", "content": result}]
    answer, again = plan_reply(history, tools)
    assert again is None
    assert answer == (f"{LABEL} `time · get_current_time` returned: timezone Asia/Tokyo; "
                      "datetime 2026-12-07T18:00:00+09:00; is_dst false.")


def test_a_call_a_person_denied_is_said_to_have_given_no_result_never_an_answer():
    question = [{"role": "user", "content": "What is 2+3?"}]
    text, call = plan_reply(question, {"calculator": CALCULATOR})
    denied = ("[tool status: denied]\n[denied] The person denied this call, saying: Not now. "
              "The tool was not called.")
    history = question + [{"role": "assistant", "content": text, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": call[0], "arguments": call[1]}}]},
        {"role": "tool", "tool_call_id": "c1", "content": denied}]
    answer, again = plan_reply(history, {"calculator": CALCULATOR})
    assert again is None
    assert answer == (f"{LABEL} `calculator` gave no result (denied): [denied] The person denied this call, "
                      "saying: Not now. The tool was not called.")


def test_an_answer_stopped_midway_goes_on_from_where_it_stopped():
    question = [{"role": "user", "content": "Tell me about owls"}]
    whole, _ = plan_reply(question, {})
    cut = whole[:40]
    resumed = question + [{"role": "assistant", "content": cut + "\n\n[interrupted: this response was cut off "
                                                                    "before it finished]"},
                          {"role": "user", "content": "[Continue from where the conversation left off.]"}]
    rest, call = plan_reply(resumed, {})
    assert call is None and cut + rest == whole


def test_it_streams_word_by_word_pausing_between_words_and_before_a_call():
    waits: list[float] = []
    client = DemoChatClient(pace=0.25, sleep=waits.append)
    events = list(client.stream_chat({"messages": [{"role": "user", "content": "What time is it in Tokyo?"}],
                                      "tools": [_tool("time__get_current_time", GET_TIME)]}))
    words = [e for e in events if isinstance(e, TextDelta)]
    end = events[-1]
    assert isinstance(end, StreamEnd) and "".join(w.text for w in words) == end.text
    assert len(words) == len(end.text.split()) and any(isinstance(e, ToolCallDelta) for e in events)
    assert waits == [0.25] * len(words)  # between words, and once before the call
    assert list(DemoChatClient().stream_chat({"messages": [{"role": "user", "content": "Hi"}]}))  # no pause: no sleep
    long = list(DemoChatClient().stream_chat({"messages": [{"role": "user", "content": "word " * 500}]}))
    assert sum(isinstance(e, TextDelta) for e in long) <= MAX_PIECES


def test_asked_by_the_platform_for_a_summary_with_tools_offered_it_calls_none():
    from context.compaction.prompt import cached_summary_instruction

    history = [{"role": "user", "content": "Make a plan for my trip"}, {"role": "assistant", "content": "Sure."},
               cached_summary_instruction(kept=1, max_chars=2_000)]
    tools = {"update_plan": {"description": "Write your plan"}, "time__get_current_time": GET_TIME}
    text, call = plan_reply(history, tools)
    assert call is None and text.startswith(f"{LABEL} You asked: “[AgentLoom compaction")


def test_a_question_asking_for_no_tool_is_told_which_tools_it_could_ask_for():
    tools = {"calculator": CALCULATOR, "update_plan": {"description": "Write your plan"},
             "time__get_current_time": GET_TIME}
    text, call = plan_reply([{"role": "user", "content": "Tell me about owls"}], tools)
    assert call is None and "I can call `time · get_current_time`: ask for what it does" in text
    assert "Give me arithmetic (17*23) and I will use the calculator." in text and "update_plan" not in text
