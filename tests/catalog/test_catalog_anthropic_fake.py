"""The converter and the client against the strict Anthropic fake (CAT-7, CTX-5, CTX-10, CTX-11).

The fake refuses what the real API refuses, with its error bodies; the platform's bodies
(real transcripts, generated histories, a model switch, a session moved from an OpenAI
model) are all accepted; the prompt cache pays (breakpoints on the stable prefix).
"""
from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings

from context import continuation_message, project_records
from context.anthropic import build_anthropic_body
from models_catalog.client import collect, get_chat_client
from models_catalog.errors import InvalidRequestError
from tests.catalog.support import FAST
from tests.context.corpus import load_pi, load_tau, pi_records, tau_records
from tests.context.histories import build, histories
from tests.fakes.anthropic import AnthropicFake, Reply
from tests.fakes.anthropic_rules import sign_thinking
from tests.fakes.fake_provider import FakeProvider

KEY = "sk-ant-test"
HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
TOOLS = [{"type": "function", "function": {"name": "run", "description": "Run a shell command",
                                           "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}},
                                                          "required": ["cmd"]}}}]


def send(fake: FakeProvider, messages: list[dict], **kwargs) -> object:
    kwargs.setdefault("model", "claude-opus-5")
    body = build_anthropic_body(messages, max_tokens=kwargs.pop("max_tokens", 1024), tools=TOOLS, **kwargs)
    with get_chat_client(provider="anthropic", base_url=fake.base_url, api_key=KEY, allow_private=True,
                         limits=FAST) as client:
        return collect(client.stream_chat(body))


def valid() -> dict:
    return {"model": "claude-opus-5", "max_tokens": 64,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Run it"}]},
                         {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "run",
                                                            "input": {"cmd": "ls"}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                       "content": "README.md"}]}]}


def _set(path: str, value: object):
    def change(body: dict) -> None:
        *parents, last = path.split(".")
        target = body
        for key in parents:
            target = target[int(key)] if key.isdigit() else target[key]
        target[int(last) if last.isdigit() else last] = value
    return change


REFUSED = [
    ("a system role message", _set("messages.0.role", "system"), 'Unexpected role "system"'),
    ("a tool role message", _set("messages.2.role", "tool"), "messages.2.role: Input should be 'user' or 'assistant'"),
    ("a first turn that is not the user's", lambda b: b["messages"].insert(0, {"role": "assistant", "content": "x"}),
     'messages: first message must use the "user" role'),
    ("a tool_use without its result", _set("messages.2.content", [{"type": "text", "text": "and?"}]),
     "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1."),
    ("a result that is not first", lambda b: b["messages"][2]["content"].insert(0, {"type": "text", "text": "see"}),
     "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after"),
    ("a result for an id the previous turn did not use", _set("messages.2.content.0.tool_use_id", "toolu_9"),
     "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1."),
    ("a result answering nothing", lambda b: b["messages"][2]["content"].append(
        {"type": "tool_result", "tool_use_id": "toolu_9", "content": "?"}),
     "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_9."),
    ("an id outside the pattern", _set("messages.1.content.0.id", "call.1"),
     "messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"),
    ("a non-object tool input", _set("messages.1.content.0.input", "[1]"),
     "messages.1.content.0.tool_use.input: Input should be a valid dictionary"),
    ("an empty text block", _set("messages.0.content.0.text", ""), "messages: text content blocks must be non-empty"),
    ("a whitespace text block", _set("messages.0.content.0.text", " \n"),
     "messages: text content blocks must contain non-whitespace text"),
    ("max_completion_tokens", _set("max_completion_tokens", 64),
     "max_completion_tokens: Extra inputs are not permitted"),
    ("stream_options", _set("stream_options", {"include_usage": True}),
     "stream_options: Extra inputs are not permitted"),
    ("tool_calls on a message", _set("messages.1.tool_calls", []),
     "messages.1.tool_calls: Extra inputs are not permitted"),
    ("five cache breakpoints", _set("messages.0.content", [{"type": "text", "text": f"t{n}", "cache_control": {
        "type": "ephemeral"}} for n in range(5)]),
     "A maximum of 4 blocks with cache_control may be provided. Found 5."),
    ("no max_tokens", lambda b: b.pop("max_tokens"), "max_tokens: Field required"),
    ("a thinking block from another model", _set("messages.1.content", [
        {"type": "thinking", "thinking": "t", "signature": sign_thinking("claude-haiku-4-5", "t")},
        {"type": "tool_use", "id": "toolu_1", "name": "run", "input": {}}]),
     "messages.1.content.0: Invalid `signature` in `thinking` block"),
    ("an OpenAI tool schema", _set("tools", [TOOLS[0]]), "tools.0.custom.function: Extra inputs are not permitted"),
]


