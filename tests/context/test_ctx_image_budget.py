"""RUN-13: one request carries the newest images within the providers' limits; older
ones become notes naming the file -- literal inputs, exact outputs, and a property over
every history."""

from __future__ import annotations

import base64
import copy
import json
import struct

import pytest
from histories import build, histories
from hypothesis import given, settings
from hypothesis import strategies as st
from recordkit import assistant, call, image, result, text

from context import (
    DEFAULT_IMAGE_BUDGET,
    ImageBudget,
    apply_image_budget,
    build_anthropic_body,
    build_request_body,
    project_records,
)
from context.anthropic_validate import anthropic_body_problems
from context.attachments import image_bytes, question_message, session_files
from context.projector import Projection
from context.records import is_image_part
from tests.fakes.anthropic_rules import refusal, size_refusal
from tests.fakes.image_rules import dimensions
from tests.fakes.strict import protocol_problems

MB = 1024 * 1024


def png(width: int = 8, height: int = 8, size: int = 64) -> str:
    """A PNG's base64: its signature and header (the size the APIs read), padded to ``size`` bytes."""
    head = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + struct.pack(">II", width, height) + b"\x08\x02\x00\x00\x00"
    return base64.b64encode(head + b"\x00" * max(0, size - len(head))).decode()


def picture(file_id: int, data: str, name: str | None = None, width: int = 8, height: int = 8) -> dict:
    return {"id": file_id, "name": name or f"shot{file_id}.png", "content_type": "image/png", "size": 64,
            "kind": "image", "width": width, "height": height, "data": data}


def question(seq: int, *attachments: dict, text: str | None = None) -> dict:
    return {"seq": seq, "run": f"r{seq}", "instance": "main", "kind": "user",
            "message": {"role": "user", "content": text or f"Q{seq}", "attachments": list(attachments)}}


def answer(seq: int) -> dict:
    return {"seq": seq, "run": f"r{seq - 1}", "instance": "main", "kind": "assistant",
            "message": {"role": "assistant", "content": f"A{seq}"}}


def images_of(messages: list[dict]) -> list[dict]:
    return [p for m in messages if isinstance(m.get("content"), list) for p in m["content"] if is_image_part(p)]


def left_out(name: str, file_id: int) -> str:
    return (f"[Image {name} · id {file_id} · image/png · 64 bytes · 8×8 — left out of this request to keep it "
            "within the provider's limits on images; attach it again to show it]")


def test_the_newest_images_are_kept_and_an_older_one_becomes_a_note_naming_the_file() -> None:
    data = png()
    records = [question(1, picture(1, data)), answer(2), question(3, picture(2, data)), answer(4),
               question(5, picture(3, data))]
    view = project_records(records, image_budget=ImageBudget(max_images=2))
    assert view[0] == {"role": "user", "content": [{"type": "text", "text": "Q1"},
                                                   {"type": "text", "text": left_out("shot1.png", 1)}]}
    assert [m["content"][1]["text"] for m in (view[2], view[4])] == [
        "[Image shot2.png · id 2 · image/png · 64 bytes · 8×8]",
        "[Image shot3.png · id 3 · image/png · 64 bytes · 8×8]"]
    assert len(images_of(view)) == 2 and view[2:] == project_records(records)[2:]


def test_within_one_question_the_last_files_are_the_newest() -> None:
    data = png()
    view = project_records([question(1, picture(1, data), picture(2, data), picture(3, data))],
                           image_budget=ImageBudget(max_images=1))
    assert [p.get("text") for p in view[0]["content"]] == [
        "Q1", left_out("shot1.png", 1), left_out("shot2.png", 2),
        "[Image shot3.png · id 3 · image/png · 64 bytes · 8×8]", None]


