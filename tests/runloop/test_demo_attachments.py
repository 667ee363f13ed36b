"""The offline demo model reads a question's files as the run loop sends them (RUN-13):
a text file, a long log shown in part, an image it cannot see — and a date in the question
or the files never reaches the calculator."""
from __future__ import annotations

import pytest

from sessions.models import Run, SessionMessage
from tests.runloop.test_attachments import log_file, screen

pytestmark = pytest.mark.django_db(transaction=True)

NOTES = {"id": 21, "name": "minutes.txt", "content_type": "text/plain", "size": 64, "kind": "text",
         "encoding": "utf-8", "text": "Board meeting 2026-12-07\nBudget 12-4 approved\n"}


def test_asked_to_summarize_attached_files_the_demo_summarizes_each_and_calls_no_tool(make_session, alice):
    from tests.runloop.test_attachments import ask_with_files

    session = make_session(alice)  # its agent offers the calculator
    run = ask_with_files(session, "Summarize the attached files from 2026-12-07", [NOTES, log_file(), screen()])
    assert run.status == Run.Status.COMPLETED, run.error
    assert not SessionMessage.objects.filter(session=session, kind="tool_result").exists()
    [answer] = [m.message["content"] for m in SessionMessage.objects.filter(session=session, kind="assistant")]
    assert "You attached 3 files with your question." in answer
    assert "**minutes.txt** (text/plain, 64 bytes, utf-8): 2 lines, 6 words; " \
           "it begins “Board meeting 2026-12-07 / Budget 12-4 approved”." in answer
    assert "**app.log** (text/plain, 2.0 MB, utf-8): 649 lines, 4,532 words shown (its middle, 2,196,046 " \
           "characters, is left out: read_file reads it)" in answer
    assert "it begins “0000000 INFO request served in 12 ms / 0000001 INFO request served in 12 ms”" in answer
    assert "**screen.png** (image/png, 44 bytes, 800×600): an image; I cannot see images" in answer
