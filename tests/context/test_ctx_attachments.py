"""RUN-13: a question's files in the model view -- literal inputs, exact outputs."""

from __future__ import annotations

import base64
import json
import re

import pytest
from histories import build, histories
from hypothesis import given, settings
from hypothesis import strategies as st

from context import build_request_body, estimator_by_id, project_records, validate_request
from context.anthropic import build_anthropic_body
from context.anthropic_validate import anthropic_body_problems
from context.attachments import READ_FILE_MAX_CHARS, attachment_parts, question_message, session_files
from context.compaction.state import render_runtime_state
from context.compaction.types import RuntimeState
from context.estimators import BYTES_IMAGE_UNITS
from tests.fakes.anthropic_rules import refusal
from tests.fakes.strict import protocol_problems

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64).decode()
LOG = {"id": 12, "name": "app.log", "content_type": "text/plain", "size": 2_097_152, "kind": "text",
       "encoding": "utf-8"}
SCREEN = {"id": 13, "name": "screen.png", "content_type": "image/png", "size": 12_345, "kind": "image",
          "width": 800, "height": 600, "data": PNG}


def question(*attachments, text="What is wrong?", seq=1, run="r1"):
    return {"seq": seq, "run": run, "instance": "main", "kind": "user",
            "message": {"role": "user", "content": text, "attachments": list(attachments)}}


def test_a_short_text_file_is_inline_in_a_labelled_block_after_the_question() -> None:
    view = project_records([question({**LOG, "size": 24, "text": "ERROR: disk full\nbye\n"})])
    assert view == [{"role": "user", "content": (
        "What is wrong?\n\n[File app.log · id 12 · text/plain · 24 bytes · utf-8]\nERROR: disk full\nbye\n\n"
        "[end of app.log]")}]


def test_a_long_file_shows_head_and_tail_and_names_the_read_file_call_for_the_middle() -> None:
    text = "".join(f"line {i:07d}\n" for i in range(160_000))  # 2,080,000 characters
    content = project_records([question({**LOG, "text": text})])[0]["content"]
    block = content.split("\n\n", 1)[1]
    assert block.startswith("[File app.log · id 12 · text/plain · 2.0 MB · utf-8]\nline 0000000\n")
    assert block.endswith("line 0159999\n\n[end of app.log]")
    found = re.search(r'read_file (\{"file_id": 12, "offset": (\d+), "limit": (\d+)\}), then the next offset each '
                      r'time, up to offset (\d+)', block)
    assert found is not None
    arguments = json.loads(found.group(1))
    offset, end = int(found.group(2)), int(found.group(4))
    assert arguments == {"file_id": 12, "offset": offset, "limit": READ_FILE_MAX_CHARS}
    assert offset + (len(text) - end) == 24_000  # CTX-7's budget, head and tail halves
    assert block.startswith(f"[File app.log · id 12 · text/plain · 2.0 MB · utf-8]\n{text[:offset]}\n[... ")
    assert block.endswith(f"]\n{text[end:]}\n[end of app.log]")
    assert f"({offset:,} to {end:,} of {len(text):,})".replace("(", "(characters ") in block


def test_files_of_one_question_share_the_limit_short_ones_whole() -> None:
    short = {**LOG, "id": 1, "name": "a.txt", "text": "a" * 1_000}
    long_one = {**LOG, "id": 2, "name": "b.txt", "text": "b" * 50_000}
    parts = attachment_parts([short, long_one], 24_000)
    assert "a" * 1_000 + "\n[end of a.txt]" in parts[0]["text"]
    shown = parts[1]["text"].count("b")
    assert 22_900 <= shown <= 23_000 + 10  # the rest of the budget (a few b's are in the note's words)
    many = attachment_parts([{**LOG, "id": i, "text": "x" * 10_000} for i in range(100)], 24_000)
    assert all(f'read_file {{"file_id": {i}, "offset": 0' in p["text"] for i, p in enumerate(many))