def test_past_the_byte_budget_every_older_image_is_left_out_even_a_small_one() -> None:
    small, large = png(size=30), png(size=3000)
    records = [question(1, picture(1, small)), answer(2), question(3, picture(2, large)), answer(4),
               question(5, picture(3, large))]
    budget = ImageBudget(max_bytes=len(large) + len(small))  # room for the newest and the small oldest one
    view = project_records(records, image_budget=budget)
    texts = [p["text"] for m in view if isinstance(m["content"], list) for p in m["content"] if "text" in p]
    assert left_out("shot2.png", 2) in texts
    assert left_out("shot1.png", 1) in texts  # newest first: nothing older than a cut is sent
    assert images_of(view) == [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{large}"}}]


def test_an_image_too_large_for_any_request_says_so_and_leaves_room_for_older_ones() -> None:
    huge = png(size=4 * MB)  # 5.3 MB of base64: Anthropic refuses it whatever else the request holds
    wide = picture(3, png(9000, 10), width=9000, height=10)
    view = project_records([question(1, picture(1, png())), answer(2), question(3, picture(2, huge), wide)])
    notes = [p["text"] for p in view[2]["content"] if p["type"] == "text"][1:]
    assert notes == [
        "[Image shot2.png · id 2 · image/png · 64 bytes · 8×8 — too large for the model's provider (at most 5 MB "
        "once encoded and 8,000 px a side); attach a smaller copy]",
        "[Image shot3.png · id 3 · image/png · 64 bytes · 9000×10 — too large for the model's provider (at most 5 MB "
        "once encoded and 8,000 px a side); attach a smaller copy]"]
    assert len(images_of(view)) == 1  # the older, small one is still sent


def test_a_tool_results_images_count_and_become_a_plain_note() -> None:
    data = f"data:image/png;base64,{png()}"
    messages = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": data}}]},
                {"role": "tool", "tool_call_id": "c1", "content": [
                    {"type": "text", "text": "plot"}, {"type": "image_url", "image_url": {"url": data}}]}]
    before = copy.deepcopy(messages)
    handed = list(messages)
    assert apply_image_budget(handed, ImageBudget(max_images=1)) == [0]
    assert handed[0] == {"role": "user", "content": [{"type": "text", "text": (
        "[an image left out of this request to keep it within the provider's limits on images]")}]}
    assert handed[1] is messages[1] and messages == before  # replaced, never changed in place


def test_the_default_budget_keeps_twenty_images_of_a_long_session_and_the_inspector_is_told() -> None:
    records = []
    for k in range(25):
        records += [question(2 * k + 1, picture(k, png())), answer(2 * k + 2)]
    repairs: list = []
    view = project_records(records, repairs_out=repairs)
    assert DEFAULT_IMAGE_BUDGET == ImageBudget(max_images=20, max_bytes=20 * MB, max_image_bytes=5 * MB,
                                               max_side=8000)
    assert len(images_of(view)) == 20
    assert [r["position"] for r in repairs if r["kind"] == "image_left_out"] == [0, 2, 4, 6, 8]
    assert left_out("shot4.png", 4) in json.dumps(view, ensure_ascii=False)


def test_a_budget_is_never_negative() -> None:
    with pytest.raises(ValueError):
        ImageBudget(max_images=-1)


def _sent(view: list[dict], images: bool = True) -> tuple[dict, dict]:
    request = [{"role": "system", "content": "You are an agent."}, *view]
    openai = build_request_body(request, dialect="openai", model="m", max_output_tokens=64, supports_images=images)
    native = build_anthropic_body(request, model="claude-x", max_tokens=64, supports_images=images, cache=False)
    return openai, native


def test_without_the_budget_the_strict_fakes_refuse_what_a_long_session_would_send() -> None:
    # 101 small screenshots: Anthropic counts every image of the request.
    many = [question(k + 1, picture(k, png())) if k % 2 == 0 else answer(k + 1) for k in range(202)]
    _, native = _sent(project_records(many, image_budget=None))
    assert refusal(native) == (400, "invalid_request_error", "Too much media: 0 document pages + 101 images > 100")
    _, native = _sent(project_records(many))
    assert refusal(native) is None
    # Eight 3.5 MB images (4.7 MB of base64 each): each fits, together past the 32 MB body.
    heavy = [question(k + 1, picture(k, png(size=int(3.5 * MB)))) if k % 2 == 0 else answer(k + 1) for k in range(16)]
    openai, native = _sent(project_records(heavy, image_budget=None))
    assert size_refusal(json.dumps(native).encode()) == (413, "request_too_large", "Request exceeds the maximum size")
    openai, native = _sent(project_records(heavy))
    assert size_refusal(json.dumps(native).encode()) is None and refusal(native) is None
    assert protocol_problems(openai) == []
    # Twenty-five images: past 20, Anthropic takes none over 2000 px a side.
    wide = [question(k + 1, picture(k, png(2400, 100), width=2400, height=100)) if k % 2 == 0 else answer(k + 1)
            for k in range(50)]
    _, native = _sent(project_records(wide, image_budget=None))
    assert refusal(native)[2] == ("messages.0.content.2.image.source.base64.data: At least one of the image "
                                  "dimensions exceed max allowed size for many-image requests: 2000 pixels")
    _, native = _sent(project_records(wide))
    assert refusal(native) is None