@pytest.mark.parametrize(("case", "change", "message"), REFUSED, ids=[c[0] for c in REFUSED])
def test_the_strict_fake_refuses_what_the_api_refuses_with_its_error_body(fake, case, change, message):
    strict = AnthropicFake(api_key=KEY)
    fake.handler = strict
    body = valid()
    assert httpx.post(fake.base_url + "/messages", json=body, headers=HEADERS).status_code == 200
    change(body)
    answer = httpx.post(fake.base_url + "/messages", json=body, headers=HEADERS)
    error = answer.json()
    assert answer.status_code == 400 and error["type"] == "error", case
    assert error["error"]["type"] == "invalid_request_error" and message in error["error"]["message"], case
    assert strict.rejections == [(400, error["error"]["message"])]


@pytest.mark.parametrize(("headers", "status", "message"), [
    ({"anthropic-version": "2023-06-01"}, 401, "x-api-key header is required"),
    ({"x-api-key": "sk-ant-other", "anthropic-version": "2023-06-01"}, 401, "invalid x-api-key"),
    ({"x-api-key": KEY}, 400, "anthropic-version: header is required"),
    ({"authorization": f"Bearer {KEY}", "anthropic-version": "2023-06-01"}, 401, "x-api-key header is required"),
])
def test_the_strict_fake_refuses_wrong_or_missing_headers(fake, headers, status, message):
    fake.handler = AnthropicFake(api_key=KEY)
    answer = httpx.post(fake.base_url + "/messages", json=valid(), headers=headers)
    assert (answer.status_code, answer.json()["error"]["message"]) == (status, message)


@pytest.fixture(scope="module")
def strict_server() -> Iterator[tuple[FakeProvider, AnthropicFake]]:
    strict = AnthropicFake(api_key=KEY, replies=[Reply(text="Noted.")])
    with FakeProvider(strict) as server:
        yield server, strict


def _projected_with_system(system: str, records: list[dict]) -> list[dict]:
    return [{"role": "system", "content": system or "You are an agent."}, *project_records(records)]


def test_ctx10_every_real_transcript_of_the_corpus_is_accepted(strict_server):
    if not CORPUS.is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    fake, strict = strict_server
    before = len(strict.accepted)
    for conversation in load_tau(CORPUS):
        system, records = tau_records(conversation["traj"])
        assert send(fake, _projected_with_system(system, records)).text == "Noted."
    pi = pi_records(load_pi(CORPUS))
    assert send(fake, _projected_with_system("You are a coding agent.", pi), keep_thinking=True).text == "Noted."
    assert strict.rejections == [] and len(strict.accepted) - before == 201


@settings(max_examples=60, deadline=None)
@given(events=histories())
def test_ctx10_every_generated_history_is_accepted_over_the_wire(strict_server, events):
    fake, strict = strict_server
    projected = project_records(build(events).records)
    if projected:
        send(fake, projected, keep_thinking=True)
    assert strict.rejections == []


