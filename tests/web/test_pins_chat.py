"""CTX-50 in the chat: a pin control with words on each message of the main line (the
question, the answer, the tool result), the session's pins handed to the page (the first
question pinned by default), and the note when a pin was summarized for lack of room."""
from __future__ import annotations

import re

import pytest

from sessions.models import SessionMessage
from sessions.selectors.instances import main_instance
from sessions.services.pins import pin_set
from sessions.services.records import record_append
from tests.web.conftest import finished_run

pytestmark = pytest.mark.django_db


def _controls(html: str) -> dict[int, str]:
    """Each pin button's record seq and its visible words."""
    found = re.findall(r'<button type="button" class="pin-button" data-pin-seq="(\d+)"[^>]*>\s*'
                       r'<span class="pin-label">([^<]*)</span><span class="visually-hidden">([^<]*)</span>', html)
    return {int(seq): (label + words).strip() for seq, label, words in found}


def test_ctx50_every_main_line_message_has_a_pin_button_with_words(client_for, alice, make_session):
    session = make_session(alice)
    finished_run(session, question="Keep the margin above 12%.",
                 steps=[{"call": ("call_1", "calculator", "42")}, {"content": "It is **42**."}])
    seqs = {r.kind: r.seq for r in SessionMessage.objects.filter(session=session)
            if r.kind in ("user", "tool_result") or (r.kind == "assistant" and r.message.get("content"))}
    page = client_for(alice).get(f"/sessions/{session.pk}/").content.decode()
    assert _controls(page) == {seqs["user"]: "Pin your message", seqs["tool_result"]: "Pin this tool result",
                               seqs["assistant"]: "Pin this answer"}
    # Each holder has a mark, hidden until chat.js fills it with the words "Pinned…".
    assert page.count('class="pin-mark" hidden') == 3


def test_ctx50_the_page_hands_chat_js_where_the_pins_are_the_first_question_by_default(client_for, alice,
                                                                                       make_session):
    session = make_session(alice)
    finished_run(session, question="The goal: keep the margin above 12%.")
    finished_run(session, question="And the second thing.")
    client = client_for(alice)
    config = client.get(f"/sessions/{session.pk}/").context["chat_config"]
    assert config["urls"]["pins"] == f"/api/v1/sessions/{session.pk}/pins"
    assert config["urls"]["pin"] == f"/api/v1/sessions/{session.pk}/pins/{{id}}"
    # What chat.js reads as the page opens (the browser session, as the page sends it).
    assert client.get(config["urls"]["pins"]).json() == {"items": [{"seq": 1, "by": None, "at": None,
                                                                     "default": True}]}
    answer = SessionMessage.objects.filter(session=session, kind="assistant").order_by("seq").last()
    pin_set(session=session, seq=answer.seq, pinned=True, by=alice.pk)
    pin_set(session=session, seq=1, pinned=False, by=alice.pk)
    items = client.get(config["urls"]["pins"]).json()["items"]
    assert [(p["seq"], p["by"], p["default"]) for p in items] == [(answer.seq, alice.pk, False)]


def test_ctx50_a_pin_summarized_for_lack_of_room_gets_a_note_in_the_chat(client_for, alice, make_session):
    session = make_session(alice)
    run = finished_run(session, question="Q1")
    record_append(session=session, run=run, instance=main_instance(run=run), kind="compaction_summary",
                  entry_key="compaction-9-budget", message={"summary": "1. Primary requests and intent: Q1",
                                                            "metrics": {"pins_summarized_seqs": [1]}})
    page = client_for(alice).get(f"/sessions/{session.pk}/").content.decode()
    note = re.search(r'<p class="notice notice-quiet pins-summarized" data-pin-seqs="1">([^<]*)</p>', page)
    assert note and "A pinned message was summarized for lack of room" in note.group(1)
    assert "a tenth of what the model reads" in note.group(1)
