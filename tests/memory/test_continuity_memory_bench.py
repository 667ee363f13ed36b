"""MEM-3: the continuity benchmark's cross-session case (benchmarks/_continuity_memory.py),
run small, as ``continuity.py --memory-only --memory-sessions 2`` runs it. The benchmark is not a test; this checks
that it runs, that what it counts is counted right (recall only with memory, a compaction
in every later session, no invalid request) and that it prints its tables."""
from __future__ import annotations

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.django_db(transaction=True)


def test_mem3_the_cross_session_case_recalls_from_memory_only_and_prints_its_tables(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    from _continuity_memory import run_case  # what ``continuity.py --memory-only`` runs

    cases = run_case(sessions=2, fillers=3)
    by = {(case.wire, case.memory): case for case in cases}
    assert sorted(by) == [("anthropic", False), ("anthropic", True), ("openai", False), ("openai", True)]
    for wire in ("openai", "anthropic"):
        on, off = by[wire, True], by[wire, False]
        assert on.recalled == [1.0] and off.recalled == [0.0]
        assert list(on.saved) == ["/memories/about.md"] and off.saved == {}
        assert min(on.compactions) >= 1 and on.compactions == off.compactions
        assert on.rejections == off.rejections == 0
        assert on.block_tokens > 0 and off.block_tokens == 0
    anthropic_on, anthropic_off = by["anthropic", True], by["anthropic", False]
    assert sum(anthropic_on.cache_read) > sum(anthropic_off.cache_read) > 0
    printed = capsys.readouterr().out
    assert "(a) facts from session 1 recalled in sessions 2…2" in printed
    assert "(b) what memory adds to each request" in printed