def test_the_strict_fakes_refuse_images_past_the_apis_limits_in_their_words() -> None:
    def native(*datas: str) -> dict:
        return {"model": "claude-x", "max_tokens": 8, "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": d}} for d in datas]}]}

    big = png(size=4 * MB)
    assert refusal(native(png(), big)) == (400, "invalid_request_error", (
        f"messages.0.content.1.image.source.base64: image exceeds 5 MB maximum: {len(big)} bytes > 5242880 bytes"))
    assert refusal(native(png(8001, 10)))[2] == ("messages.0.content.0.image.source.base64.data: At least one of "
                                                 "the image dimensions exceed max allowed size: 8000 pixels")
    assert refusal(native(png(8000, 8000))) is None
    assert dimensions(base64.b64decode(png(640, 480))) == (640, 480)

    def openai(*datas: str) -> dict:
        return {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{d}"}} for d in datas]}]}

    assert protocol_problems(openai(*[png()] * 501)) == ["Too many images in request. Max is 500."]
    assert protocol_problems(openai(*[png(size=13 * MB)] * 4)) == [
        "Total image size is 52.0MB, which exceeds the allowed limit of 50.0MB."]
    assert protocol_problems(openai(png(size=21 * MB)))[0].startswith("You uploaded an unsupported image.")


BUDGETS = st.builds(ImageBudget, max_images=st.integers(0, 3), max_bytes=st.integers(0, 40),
                    max_image_bytes=st.sampled_from([8, 11, 12, 5 * MB]), max_side=st.sampled_from([4, 8000]))


@settings(max_examples=300, deadline=None)
@given(events=histories(), budget=BUDGETS, images=st.booleans(), cuts=st.lists(st.integers(0, 60), max_size=4))
def test_any_projected_request_keeps_within_its_image_budget_and_both_wires_accept_it(
        events, budget, images, cuts) -> None:
    history = build(events)
    records = history.records
    view = project_records(records, image_budget=budget)
    sent = images_of(view)
    assert len(sent) <= budget.max_images
    assert sum(image_bytes(p) for p in sent) <= budget.max_bytes
    assert all(image_bytes(p) <= budget.max_image_bytes for p in sent)
    # A step kept from the one before gives the same as a fresh projection, cut anywhere.
    projection, done = Projection(image_budget=budget), 0
    for point in [*sorted({min(c, len(records)) for c in cuts}), len(records)]:
        projection.extend(records[done:point])
        done = point
        assert projection.project().messages == project_records(records[:point], image_budget=budget)
    if not view:
        return
    openai, native = _sent(view, images)
    assert protocol_problems(openai) == []
    assert anthropic_body_problems(native) == [] and refusal(native) is None, refusal(native)
    text = json.dumps(openai, ensure_ascii=False)
    for file in session_files(r for r in records if r["seq"] > history.last_checkpoint):
        assert f"id {file['id']} ·" in text  # every file is named, sent or left out


def test_a_question_as_the_view_shows_it_carries_its_newest_images_within_the_budget() -> None:
    record = question(1, *[picture(k, png()) for k in range(25)])
    anchor = question_message(record["message"])  # the task anchor of a compacted view
    assert len(images_of([anchor])) == 20 and left_out("shot4.png", 4) in json.dumps(anchor, ensure_ascii=False)
    assert [anchor] == project_records([record])
    assert len(images_of([question_message(record["message"], image_budget=None)])) == 25


def test_a_kept_projection_sends_an_older_image_again_once_a_newer_screenshot_frees_its_room() -> None:
    shot = image(f"data:image/png;base64,{png()}")
    records = [question(1, picture(1, png())),
               assistant(2, None, [call("s1", "browser_use")], run="r1"),
               result(3, "s1", [text("page one"), shot, shot], run="r1", name="browser_use")]
    budget = ImageBudget(max_images=2)
    projection = Projection(image_budget=budget)
    projection.extend(records)
    first = projection.project({"r1"}).messages
    assert left_out("shot1.png", 1) in json.dumps(first, ensure_ascii=False)  # the two screen images are newer
    later = [assistant(4, None, [call("s2", "browser_use")], run="r1"),
             result(5, "s2", [text("page two"), shot], run="r1", name="browser_use")]
    projection.extend(later)
    second = projection.project({"r1"}).messages  # CTX-8 strips the first screen: room for the file again
    assert second == project_records(records + later, open_runs={"r1"}, image_budget=budget)
    assert second[0]["content"][1]["text"] == "[Image shot1.png · id 1 · image/png · 64 bytes · 8×8]"
    assert len(images_of(second)) == 2
