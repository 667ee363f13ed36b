"""The continuity benchmark's cross-session case (MEM-3): what memory carries from one
session to the next, and what it costs each request.

Path: the run loop on the fake provider (OpenAI's wire through the strict fake, Anthropic's
through the strict Messages fake with its prompt cache), a real database, one person and one
agent. Session 1: the person gives four facts; a scripted model saves them with the
``memory`` tool when it has one (it then answers "Noted."). Every session then asks
--fillers long questions whose answers fill a 16,000-token window, so the context policy
compacts (``target_ratio`` 0.15, ``user_turns`` 2) between them; sessions 2…N end with
"What do you know about me?". A fact counts as recalled when that question's request
carries its marker anywhere (the memory block after the system instructions, in practice).

Compared in the same run: the agent with memory against the same agent without it (the
same sessions and questions; its recall is 0 by construction, as no session sees another's
history). Reported per wire: the share recalled in sessions 2…N, the compactions made, the
tokens memory adds to each request (the memory block and the tool's schema, with the run's
estimator), the prompt tokens of the later sessions' requests both ways as the fake counts
them, and on Anthropic's wire the input its simulated cache served (``cache_read_input_tokens``)
both ways, with the ratios.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import Any

KEY = "sk-bench-memory-000000"
WIRES = {"openai": ("openai_compatible", "fake-model"), "anthropic": ("anthropic", "claude-fake-4")}
# Markers no filler, summary or instruction contains: present in a request only if memory carried it.
FACTS = {"name": "Ines Okafor-Lindqvist", "units": "metric-KN7731", "project": "Kestrel Harbour retrofit",
         "decision": "ferrite-Q3 bearings"}
TELL = (f"Please remember for next time: my name is {FACTS['name']}; I use {FACTS['units']} units; I work on the "
        f"{FACTS['project']}; we decided on {FACTS['decision']}.")
RECALL = "What do you know about me?"
FILLER = "Go over the load figures again in detail, line by line. " + "Detail. " * 200
ANSWER = "Here are the figures in detail. " * 120
WINDOW = 16_000
POLICY = {"target_ratio": 0.15, "user_turns": 2}


@dataclass
class Case:
    """One wire, with or without memory: what its sessions sent and recalled."""

    wire: str
    memory: bool
    recalled: list[float] = field(default_factory=list)  # per later session: share of facts its question carried
    compactions: list[int] = field(default_factory=list)  # per session: compacted views saved
    summary_calls: int = 0
    block_tokens: int = 0  # what the memory block adds to each request of the later sessions (estimate)
    tool_tokens: int = 0  # and the memory function's schema (estimate)
    prompt: list[int] = field(default_factory=list)  # later sessions' requests: prompt tokens as the fake counts
    cache_read: list[int] = field(default_factory=list)  # Anthropic's wire: cache_read_input_tokens per request
    requests: int = 0
    saved: dict[str, str] = field(default_factory=dict)
    rejections: int = 0


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


class Script:
    """The scripted model (OpenAI-shaped: the Anthropic bridge translates both ways)."""

    def __init__(self) -> None:
        self.recall_requests: list[str] = []
        self.summaries = 0

    def __call__(self, request):
        from tests.fakes.fake_provider import chat_stream
        from tests.fakes.summaries import is_summary

        messages = request.json["messages"]
        if is_summary(messages):  # every section, none of the facts: a summary of the fillers only
            from context.compaction import SECTION_TITLES

            self.summaries += 1
            sections = "\n".join(f"{n}. {title}: the load figures, gone over in detail."
                                 for n, title in enumerate(SECTION_TITLES, start=1))
            return chat_stream([f"<summary>\n{sections}\n</summary>"])
        last = messages[-1]
        if last["role"] == "tool":
            return chat_stream(["Noted."])
        asked = _text(last.get("content"))
        offered = {tool.get("function", {}).get("name") for tool in request.json.get("tools") or []}
        if asked.startswith("Please remember") and "memory" in offered:
            text = "\n".join(f"- {kind}: {value}" for kind, value in FACTS.items())
            return chat_stream(tool_calls=[{"id": "mem-1", "name": "memory", "arguments": json.dumps(
                {"command": "create", "path": "/memories/about.md", "file_text": text})}])
        if RECALL in asked:  # the question, alone or restated after a compaction
            self.recall_requests.append(json.dumps(request.native or request.json))
            return chat_stream(["Here is what I know."])
        return chat_stream(["Noted." if asked.startswith("Please remember") else ANSWER])


def _agent(wire: str, base_url: str, memory: bool):
    from django.contrib.auth import get_user_model

    from agents.services import agent_create, agent_publish
    from core.spaces.services import space_bootstrap_for_user
    from models_catalog.models import ModelConnection

    provider, model = WIRES[wire]
    user, _ = get_user_model().objects.get_or_create(username=f"bench-memory-{wire}-{int(memory)}")
    space = space_bootstrap_for_user(user=user, name=f"Memory {wire} {memory}")
    connection = ModelConnection.objects.create(space=space, name=f"Fake {wire}", provider=provider,
                                                base_url=base_url, api_key=KEY, model=model, context_window=WINDOW,
                                                max_output_tokens=1_024)
    agent = agent_create(space=space, name="Keeper", model_connection=connection, instructions="Be brief.",
                         tools=["calculator"], context_policy=POLICY, created_by=user)
    agent.memory = memory
    agent.save(update_fields=["memory"])
    return user, agent_publish(agent=agent, published_by=user)


def _ask(session, content: str) -> None:
    from runloop.loop import run_execute
    from sessions.models import Run
    from sessions.services.questions import question_ask

    run = question_ask(session=session, content=content)
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error


def _memory_tokens(version, block: str) -> tuple[int, int]:
    """What the block and the tool's schema each add to a request, with the run's estimator
    (on Anthropic's wire the native tool is sent by its type and name, not this schema)."""
    from agents.tool_registry import registry
    from context import get_estimator
    from models_catalog.providers import get_provider

    estimator = get_estimator(version.model, exact_tokenizer=get_provider(version.provider).exact_tokenizer)
    system = [{"type": "text", "text": version.instructions}]
    tools = [registry["calculator"].schema()]
    without = estimator.request([{"role": "system", "content": system}], tools)
    with_block = estimator.request([{"role": "system", "content": [*system, {"type": "text", "text": block}]}], tools)
    return with_block - without, estimator.tools([*tools, registry["memory"].schema()]) - estimator.tools(tools)


def measure(*, wire: str, memory: bool, sessions: int = 5, fillers: int = 3) -> Case:
    """Sessions 1…``sessions`` of one person with one agent on ``wire``, with or without memory."""
    from memory.selectors import MemoryOwner, memory_files
    from sessions.models import CompactionSnapshot, Run, Session
    from tests.fakes.anthropic_bridge import AnthropicBridge
    from tests.fakes.fake_provider import FakeProvider
    from tests.fakes.strict import StrictProvider

    case = Case(wire, memory)
    script = Script()
    front = (AnthropicBridge if wire == "anthropic" else StrictProvider)(script, api_key=KEY)
    with FakeProvider(front) as fake:
        user, version = _agent(wire, fake.base_url, memory)
        for number in range(1, sessions + 1):
            session = Session.objects.create(space=version.agent.space, user=user, agent=version.agent,
                                             version=version)
            summaries, sent = script.summaries, len(fake.requests)
            usages = len(getattr(front, "usages", ()))
            if number == 1:
                _ask(session, TELL)
            for _ in range(fillers):
                _ask(session, FILLER)
            if number > 1:
                _ask(session, RECALL)
                carried = script.recall_requests[-1]
                case.recalled.append(sum(marker in carried for marker in FACTS.values()) / len(FACTS))
                later = getattr(front, "usages", [])[usages:]
                case.prompt += [u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
                                for u in later]
                case.cache_read += [u["cache_read_input_tokens"] for u in later]
                case.requests += len(fake.requests) - sent
                block = Run.objects.filter(session=session).values_list("memory", flat=True).last()
                if block is not None:
                    case.block_tokens, case.tool_tokens = _memory_tokens(version, block)
            case.compactions.append(CompactionSnapshot.objects.filter(instance__run__session=session).count())
            case.summary_calls += script.summaries - summaries
        owner = MemoryOwner(space_id=version.agent.space_id, agent_id=version.agent_id, user_id=user.pk)
        case.saved = memory_files(owner=owner)
        case.rejections = len(front.rejections)
    return case


def _share(values: list[float]) -> str:
    return f"{statistics.mean(values):.0%}" if values else "-"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if b else "-"


def report(cases: list[Case], sessions: int) -> None:
    """The tables: recall and compactions per wire, then what memory costs and caches."""
    from _django import table

    pairs = {(c.wire, c.memory): c for c in cases}
    rows = []
    for wire in WIRES:
        on, off = pairs.get((wire, True)), pairs.get((wire, False))
        if on is None or off is None:
            continue
        rows.append((wire, _share(on.recalled), _share(off.recalled),
                     f"{sum(on.compactions)} / {sum(off.compactions)} (min {min(on.compactions)} a session)",
                     f"{on.summary_calls} / {off.summary_calls}", f"{len(on.saved)} / {len(off.saved)}",
                     f"{on.rejections + off.rejections}"))
    table(f"(a) facts from session 1 recalled in sessions 2…{sessions} (a compaction or more in each)", rows,
          ("wire", "recalled, memory", "recalled, no memory", "compactions, memory / none", "summary calls",
           "memory files", "invalid requests"))
    rows = []
    for wire in WIRES:
        on, off = pairs.get((wire, True)), pairs.get((wire, False))
        if on is None or off is None:
            continue
        row = [wire, f"{on.block_tokens} + {on.tool_tokens}"]
        if on.prompt and off.prompt:
            per_on, per_off = statistics.mean(on.prompt), statistics.mean(off.prompt)
            read_on, read_off = sum(on.cache_read), sum(off.cache_read)
            row += [f"{per_on:,.0f} / {per_off:,.0f} ({_ratio(per_on, per_off)})",
                    f"{read_on:,} / {read_off:,} ({_ratio(read_on, read_off)})",
                    f"{read_on / sum(on.prompt):.0%} / {read_off / sum(off.prompt):.0%}",
                    f"{(read_on - read_off) / max(on.requests, 1):,.0f}"]
        else:
            row += ["-", "-", "-", "-"]
        rows.append(tuple(row))
    table(f"(b) what memory adds to each request of sessions 2…{sessions} (memory / no memory)", rows,
          ("wire", "block + function schema (estimate)", "prompt tokens per request (fake's count)",
           "cache read, total", "share of input read from cache", "cache read added per request"))


def _no_background_work() -> None:
    """Runs, compactions and summaries prepared ahead go nowhere: this process drives every
    run itself, and a summary the loop needs it makes in the step (as the tests do)."""
    from sessions.services.dispatch import compaction_dispatcher_set, dispatcher_set, preparation_dispatcher_set

    queued: list[int] = []
    for choose in (dispatcher_set, compaction_dispatcher_set, preparation_dispatcher_set):
        choose(queued.append)


def run_case(*, sessions: int = 5, fillers: int = 3) -> list[Case]:
    """Both wires, with and without memory, then the report. Sets Django up on a benchmark
    database of its own unless it is already (the smoke test's database)."""
    from django.conf import settings

    if not settings.configured:
        from _django import setup

        setup()
        _no_background_work()
    cases = [measure(wire=wire, memory=memory, sessions=sessions, fillers=fillers)
             for wire in WIRES for memory in (True, False)]
    report(cases, sessions)
    return cases
