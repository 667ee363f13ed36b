"""CTX-7 at storage: a tool's whole output is stored up to the per-result limit, and past it
the head *and* the tail are kept (the error at the end of a long log matters)."""
from __future__ import annotations

from context.truncation import cap_for_storage
from tools import Tool, ToolContext, tool_invoke


def _tool(output, limit: int) -> Tool:
    return Tool(name="long_log", description="", parameters={"type": "object"}, run=lambda arguments, context: output,
                idempotent=True, output_limit=limit)


def _context() -> ToolContext:
    return ToolContext(run_id=1, session_id=1, instance_id=1)


def test_ctx7_an_output_under_the_limit_is_stored_whole():
    log = "line\n" * 50_000
    assert tool_invoke(_tool(log, 1_000_000), "{}", _context()).content == log


def test_ctx7_an_output_over_the_limit_keeps_its_head_and_tail_with_a_marker_that_promises_nothing_more():
    log = "BUILD STARTED\n" + "compiling...\n" * 200_000 + "ERROR: tests failed at test_payment.py:42\n"
    stored = tool_invoke(_tool(log, 100_000), "{}", _context()).content
    assert len(stored) <= 100_000
    assert stored.startswith("BUILD STARTED") and stored.endswith("ERROR: tests failed at test_payment.py:42\n")
    assert f"of {len(log):,} characters omitted from the middle when this result was stored" in stored
    assert "at most 100,000 characters of one tool result" in stored


def test_ctx7_text_blocks_share_the_stored_budget_and_images_stay():
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    parts = [{"type": "text", "text": "A" * 80_000 + "END-A"}, image, {"type": "text", "text": "short"}]
    stored = cap_for_storage(parts, 50_000)
    assert stored[1] == image and stored[2] == {"type": "text", "text": "short"}
    assert stored[0]["text"].endswith("END-A") and len(stored[0]["text"]) <= 50_000
