"""What memory costs, on a version's usage page (SPEC §7c, MEM-3): the tokens of each run's
frozen memory — an estimate with the estimator of the version's model — per run and summed,
and what the requests of each run's main line sent of it; only runs that carried memory.
The CSV has each run's memory tokens, empty for a run without memory.

Runs are driven by the real loop against the strict fake provider, on both wires. alice
talks with the agent; olivia reads the page (tests/conftest.py).
"""
from __future__ import annotations

import csv
import io
import re

import pytest

from context.estimators import get_estimator
from memory.selectors import MemoryOwner
from memory.services import memory_use_set
from models_catalog.providers import get_provider
from sessions.admin.memory_usage import block_tokens
from sessions.models import AccessAudit, ModelCall, Run, Session
from tests.fakes.fake_provider import chat_stream
from tests.runloop.driving import ask_and_run
from tests.runloop.test_memory import _save_call

pytestmark = pytest.mark.django_db(transaction=True)
DIALECTS = ("openai", "anthropic")


def usage_url(version) -> str:
    return f"/admin/agents/agentversion/{version.pk}/usage/"


def figure(html: str, label: str) -> str:
    return re.search(rf"<dt>{re.escape(label)}</dt><dd data-value=\"([^\"]*)\">", html).group(1)


def test_mem3_the_usage_page_counts_memorys_tokens_for_the_runs_that_carried_it(fake_session, strict, console):
    replies = iter([chat_stream(tool_calls=[_save_call("Alice works in metric units. " * 20)]),
                    chat_stream(["Noted."]), chat_stream(["Metric."]), chat_stream(["Hello."])])
    strict.handler = lambda request: next(replies)
    first = fake_session(tools=("calculator",), memory=True)
    version = first.version
    owner = MemoryOwner(space_id=first.space_id, agent_id=first.agent_id, user_id=first.user_id)
    remembering = ask_and_run(first, "Remember my units.")  # empty memory, two requests (the tool call)
    second = Session.objects.create(space=first.space, user=first.user, agent=first.agent, version=version)
    recalling = ask_and_run(second, "Which units?")  # the saved memory, one request
    memory_use_set(owner=owner, use=False)
    without = ask_and_run(second, "Hello?")  # the person turned memory off: no memory, left out
    assert [run.status for run in (remembering, recalling, without)] == ["completed"] * 3
    assert without.memory is None and remembering.memory and recalling.memory

    html = console.get(usage_url(version)).content.decode()
    estimator = get_estimator(version.model, exact_tokenizer=get_provider(version.provider).exact_tokenizer)
    expected = {run.pk: block_tokens(estimator, run.memory) for run in (remembering, recalling)}
    requests = {run.pk: ModelCall.objects.filter(run=run, purpose="action").count() for run in (remembering, recalling)}
    assert requests == {remembering.pk: 2, recalling.pk: 1}
    assert expected[recalling.pk] > expected[remembering.pk] + 100  # the saved text, in tokens
    assert figure(html, "Runs with memory") == "2"
    assert int(figure(html, "All runs' memory (tokens)")) == sum(expected.values())
    assert int(figure(html, "Largest (tokens)")) == expected[recalling.pk]
    assert int(figure(html, "Sent in their requests (tokens)")) == sum(expected[pk] * requests[pk] for pk in expected)
    assert "estimated" in html and estimator.id in html
    table = html[html.index('id="memory-runs"'):]
    table = table[:table.index("</table>")]
    shown = re.findall(r"Run (\d+)</a>.*?data-value=\"(\d+)\">.*?data-value=\"(\d+)\">.*?data-value=\"(\d+)\">",
                       table, flags=re.S)
    assert [tuple(map(int, row)) for row in shown] == [  # newest first, never the run without memory
        (pk, expected[pk], requests[pk], expected[pk] * requests[pk]) for pk in (recalling.pk, remembering.pk)]
    assert "metric units" not in html  # counted, never shown

    response = console.get(f"{usage_url(version)}csv/")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert {int(row["run"]): row["memory_tokens_estimated"] for row in rows} == {
        remembering.pk: str(expected[remembering.pk]), recalling.pk: str(expected[recalling.pk]), without.pk: ""}
    assert not AccessAudit.objects.exists()


def test_mem3_a_version_whose_runs_carried_no_memory_has_no_memory_section(fake_session, strict, console):
    strict.handler = lambda request: chat_stream(["Hello."])
    session = fake_session(tools=("calculator",))
    assert ask_and_run(session, "Hi.").status == Run.Status.COMPLETED
    html = console.get(usage_url(session.version)).content.decode()
    assert 'id="memory-figures"' not in html and "Runs with memory" not in html
