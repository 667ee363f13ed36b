"""Text from people never stores a lone surrogate (issue #44 item 4, SPEC §11).

JSON's ``\\ud800`` escape decodes to a lone surrogate, which no page, answer or request
body can encode. Through the API (JSON bodies, a JSONL transcript, a PDF's text) it is
replaced with U+FFFD before anything is written — checked in the stored bytes themselves,
not only through the read that replaces what older rows hold — and an import that fails,
at validation or later, leaves nothing behind.
"""
from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from sessions.models import Instance, Run, RunEvent, Session, SessionFile, SessionMessage, SessionView
from sessions.selectors.instances import main_instance
from sessions.services.events import event_emit
from sessions.services.records import record_append
from tests.security.conftest import assert_error_shape
from tests.sessions.helpers import stores_a_surrogate

pytestmark = pytest.mark.django_db
LONE = "\ud800"


def post_json(client, url: str, body) -> object:
    """``body`` as a client writes it: ASCII JSON, a lone surrogate as its escape."""
    return client.post(url, json.dumps(body), content_type="application/json")


def nothing_stored_with_a_surrogate(session: Session) -> bool:
    return not (stores_a_surrogate(Session, session.pk, "title")
                or any(stores_a_surrogate(SessionMessage, pk, "message")
                       for pk in SessionMessage.objects.filter(session=session).values_list("pk", flat=True))
                or any(stores_a_surrogate(SessionView, pk, "messages")
                       for pk in SessionView.objects.filter(session=session).values_list("pk", flat=True)))


def renders(api, alice, session: Session) -> None:
    person = Client()
    person.force_login(alice)
    for response in (api.get("/api/v1/sessions"), api.get(f"/api/v1/sessions/{session.pk}/messages"),
                     person.get("/"), person.get(f"/sessions/{session.pk}/")):
        assert response.status_code == 200, response.request["PATH_INFO"]
        response.content.decode("utf-8")


TRANSCRIPT = [
    {"role": "system", "content": f"old prompt {LONE}"},
    {"role": "user", "content": f"Book {LONE} a flight", f"note{LONE}": {f"deep{LONE}": [LONE]}},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call{LONE}", "type": "function",
         "function": {"name": "search", "arguments": json.dumps({"to": f"Paris{LONE}"})}}]},
    {"role": "tool", "tool_call_id": f"call{LONE}", "name": "search", "content": f"3 flights {LONE}"},
    {"role": "assistant", "content": f"Found {LONE}."},
]


def test_an_imported_transcript_is_stored_with_every_lone_surrogate_replaced(api, alice, agent, version):
    client = api(alice)
    response = post_json(client, "/api/v1/sessions/import", {"agent": agent.pk, "transcript": TRANSCRIPT})
    assert response.status_code == 201, response.content[:300]
    session = Session.objects.get()
    assert response.json()["title"] == session.title == "Book \ufffd a flight"
    assert nothing_stored_with_a_surrogate(session)
    stored = [row.message for row in SessionMessage.objects.filter(session=session).order_by("seq")]
    assert stored[1] == {"role": "user", "content": "Book \ufffd a flight", "note\ufffd": {"deep\ufffd": ["\ufffd"]}}
    assert json.loads(stored[2]["tool_calls"][0]["function"]["arguments"]) == {"to": "Paris\ufffd"}
    assert stored[3]["tool_call_id"] == stored[2]["tool_calls"][0]["id"] == "call\ufffd"
    renders(client, alice, session)


def test_a_jsonl_transcript_and_its_title_are_stored_with_lone_surrogates_replaced(api, alice, agent, version):
    client = api(alice)
    jsonl = "\n".join(json.dumps(message) for message in TRANSCRIPT)
    response = post_json(client, "/api/v1/sessions/import",
                         {"agent": agent.pk, "transcript": jsonl, "title": f"Trip {LONE}"})
    assert response.status_code == 201, response.content[:300]
    session = Session.objects.get()
    assert session.title == "Trip \ufffd" and nothing_stored_with_a_surrogate(session)
    renders(client, alice, session)


@pytest.mark.parametrize("transcript, field", [
    ([{"role": f"user{LONE}", "content": "hi"}], "transcript.0"),  # refused at validation
    # Valid until its record is written (NaN is no JSON value): refused after the session was made.
    ('{"role": "user", "content": "\\ud800 hi"}\n{"role": "assistant", "content": "x", "score": NaN}', "message"),
])
def test_an_import_that_fails_leaves_no_row_behind(api, alice, agent, version, transcript, field):
    response = post_json(api(alice), "/api/v1/sessions/import", {"agent": agent.pk, "transcript": transcript})
    error = assert_error_shape(response, 400)
    assert field in error["fields"]
    json.dumps(error, ensure_ascii=False).encode("utf-8")
    assert not (Session.objects.exists() or Run.objects.exists() or Instance.objects.exists()
                or SessionMessage.objects.exists() or SessionView.objects.exists())


