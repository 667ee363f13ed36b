"""LOOP-1: the projection a run keeps per instance (``ContextCache``) answers what a fresh
projection of every record it has read answers, also when it must be made again."""

from __future__ import annotations

from context import project_records
from sessions.services.history import ContextCache


def _record(seq: int, kind: str, message: dict) -> dict:
    return {"seq": seq, "run": 1, "instance": "main", "kind": kind, "message": message}


def test_loop1_a_projection_made_again_with_other_options_reads_every_record_again() -> None:
    cache = ContextCache()
    cache.records = [_record(1, "user", {"role": "user", "content": "Q1"}),
                     _record(2, "assistant", {"role": "assistant", "content": "A1"})]
    options = {"open_runs": {1}, "tool_result_limit": 24_000, "start_view": None, "watermark": 0}
    cache.projected(screen_tools=frozenset({"browser_use"}), **options)
    cache.records.append(_record(3, "user", {"role": "user", "content": "Q2"}))
    again = cache.projected(screen_tools=frozenset({"browser_use", "screenshot"}), **options)
    assert [m["content"] for m in again.messages] == ["Q1", "A1", "Q2"]
    assert again.messages == project_records(cache.records, open_runs={1},
                                             screen_tools={"browser_use", "screenshot"})
