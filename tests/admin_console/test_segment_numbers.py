"""The compactions page numbers a summary's segments for people from 1 (SPEC §10, CTX-32);
the metrics keep the engine's 0-based index, shown in each segment's tooltip."""
from __future__ import annotations

import re

import pytest

from tests.admin_console.conftest import compaction

pytestmark = pytest.mark.django_db


def test_olivia_reads_segments_numbered_from_one(console, story):
    compaction(story.first, covered_seq=5, segments=[{"index": 0, "consumed": [1, 3], "messages": 3},
                                                      {"index": 1, "consumed": [4, 4], "messages": 1},
                                                      {"index": 2, "consumed": None, "messages": 1}])
    html = console.get(f"/admin/agent_sessions/session/{story.session.pk}/compactions/").content.decode()
    items = re.findall(r'<li value="(\d+)" data-index="(\d+)" title="([^"]+)">', html)
    assert items == [("1", "0", "Segment 1 of the summary (index 0 in the metrics)"),
                     ("2", "1", "Segment 2 of the summary (index 1 in the metrics)"),
                     ("3", "2", "Segment 3 of the summary (index 2 in the metrics)")]
    assert '<li value="0"' not in html