def _history_from(model: str) -> list[dict]:
    thinking = [{"type": "thinking", "thinking": "List first.", "signature": sign_thinking(model, "List first.")}]
    return [{"role": "user", "content": "What is in the repo?"},
            {"role": "assistant", "content": "Listing.", "reasoning": thinking, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "run", "arguments": '{"cmd": "ls"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "README.md"}]


def test_ctx11_thinking_goes_back_to_the_same_model_and_is_dropped_for_another(fake):
    strict = AnthropicFake(api_key=KEY)
    fake.handler = strict
    send(fake, _history_from("claude-opus-5"), model="claude-opus-5", keep_thinking=True)
    assert strict.accepted[-1]["messages"][1]["content"][0]["type"] == "thinking"
    with pytest.raises(InvalidRequestError):  # what keeping them for another model would cost
        send(fake, _history_from("claude-opus-5"), model="claude-haiku-4-5-20251001", keep_thinking=True)
    send(fake, _history_from("claude-opus-5"), model="claude-haiku-4-5-20251001", keep_thinking=False)
    assert [b["type"] for b in strict.accepted[-1]["messages"][1]["content"]] == ["text", "tool_use"]
    assert len(strict.rejections) == 1 and "signature" in strict.rejections[0][1]


def test_a_session_moved_from_an_openai_model_to_claude_sends_a_valid_native_request(fake):
    strict = AnthropicFake(api_key=KEY)
    fake.handler = strict
    records = [
        {"seq": 1, "run": "r1", "instance": "main", "kind": "user", "message": {"role": "user", "content": "Plot it"}},
        {"seq": 2, "run": "r1", "instance": "main", "kind": "assistant", "message": {
            "role": "assistant", "content": "", "reasoning": "o-series reasoning text", "partial": False,
            "tool_calls": [{"id": "functions.plot:0", "type": "function",
                            "function": {"name": "plot", "arguments": '{"x": [1, 2]}'}},
                           {"id": "call_Ab12", "type": "function",
                            "function": {"name": "plot", "arguments": "oops"}}]}},
        {"seq": 3, "run": "r1", "instance": "main", "kind": "tool_result", "message": {
            "role": "tool", "tool_call_id": "functions.plot:0", "status": "ok", "content": [
                {"type": "text", "text": "plotted"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}},
        {"seq": 4, "run": "r1", "instance": "main", "kind": "tool_result", "message": {
            "role": "tool", "tool_call_id": "call_Ab12", "status": "error", "content": "bad arguments"}},
        {"seq": 5, "run": "r1", "instance": "main", "kind": "assistant", "message": {
            "role": "assistant", "content": "Here is the plot.", "partial": False}},
        {"seq": 6, "run": "r1", "instance": "main", "kind": "model_change", "message": {"model": "claude-opus-5"}},
        {"seq": 7, "run": "r2", "instance": "main", "kind": "user", "message": {"role": "user", "content": "Again"}},
    ]
    assert send(fake, _projected_with_system("You plot.", records)).text == "ok"
    sent = strict.accepted[-1]
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    results = sent["messages"][2]["content"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result", "text", "image"]
    assert strict.rejections == []


# --- the prompt cache pays -------------------------------------------------------------------

SYSTEM = "You are a careful build agent. " * 120  # about 900 tokens: a real system prompt's size


def _turn(fake: FakeProvider, records: list[dict], n: int, *, start_view=None, watermark=None) -> dict:
    """One step of a tool conversation: project, build, call; record the answer and its result."""
    projected = project_records(records, start_view=start_view, start_watermark=watermark)
    end = send(fake, [{"role": "system", "content": SYSTEM}, *projected])
    seq = records[-1]["seq"] if records else 0
    records.append({"seq": seq + 1, "run": "r1", "instance": "main", "kind": "assistant",
                    "message": end.assistant_message()})
    for offset, tool in enumerate(end.tool_calls, start=2):
        records.append({"seq": seq + offset, "run": "r1", "instance": "main", "kind": "tool_result", "message": {
            "role": "tool", "tool_call_id": tool.id, "status": "ok", "content": f"output {n}.{offset} " * 60}})
    return end.usage.raw


def _tool_replies(calls_per_turn: int = 1):
    numbers = iter(range(10**6))

    def reply(body: dict) -> Reply:
        n = next(numbers)
        return Reply(text=f"Step {n}.", tool_calls=[{"id": f"toolu_{n}_{k}", "name": "run", "input": {"cmd": f"s{k}"}}
                                                    for k in range(calls_per_turn)])
    return reply


def test_the_prompt_cache_reads_almost_all_input_after_the_first_turn_and_rewarms_after_compaction(fake):
    strict = AnthropicFake(api_key=KEY, replies=_tool_replies())
    fake.handler = strict
    records = [{"seq": 1, "run": "r1", "instance": "main", "kind": "user",
                "message": {"role": "user", "content": "Build and test the project."}}]
    usages = [_turn(fake, records, n) for n in range(10)]
    later = usages[1:]
    share = sum(u["cache_read_input_tokens"] for u in later) / sum(u["prompt_tokens"] for u in later)
    assert share >= 0.8, share
    assert usages[0]["cache_read_input_tokens"] == 0 and all(u["input_tokens"] == 0 for u in usages)
    # A compaction replaces the history: the next call reads only tools + system, the one after all of it.
    summary = continuation_message("Built the project twice; the tests pass. " * 80, restated_anchor=True)
    view = [summary, {"role": "user", "content": "Build and test the project."}]
    watermark = records[-1]["seq"]
    compacted = [_turn(fake, records, 100 + n, start_view=view, watermark=watermark) for n in range(2)]
    assert 0 < compacted[0]["cache_read_input_tokens"] < compacted[0]["prompt_tokens"] * 0.8
    assert compacted[1]["cache_read_input_tokens"] >= compacted[1]["prompt_tokens"] * 0.8
    assert strict.rejections == []


def test_a_turn_of_many_parallel_calls_still_reads_the_cache_past_the_20_block_lookback(fake):
    strict = AnthropicFake(api_key=KEY, replies=_tool_replies(calls_per_turn=12))
    fake.handler = strict
    question = "Check every package of the monorepo and report what fails. " * 30
    records = [{"seq": 1, "run": "r1", "instance": "main", "kind": "user",
                "message": {"role": "user", "content": question}}]
    first, second = _turn(fake, records, 0), _turn(fake, records, 1)
    assert first["cache_read_input_tokens"] == 0
    assert second["cache_read_input_tokens"] == first["prompt_tokens"]  # the previous request's end, exactly
    # Without the mark on the previous request's end the lookback (20 blocks) misses it.
    body = copy.deepcopy(strict.accepted[-1])
    for message in body["messages"][:-1]:
        for block in message["content"]:
            block.pop("cache_control", None)
    blind = AnthropicFake(api_key=KEY)
    blind.cache.use(copy.deepcopy(strict.accepted[0]))
    blind_read = blind.cache.use(body)["cache_read_input_tokens"]
    assert 0 < blind_read < first["prompt_tokens"] - 200  # tools + system only: the question is written again
    assert strict.rejections == []


MEMORY_TOOL = {"type": "memory_20250818", "name": "memory"}
MEMORY_BETA = {"anthropic-beta": "context-management-2025-06-27"}


@pytest.mark.parametrize(("case", "tool", "headers", "model", "message"), [
    ("without its beta", MEMORY_TOOL, {}, "claude-opus-5", "Input tag 'memory_20250818' found using 'type'"),
    ("on a Claude 3 model", MEMORY_TOOL, MEMORY_BETA, "claude-3-5-sonnet-20241022", "not supported on this model"),
    ("with a schema", {**MEMORY_TOOL, "input_schema": {"type": "object"}}, MEMORY_BETA, "claude-opus-5",
     "memory_20250818.input_schema: Extra inputs are not permitted"),
    ("under another name", {**MEMORY_TOOL, "name": "notes"}, MEMORY_BETA, "claude-opus-5", "Input should be 'memory'"),
])
def test_mem2_the_strict_fake_takes_the_memory_tool_only_as_the_api_does(fake, case, tool, headers, model, message):
    strict = AnthropicFake(api_key=KEY)
    fake.handler = strict
    body = valid() | {"model": "claude-opus-5", "tools": [MEMORY_TOOL]}
    assert httpx.post(fake.base_url + "/messages", json=body, headers=HEADERS | MEMORY_BETA).status_code == 200
    answer = httpx.post(fake.base_url + "/messages", json=body | {"tools": [tool], "model": model},
                        headers=HEADERS | headers)
    assert answer.status_code == 400 and message in answer.json()["error"]["message"], case


def test_mem2_the_client_sends_the_memory_tools_beta_with_a_body_that_offers_it(fake):
    strict = AnthropicFake(api_key=KEY)
    fake.handler = strict
    body = build_anthropic_body([{"role": "user", "content": "Hi"}], model="claude-opus-5", max_tokens=64,
                                tools=TOOLS + [{"type": "function", "function": {"name": "memory", "parameters": {
                                    "type": "object"}}}], native_types={"memory": "memory_20250818"})
    assert {k: v for k, v in body["tools"][-1].items() if k != "cache_control"} == MEMORY_TOOL
    with get_chat_client(provider="anthropic", base_url=fake.base_url, api_key=KEY, allow_private=True,
                         limits=FAST) as client:
        collect(client.stream_chat(body))
    assert fake.requests[-1].headers["anthropic-beta"] == "context-management-2025-06-27"
    plain = build_anthropic_body([{"role": "user", "content": "Hi"}], model="claude-opus-5", max_tokens=64,
                                 tools=TOOLS)
    with get_chat_client(provider="anthropic", base_url=fake.base_url, api_key=KEY, allow_private=True,
                         limits=FAST) as client:
        collect(client.stream_chat(plain))
    assert "anthropic-beta" not in fake.requests[-1].headers