def test_a_question_and_a_supplement_are_stored_with_lone_surrogates_replaced(api, alice, make_session):
    client = api(alice)
    session = make_session(alice)
    response = post_json(client, f"/api/v1/sessions/{session.pk}/questions", {"content": f"Why {LONE}?"})
    assert response.status_code == 202, response.content[:300]
    session.refresh_from_db()
    assert session.title == "Why \ufffd?" and nothing_stored_with_a_surrogate(session)
    assert SessionMessage.objects.get(session=session).message["content"] == "Why \ufffd?"
    run = Run.objects.get(session=session)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    response = post_json(client, f"/api/v1/runs/{run.pk}/supplements", {"content": f"Also {LONE}"})
    assert response.status_code == 202, response.content[:300]
    main = main_instance(run=run)
    assert not stores_a_surrogate(Instance, main.pk, "frame")
    main.refresh_from_db()
    assert main.frame["supplements"][0]["content"] == "Also \ufffd"
    renders(client, alice, session)


def test_records_and_events_written_by_any_caller_hold_no_lone_surrogate(alice, make_session):
    from sessions.services.questions import question_ask

    session = make_session(alice)
    run = question_ask(session=session, content="Hello")
    row = record_append(session=session, run=run, instance=main_instance(run=run), kind="assistant",
                        entry_key="spoiled", message={"role": "assistant", "content": f"a {LONE}", "tool_calls": [
                            {"id": "c1", "type": "function",
                             "function": {"name": "calculator", "arguments": '{"expression": "1\\ud800"}'}}]})
    assert not stores_a_surrogate(SessionMessage, row.pk, "message")
    assert row.message["tool_calls"][0]["function"]["arguments"] == '{"expression": "1\\ufffd"}'
    event = event_emit(run_id=run.pk, type="message_delta", data={"text": f"b {LONE}", f"k{LONE}": 1})
    stored = RunEvent.objects.get(run=run, seq=event.seq)
    assert not stores_a_surrogate(RunEvent, stored.pk, "payload")
    assert stored.payload == {"text": "b \ufffd", "k\ufffd": 1}


def lone_surrogate_pdf() -> bytes:
    """A PDF whose font maps the glyph "A" to U+D800 (a ToUnicode CMap): pypdf reads it as one."""
    cmap = (b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /Lone def\n"
            b"1 begincodespacerange <00> <FF> endcodespacerange\n"
            b"2 beginbfchar <41> <D800> <42> <0042> endbfchar\n"
            b"endcmap CMapName currentdict /CMap defineresource pop end end")
    content = b"BT /F1 12 Tf 20 50 Td (BAB) Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /ToUnicode 6 0 R >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 100] /Resources << /Font << /F1 3 0 R >> >> "
        b"/Contents 5 0 R >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Length %d >>\nstream\n" % len(cmap) + cmap + b"\nendstream",
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_a_pdfs_text_is_stored_with_its_lone_surrogates_replaced(api, alice, make_session):
    from sessions.pdf_text import pdf_read

    data = lone_surrogate_pdf()
    assert LONE in pdf_read(data, max_pages=5, max_seconds=20).text  # what the reader gives
    session = make_session(alice)
    response = api(alice).post(f"/api/v1/sessions/{session.pk}/files", {"file": SimpleUploadedFile("a.pdf", data)})
    assert response.status_code == 201, response.content[:300]
    stored = SessionFile.objects.get(session=session)
    assert not stores_a_surrogate(SessionFile, stored.pk, "text")
    assert "B\ufffdB" in stored.text


def test_a_request_body_that_still_holds_one_is_logged_as_it_was_sent(alice, make_session):
    from models_catalog.providers.chat_http import body_bytes
    from sessions.selectors.model_calls import model_call_body
    from sessions.services.model_calls import model_call_open
    from sessions.services.questions import question_ask

    run = question_ask(session=make_session(alice), content="Hello")
    body = {"model": "m", "messages": [{"role": "system", "content": "Be brief."},
                                       {"role": "user", "content": f"Hello {LONE}"}], "max_tokens": 10}
    call = model_call_open(run=run, instance=main_instance(run=run), purpose="action", provider="openai_compatible",
                           model="m", estimator_id="bytes-v1", estimated_tokens=10, body=body, estimates=[1, 1])
    sent = body_bytes(body)
    assert json.loads(sent)["messages"][1]["content"] == "Hello \ufffd"
    assert body_bytes(model_call_body(call=call)) == sent  # the inspector shows exactly what was sent
