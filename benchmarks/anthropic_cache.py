"""Benchmark: how much input Anthropic's prompt cache serves over a long tool conversation.

    .venv/bin/python benchmarks/anthropic_cache.py [--turns 30] [--compact-at 20]

A tool conversation of --turns model calls (one or two tool calls a turn, one turn with
twelve parallel calls, tool outputs of 0.5–6 kB) goes records → projector →
``build_anthropic_body`` → the Anthropic client → the strict fake on loopback, whose
simulated cache follows the API's rules (longest prefix ending at an earlier
breakpoint, 20-block lookback, a 1,024-token minimum). At --compact-at the history is
replaced by a compacted view (a continuation summary and the task), as compaction does.

Reported per breakpoint placement — the platform's (tools+system, summary, previous
request's end, conversation end), a single mark at the end of the conversation, none:
the share of input tokens read from the cache after the first call, and how many calls
after the compaction until the cache is warm again (a call reads from the cache
everything the call before it sent).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from context import build_anthropic_body, continuation_message, project_records  # noqa: E402
from models_catalog.client import collect, get_chat_client  # noqa: E402
from tests.fakes.anthropic import AnthropicFake, Reply  # noqa: E402
from tests.fakes.anthropic_rules import PromptCache  # noqa: E402
from tests.fakes.fake_provider import FakeProvider  # noqa: E402

KEY = "sk-ant-bench"
SYSTEM = ("You are a build agent for a large monorepo. Follow the repository's conventions, run the tests "
          "before you report, and explain failures with the exact command and output. ") * 40
TOOLS = [{"type": "function", "function": {"name": name, "description": f"{name} tool",
                                           "parameters": {"type": "object", "properties": {"arg": {"type": "string"}}}}}
         for name in ("run", "read_file", "search", "write_file")]
QUESTION = "Upgrade the HTTP client in every service and make the test suite pass."


def _replies(turns: int):
    calls = iter(range(10**6))

    def reply(body: dict) -> Reply:
        n = next(calls)
        if n >= turns - 1:
            return Reply(text="All services upgraded; the suite passes.")
        width = 12 if n == 7 else (2 if n % 3 == 0 else 1)
        return Reply(text=f"Step {n}: checking.", tool_calls=[
            {"id": f"toolu_{n}_{k}", "name": TOOLS[(n + k) % 4]["function"]["name"], "input": {"arg": f"svc{k}"}}
            for k in range(width)])
    return reply


def _marks(body: dict, placement: str) -> dict:
    """Re-place the breakpoints of a built body for the comparison rows."""
    blocks = [*body.get("tools", []), *body.get("system", [])]
    blocks += [b for m in body["messages"] for b in m["content"]]
    for block in blocks:
        block.pop("cache_control", None)
    if placement == "end":
        body["messages"][-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return body


def run(turns: int, compact_at: int, placement: str) -> tuple[float, int | None]:
    strict = AnthropicFake(api_key=KEY, replies=_replies(turns), cache=PromptCache(min_tokens=1024))
    records = [{"seq": 1, "run": "r1", "instance": "main", "kind": "user",
                "message": {"role": "user", "content": QUESTION}}]
    view, watermark = None, None
    usages: list[dict] = []
    with FakeProvider(strict) as fake, get_chat_client(provider="anthropic", base_url=fake.base_url, api_key=KEY,
                                                       allow_private=True) as client:
        for n in range(turns):
            if n == compact_at:
                summary = continuation_message("Upgraded services 1–12; two flaky tests pinned. " * 40,
                                               restated_anchor=True)
                view, watermark = [summary, {"role": "user", "content": QUESTION}], records[-1]["seq"]
            projected = project_records(records, start_view=view, start_watermark=watermark)
            body = build_anthropic_body([{"role": "system", "content": SYSTEM}, *projected], model="claude-opus-5",
                                        max_tokens=4096, tools=TOOLS)
            if placement != "platform":
                body = _marks(body, placement)
            end = collect(client.stream_chat(body))
            usages.append(end.usage.raw)
            seq = records[-1]["seq"]
            records.append({"seq": seq + 1, "run": "r1", "instance": "main", "kind": "assistant",
                            "message": end.assistant_message()})
            for k, call in enumerate(end.tool_calls, start=2):
                size = 500 + (n * 977 + k * 331) % 5500
                records.append({"seq": seq + k, "run": "r1", "instance": "main", "kind": "tool_result", "message": {
                    "role": "tool", "tool_call_id": call.id, "status": "ok", "content": ("log " * size)[:size]}})
    assert strict.rejections == [], strict.rejections
    later = usages[1:]
    share = sum(u["cache_read_input_tokens"] for u in later) / sum(u["prompt_tokens"] for u in later)
    # Warm again: a call reads from the cache everything the call before it sent.
    rewarm = next((c - compact_at for c in range(compact_at + 1, turns)
                   if usages[c]["cache_read_input_tokens"] >= usages[c - 1]["prompt_tokens"]), None)
    return share, rewarm


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--compact-at", type=int, default=20)
    args = parser.parse_args()
    rows = []
    for placement, label in (("platform", "platform breakpoints"), ("end", "one mark at the end"), ("none", "none")):
        share, rewarm = run(args.turns, args.compact_at, placement)
        rows.append((label, f"{share:.0%}", "never" if rewarm is None else str(rewarm)))
    print(f"{args.turns}-call tool conversation, compaction before call {args.compact_at}")
    print(f"{'breakpoints':<24} {'input read from cache':>22} {'calls to re-warm':>17}")
    for label, share, rewarm in rows:
        print(f"{label:<24} {share:>22} {rewarm:>17}")


if __name__ == "__main__":
    main()