def test_a_pdf_says_its_pages_and_how_many_were_read() -> None:
    pdf = {"id": 14, "name": "contract.pdf", "content_type": "application/pdf", "size": 99_999, "kind": "pdf",
           "pages": 250, "pages_read": 200, "text": "Clause 1."}
    assert attachment_parts([pdf])[0]["text"] == (
        "[File contract.pdf · id 14 · application/pdf · 97.7 KB · text of the first 200 of 250 pages]\nClause 1.\n"
        "[end of contract.pdf]")


def test_an_image_is_an_image_part_on_both_wires_for_a_model_that_takes_images() -> None:
    view = project_records([question(SCREEN)])
    assert view[0]["content"] == [
        {"type": "text", "text": "What is wrong?"},
        {"type": "text", "text": "[Image screen.png · id 13 · image/png · 12.1 KB · 800×600]"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]
    openai = build_request_body(view, dialect="openai", model="m", max_output_tokens=64, supports_images=True)
    assert openai["messages"][0]["content"][2] == view[0]["content"][2]
    assert protocol_problems(openai) == []
    native = build_anthropic_body(view, model="claude-x", max_tokens=64, supports_images=True, cache=False)
    assert native["messages"][0]["content"][2] == {
        "type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    assert anthropic_body_problems(native) == [] and refusal(native) is None


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_a_model_without_image_input_gets_a_note_naming_the_file_not_the_bytes(dialect) -> None:
    view = project_records([question(SCREEN)])
    note = "[Image screen.png · id 13 · image/png · 12.1 KB · 800×600 — this model does not take images; " \
           "the person attached it]"
    if dialect == "openai":
        sent = build_request_body(view, dialect="openai", model="m", max_output_tokens=64, supports_images=False)
        assert sent["messages"][0]["content"] == f"What is wrong?\n{note}"
    else:
        sent = build_anthropic_body(view, model="claude-x", max_tokens=64, supports_images=False, cache=False)
        assert sent["messages"][0]["content"] == [{"type": "text", "text": f"What is wrong?\n{note}"}]
    assert PNG not in json.dumps(sent)


def test_user_images_are_never_trimmed_by_the_screenshot_rule() -> None:
    shot = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    records = [question(SCREEN, seq=1),
               {"seq": 2, "run": "r1", "instance": "main", "kind": "assistant", "message": {
                   "role": "assistant", "content": None, "tool_calls": [
                       {"id": "a", "type": "function", "function": {"name": "browser_use", "arguments": "{}"}},
                       {"id": "b", "type": "function", "function": {"name": "browser_use", "arguments": "{}"}}]}},
               {"seq": 3, "run": "r1", "instance": "main", "kind": "tool_result",
                "message": {"tool_call_id": "a", "content": [{"type": "text", "text": "one"}, shot]}},
               {"seq": 4, "run": "r1", "instance": "main", "kind": "tool_result",
                "message": {"tool_call_id": "b", "content": [{"type": "text", "text": "two"}, shot]}}]
    view = project_records(records)
    assert view[0]["content"][2]["type"] == "image_url"  # the person's image stays
    assert "earlier screenshot omitted" in json.dumps(view[2])  # while the older screenshot goes


def test_an_image_counts_what_the_provider_bills_not_its_base64_length() -> None:
    big = {**SCREEN, "data": PNG + "A" * 4_000_000}
    estimator = estimator_by_id("bytes-v1")
    with_image = estimator.message(question_message({"content": "Hi", "attachments": [big]}))
    without = estimator.message(question_message({"content": "Hi", "attachments": [{**big, "kind": "text"}]}))
    assert with_image < 2_000 + BYTES_IMAGE_UNITS
    assert without < 30_000  # (a text file without text: its label and note)


@pytest.mark.parametrize("part", [
    {"type": "image_url", "image_url": "data:image/png;base64,iVBORw0KGgo="},
    {"type": "image_url", "image_url": {"url": "iVBORw0KGgo="}},
    {"type": "image_url", "image_url": {"url": "ftp://example.org/a.png"}},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,not base64!"}},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "max"}},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "name": "a.png"}},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}, "name": "a.png"},
])
def test_the_validator_refuses_malformed_image_parts(part) -> None:
    problems = validate_request([{"role": "user", "content": [{"type": "text", "text": "Hi"}, part]}])
    assert [p.rule for p in problems] == ["image-part"]


def test_the_validator_accepts_well_formed_image_parts() -> None:
    for url in (f"data:image/png;base64,{PNG}", "https://example.org/a.png"):
        part = {"type": "image_url", "image_url": {"url": url, "detail": "low"}}
        assert validate_request([{"role": "user", "content": [part]}]) == []


def test_the_strict_fakes_refuse_wrong_image_shapes_in_the_apis_words() -> None:
    def body(part, role="user"):
        return {"model": "m", "max_tokens": 8, "messages": [{"role": role, "content": [part]}]}
    assert protocol_problems(body({"type": "image_url", "image_url": {"url": "iVBORw0KGgo="}})) == [
        "Invalid image URL: 'messages[0].content[0].image_url.url'. Expected a base64-encoded data URL with an image "
        "MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got a value without the 'data:' prefix."]
    assert protocol_problems(body({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}))[0] \
        .startswith("You uploaded an unsupported image.")
    assert "Image URLs are only allowed for messages with role 'user'" in protocol_problems(body(
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}, role="assistant"))[0]
    native = {"model": "claude-x", "max_tokens": 8, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": PNG}}]}]}
    assert refusal(native) == (400, "invalid_request_error", "messages.0.content.0.image.source.base64.data: Image "
                               "does not match the provided media type image/jpeg")
    native["messages"][0]["content"][0]["source"].update(media_type="image/png", data="")
    assert refusal(native)[2] == "messages.0.content.0.image.source.base64: image cannot be empty"


def test_the_runtime_state_lists_the_sessions_files_once_each() -> None:
    records = [question({**LOG, "text": "x"}, SCREEN, seq=1), question({**LOG, "text": "x"}, seq=2),
               {"seq": 3, "kind": "tool_result", "message": {"attachments": [{"id": 99}]}}]
    files = session_files(records)
    assert files == ({"id": 12, "name": "app.log", "kind": "text", "size": 2_097_152},
                     {"id": 13, "name": "screen.png", "kind": "image", "size": 12_345})
    block = render_runtime_state(RuntimeState(files=files))
    assert block is not None and block["content"].endswith(
        'read one again with read_file {"file_id": <its id>, "offset": 0, "limit": 20000}):\n'
        "- app.log (id 12, text, 2.0 MB)\n- screen.png (id 13, image, 12.1 KB)")


def test_a_record_without_attachments_is_exactly_as_before() -> None:
    record = {"seq": 1, "run": "r1", "instance": "main", "kind": "user",
              "message": {"role": "user", "content": [{"type": "text", "text": "Hi"}]}}
    assert project_records([record]) == [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]


@settings(max_examples=300, deadline=None)
@given(events=histories(), images=st.booleans())
def test_every_history_with_attachments_projects_to_a_request_both_wires_accept(events, images) -> None:
    history = build(events)
    projected = project_records(history.records)
    if not projected:
        return
    request = [{"role": "system", "content": "You are an agent."}, *projected]
    openai = build_request_body(request, dialect="openai", model="m", max_output_tokens=64, supports_images=images)
    assert protocol_problems(openai) == []
    native = build_anthropic_body(request, model="claude-x", max_tokens=64, supports_images=images, cache=False)
    assert anthropic_body_problems(native) == [] and refusal(native) is None, refusal(native)
    sent = json.dumps(openai, ensure_ascii=False)
    if not images:
        assert "image_url" not in sent
    for file in session_files(r for r in history.records if r["seq"] > history.last_checkpoint):
        assert f"id {file['id']} ·" in sent  # every file is named, with its id
