"""The pure parts of a server's question (TOOL-10, ``toolservers.asking``): literal in, literal out."""
from __future__ import annotations

import pytest

from core.redaction import Redactor
from toolservers.asking import Question, answer_for_record, content_errors, question_of

FORM = {"type": "object", "required": ["name", "size"],
        "properties": {"name": {"type": "string", "title": "Name", "maxLength": 5},
                       "size": {"type": "string", "enum": ["S", "M", "L"]},
                       "count": {"type": "integer", "minimum": 1},
                       "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
                       "password": {"type": "string"},
                       "code": {"type": "string", "title": "Access code"},
                       "note": {"type": "string", "format": "password"}}}


@pytest.mark.parametrize("content, errors", [
    ({"name": "Ada", "size": "M"}, {}),
    ({"name": "Ada", "size": "M", "count": 2, "tags": ["a"]}, {}),
    ({"size": "M"}, {"name": "required"}),
    ({"name": "Ada", "size": "XL"}, {"size": "'XL' is not one of ['S', 'M', 'L']"}),
    ({"name": "Adalbert", "size": "S"}, {"name": "'Adalbert' is too long"}),
    ({"name": "Ada", "size": "S", "count": 0}, {"count": "0 is less than the minimum of 1"}),
    ({"name": "Ada", "size": "S", "extra": 1}, {"extra": "not a field of this form"}),
    ({"name": {"first": "Ada"}, "size": "S"}, {"name": "must be a string, number, boolean or list of strings"}),
    (["Ada"], {"content": "must be an object of the form's fields"}),
])
def test_an_answer_is_checked_against_the_requested_schema_field_by_field(content, errors):
    assert content_errors(FORM, content) == errors


def test_a_schema_that_refers_outside_itself_is_never_fetched_and_the_shape_still_checked():
    schema = {"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}}
    assert content_errors(schema, {"a": "x"}) == {}
    assert content_errors(schema, {"b": "x"}) == {"b": "not a field of this form"}


def test_the_record_keeps_no_credential_by_field_name_format_title_value_or_the_runs_secrets():
    run_secret = "tok-1234567890"
    content = {"name": "Ada", "size": "M", "password": "hunter2", "code": "4711", "note": "n0te",
               "count": 3, "tags": [f"x{run_secret}"], "other": "ghp_abcdef", "order": "ORDER-1234"}
    kept = answer_for_record(content, FORM, Redactor([run_secret]).content)
    assert kept == {"name": "Ada", "size": "M", "password": "[REDACTED]", "code": "[REDACTED]",
                    "note": "[REDACTED]", "count": 3, "tags": ["x[REDACTED]"], "other": "[REDACTED]",
                    "order": "ORDER-1234"}
    assert answer_for_record(None, FORM, Redactor([]).content) is None


def test_the_sdks_params_become_a_question_of_either_mode():
    from mcp_types import ElicitRequestFormParams, ElicitRequestURLParams

    form = question_of(ElicitRequestFormParams(message="Who?", requested_schema=FORM))
    assert form == Question("form", "Who?", schema=FORM)
    url = question_of(ElicitRequestURLParams(message="Sign in", url="https://x.example/a", elicitation_id="1"))
    assert url == Question("url", "Sign in", url="https://x.example/a")
