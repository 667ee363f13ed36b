"""RUN-13 in the run loop, on a real loopback socket and both wires: a question's files
reach the model as the view shows them, ``read_file`` reads the rest, a compaction keeps
their names and ids, and images arrive in each API's own shape (or as a note).

The question records are written the way the question service writes them (its user
record carries ``attachments``, its files are marked with the question), without the
upload endpoints.
"""
from __future__ import annotations

import base64
import json
import re

import pytest

from context.attachments import READ_FILE_MAX_CHARS
from context.compaction import SECTION_TITLES
from models_catalog.models import ModelConnection
from runloop.compaction_manual import compaction_manual
from runloop.loop import run_execute
from sessions.models import CompactionSnapshot, Run, SessionFile, SessionMessage
from sessions.services.manual_compaction import compaction_request
from sessions.services.questions import question_ask
from tests.fakes.fake_provider import chat_stream
from tests.fakes.summaries import is_summary

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")

LOG_TEXT = "".join(f"{n:07d} INFO request served in 12 ms\n" for n in range(60_000))  # ~2 MB
MIDDLE = "0031337 INFO request served in 12 ms"  # neither in the head nor in the tail
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 32).decode()


def log_file(file_id=12):
    return {"id": file_id, "name": "app.log", "content_type": "text/plain", "size": 2_097_152, "kind": "text",
            "encoding": "utf-8", "text": LOG_TEXT}


def screen(file_id=13):
    return {"id": file_id, "name": "screen.png", "content_type": "image/png", "size": 44, "kind": "image",
            "width": 800, "height": 600, "data": PNG}


def ask_with_files(session, content, files, *, execute=True):
    """A question whose record carries ``files`` as the question service stores them, and
    the files, marked with their question as that service marks them."""
    run = question_ask(session=session, content=content)
    record = SessionMessage.objects.get(run=run, kind="user")
    record.message = {**record.message, "attachments": files}
    record.save(update_fields=["message"])
    for file in files:
        SessionFile.objects.create(pk=file["id"], session=session, name=file["name"], kind=file["kind"],
                                   content_type=file["content_type"], size=file["size"], sha256="0" * 64,
                                   data=b"", text=file.get("text", ""), question_seq=record.seq)
    if execute:
        run_execute(run_id=run.pk)
        run.refresh_from_db()
    return run


def _user_text(request):
    return "\n".join(m["content"] for m in request.json["messages"] if m["role"] == "user")


def _read_call(text):
    found = re.search(r'read_file (\{"file_id": \d+, "offset": \d+, "limit": \d+\})', text)
    assert found is not None, text[-3_000:]
    return json.loads(found.group(1))


def test_run13_a_long_file_reaches_the_model_as_head_and_tail_and_read_file_reads_the_middle(fake_session, strict,
                                                                                            fake):
    seen = []

    def handler(request):
        seen.append(request)
        tool_results = [m for m in request.json["messages"] if m["role"] == "tool"]
        if not tool_results:
            arguments = _read_call(_user_text(request))
            arguments["offset"] = LOG_TEXT.index(MIDDLE)
            return chat_stream(tool_calls=[{"id": "r1", "name": "read_file", "arguments": json.dumps(arguments)}])
        return chat_stream(["Line 31337 was served in 12 ms."])

    strict.handler = handler
    # The agent did not choose read_file: a session with files gets it. The head, tail and
    # middle read of a log are ~50,000 characters, two fifths of them digits: about 31,000
    # tokens for a tokenizer that splits digits (CTX-24), so the window is 64k, not 32k.
    session = fake_session(window=65_536)
    run = ask_with_files(session, "Which request is line 31337?", [log_file()])
    assert run.status == Run.Status.COMPLETED, run.error
    first = _user_text(seen[0])
    assert first.startswith("Which request is line 31337?\n\n[File app.log · id 12 · text/plain · 2.0 MB · utf-8]\n"
                            "0000000 INFO")
    assert first.endswith("0059999 INFO request served in 12 ms\n\n[end of app.log]")
    assert MIDDLE not in first and len(first) < 30_000
    assert _read_call(first) == {"file_id": 12, "offset": first.index("\n[... ") - first.index("0000000"),
                                 "limit": READ_FILE_MAX_CHARS}
    assert "read_file" in [t["function"]["name"] for t in seen[0].json["tools"]]
    result = [m for m in seen[1].json["messages"] if m["role"] == "tool"][0]["content"]
    assert result.startswith(f"[file 12 (app.log), characters {LOG_TEXT.index(MIDDLE)}–")
    assert MIDDLE in result and len(result) < READ_FILE_MAX_CHARS + 200


def test_run13_a_file_of_another_session_is_no_such_file(fake_session, strict, fake):
    other = fake_session()
    ask_with_files(other, "Keep this.", [log_file(77)], execute=False)
    Run.objects.filter(session=other).update(status=Run.Status.COMPLETED)
    replies = iter([chat_stream(tool_calls=[{"id": "r1", "name": "read_file", "arguments": '{"file_id": 77}'}]),
                    chat_stream(["There is no such file."])])
    strict.handler = lambda request: next(replies)
    session = fake_session(tools=("read_file",))
    run = ask_with_files(session, "Read file 77.", [screen(13)])
    assert run.status == Run.Status.COMPLETED, run.error
    result = [m for m in fake.requests[-1].json["messages"] if m["role"] == "tool"][0]["content"]
    assert "No file 77 is attached to this conversation" in result
    assert "0000000 INFO" not in json.dumps(fake.requests[-1].json)


