"""Event names have one home (issue #46, LOOP-5): ``sessions.event_types.EventType``.

The event log accepts only its members and the chat page is handed them; the chat's
script switches on ``EVENT.RUN_STARTED`` and the like, never on a name of its own.
"""
from __future__ import annotations

import json
import re

import pytest

from sessions.event_types import EventType
from sessions.services.events import EVENT_TYPES
from tests.conftest import REPO

SCRIPT = REPO / "static/web/chat.js"


def script_code() -> str:
    """The chat's script without its comments (which may name an event in passing)."""
    return re.sub(r"/\*.*?\*/|//[^\n]*", "", SCRIPT.read_text(encoding="utf-8"), flags=re.S)


def test_the_event_log_takes_exactly_the_enums_names():
    assert EVENT_TYPES == {member.value for member in EventType}
    assert not {"error", "open", "message"} & EVENT_TYPES  # EventSource's own names


@pytest.mark.django_db
def test_the_chat_page_is_handed_every_event_name(client_for, alice, make_session):
    page = client_for(alice).get(f"/sessions/{make_session(alice).pk}/").content.decode()
    config = json.loads(re.search(r'<script id="chat-config" type="application/json">(.*?)</script>', page,
                                  re.S).group(1))
    assert config["events"] == {member.name: member.value for member in EventType}


def test_the_chat_script_names_no_event_itself():
    code = script_code()
    named = [member.value for member in EventType
             if re.search(rf"""["']{member.value}["']|\b{member.value}\s*:""", code)]
    assert named == []


def test_every_event_the_script_reads_is_one_the_server_sends_and_it_handles_them_all():
    read = set(re.findall(r"\bEVENT\.([A-Z_]+)\b", script_code()))
    assert read - set(EventType.__members__) == set()
    assert set(EventType.__members__) - read == set()