def test_run13_after_a_compaction_the_runtime_state_lists_the_file_and_the_agent_reads_it_again(fake_session,
                                                                                               strict, fake):
    def handler(request):
        messages = request.json["messages"]
        if is_summary(messages):
            sections = "\n".join(f"{n}. {SECTION_TITLES[n - 1]}: noted." for n in range(1, 10))
            return chat_stream([f"<summary>\n{sections}\n</summary>"])  # names no file
        if messages[-1]["role"] == "tool":
            return chat_stream(["It was served in 12 ms."])
        if "line 31337 again" in messages[-1]["content"]:
            state = next(m["content"] for m in messages if "Files the user attached" in m["content"])
            file_id = int(re.search(r"- app\.log \(id (\d+), text, 2\.0 MB\)", state).group(1))
            arguments = {"file_id": file_id, "offset": LOG_TEXT.index(MIDDLE), "limit": 100}
            return chat_stream(tool_calls=[{"id": "r1", "name": "read_file", "arguments": json.dumps(arguments)}])
        return chat_stream(["Logs show requests, one a line, each with its time. " * 200])

    strict.handler = handler
    session = fake_session(window=32_768, context_policy={"target_ratio": 0.05})
    assert ask_with_files(session, "What do logs show?", []).status == Run.Status.COMPLETED
    assert ask_with_files(session, "How long is this log?", [log_file()]).status == Run.Status.COMPLETED
    _status, run = compaction_request(session=session)
    assert compaction_manual(run_id=run.pk) == "compacted"  # the question with the file is the task anchor
    view = CompactionSnapshot.objects.get(instance__run=run).messages
    assert any("- app.log (id 12, text, 2.0 MB)" in (m.get("content") or "") for m in view if m["role"] == "user")
    assert "attachments" not in json.dumps(view) and len(json.dumps(view)) < 100_000  # the question as shown
    run = ask_with_files(session, "What was line 31337 again?", [])
    assert run.status == Run.Status.COMPLETED, run.error
    result = [m for m in fake.requests[-1].json["messages"] if m["role"] == "tool"][-1]["content"]
    assert MIDDLE in result


def test_run13_a_model_without_image_input_gets_the_note_not_the_bytes(fake_session, strict, fake):
    strict.handler = lambda request: chat_stream(["I cannot see it."])
    session = fake_session()
    run = ask_with_files(session, "What is on the screen?", [screen()])
    assert run.status == Run.Status.COMPLETED, run.error
    sent = fake.requests[-1]
    assert "[Image screen.png · id 13 · image/png · 44 bytes · 800×600 — this model does not take images; the " \
           "person attached it]" in _user_text(sent)
    assert PNG not in json.dumps(sent.native or sent.json)


def test_run13_an_image_reaches_the_model_in_its_apis_own_shape(fake_session, strict, fake, dialect):
    strict.handler = lambda request: chat_stream(["A login page."])
    session = fake_session()
    ModelConnection.objects.filter(pk=session.version.model_connection_id).update(supports_images=True)
    run = ask_with_files(session, "What is on the screen?", [screen()])
    assert run.status == Run.Status.COMPLETED, run.error
    sent = fake.requests[-1]
    if dialect == "anthropic":
        blocks = [{k: v for k, v in block.items() if k != "cache_control"}  # a cache mark may ride on it
                  for block in sent.native["messages"][-1]["content"]]
        assert {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}} in blocks
    else:
        parts = sent.json["messages"][-1]["content"]
        assert parts[-1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
        assert parts[-2] == {"type": "text", "text": "[Image screen.png · id 13 · image/png · 44 bytes · 800×600]"}


def test_run13_the_console_form_offers_the_image_switch_in_plain_words():
    from models_catalog.forms import ModelConnectionAdminForm

    field = ModelConnectionAdminForm().fields["supports_images"]
    assert field.label == "Reads images" and "gets a note naming each image instead" in field.help_text


def test_run13_files_stored_and_asked_with_the_question_service_reach_the_model_as_shown(fake_session, strict,
                                                                                        fake, dialect, alice):
    from sessions.services.files import file_store
    from tests.files.makers import make_pdf, make_png

    strict.handler = lambda request: chat_stream(["Read them."])
    session = fake_session()
    ModelConnection.objects.filter(pk=session.version.model_connection_id).update(supports_images=True)
    log = file_store(session=session, user=alice, name="app.log", data=LOG_TEXT.encode())
    pdf = file_store(session=session, user=alice, name="contract.pdf", data=make_pdf(["Clause one.", "Clause two."]))
    png = file_store(session=session, user=alice, name="screen.png", data=make_png(4, 3))
    run = question_ask(session=session, content="Compare these.", files=[log.pk, pdf.pk, png.pk])
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error
    sent = json.dumps(fake.requests[-1].native or fake.requests[-1].json, ensure_ascii=False)
    assert f"[File app.log · id {log.pk} · text/plain · 2.1 MB · utf-8]" in sent
    assert f'read_file {{\\"file_id\\": {log.pk}, \\"offset\\": ' in sent and MIDDLE not in sent
    assert f"[File contract.pdf · id {pdf.pk} · application/pdf" in sent and "Clause two." in sent
    assert f"[Image screen.png · id {png.pk} · image/png" in sent and "4×3]" in sent
    assert ('"type": "image", "source": {"type": "base64", "media_type": "image/png"' if dialect == "anthropic"
            else '"image_url": {"url": "data:image/png;base64,') in sent
