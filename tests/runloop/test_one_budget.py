"""One budget figure (issue #46, CTX-21, CAT-9): ``ModelConnection.budget`` is what every
page, the API, the chat's meter and the run loop show and decide with.

The connection here learned from a refusal that its server keeps 8,000 tokens of the
32,768 configured; nobody set its margin or output reserve, so both follow the learned
window: 8,000 − 2,000 (a quarter) − 250 (a thirty-second) = 5,750. Each figure below was
once its own ``window − output − margin`` sum, and two of them used the configured
reserve (8,000 − 4,096 − 1,024 = 2,880) where runs used 5,750.
"""
from __future__ import annotations

import io
import json
import re
import tokenize
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from agents.models import Agent, AgentVersion
from agents.selectors import agent_budget, version_budget
from agents.services import agent_draft_changes, agent_publish
from context import Budget
from models_catalog.models import ModelConnection
from runloop.meter import context_measured
from runloop.state import run_state_build
from sessions.models import Session
from sessions.services.history import question_ask
from sessions.services.runs import run_claim
from tests.conftest import REPO
from web.selectors import context_meter

pytestmark = pytest.mark.django_db
LEARNED = 5_750


@pytest.fixture
def learned(demo_connection, version) -> ModelConnection:
    """The connection, once a refusal taught it its server's window (after ``version`` was
    published with the configured figures)."""
    ModelConnection.objects.filter(pk=demo_connection.pk).update(learned_context_window=8_000,
                                                                 learned_window_note="refused at 8,000")
    return ModelConnection.objects.get(pk=demo_connection.pk)


def test_a_learned_window_lowers_the_budget_and_the_reserves_nobody_set(learned):
    assert learned.budget() == Budget(context_window=8_000, max_output_tokens=2_000, safety_margin_tokens=250)
    assert learned.budget().effective_input == LEARNED
    frozen = Budget(context_window=32_768, max_output_tokens=4_096, safety_margin_tokens=1_024)
    assert learned.budget(frozen) == learned.budget()
    assert learned.budget(Budget(context_window=4_000, max_output_tokens=500, safety_margin_tokens=125)) == \
        Budget(context_window=4_000, max_output_tokens=500, safety_margin_tokens=125)  # smaller: unchanged


def test_the_console_the_api_the_agent_and_the_version_show_the_budgets_figure(learned, agent, version, alice,
                                                                                console):
    page = console.get(f"/admin/models_catalog/modelconnection/{learned.pk}/change/").content.decode()
    assert f"{LEARNED:,} tokens" in page
    api = APIClient()
    api.force_authenticate(alice)
    assert api.get(f"/api/v1/model-connections/{learned.pk}").json()["effective_input_tokens"] == LEARNED
    assert agent_budget(agent=Agent.objects.get(pk=agent.pk))["effective_input_tokens"] == LEARNED
    assert version_budget(version=AgentVersion.objects.get(pk=version.pk))["effective_input_tokens"] == LEARNED
    # The agent form's script recomputes its line from the server's figure, not its own sum.
    form = console.get(f"/admin/agents/agent/{agent.pk}/change/").content.decode()
    figures = re.search(r'<script id="agent-connection-figures" type="application/json">(.*?)</script>', form, re.S)
    assert figures is not None
    assert json.loads(figures.group(1))[str(learned.pk)]["effective_input_tokens"] == LEARNED


def test_the_chats_meter_before_and_during_a_run_shows_what_the_run_decides_with(learned, make_session, alice):
    session = Session.objects.get(pk=make_session(alice).pk)  # read as a page reads it
    assert context_meter(session=session)["effective_input_tokens"] == LEARNED
    run = question_ask(session=session, content="What is 6*7?")
    state = run_state_build(run_claim(run_id=run.pk))
    assert state.figures.budget.effective_input == LEARNED
    assert context_measured(state, tokens=0, measured_by="estimate")["effective_input_tokens"] == LEARNED


# A sum of a window, an output reserve and a margin written out, in code (not in words).
HAND_WRITTEN = re.compile(r"window\w*\s*-\s*[\w.\[\]\"']*output[\w.\[\]\"']*\s*-\s*[\w.\[\]\"'(]*margin",
                          re.IGNORECASE)


def code_of(path: Path) -> str:
    """A module's code without its strings and comments (Python), or without its comments."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return re.sub(r"//[^\n]*|<!--.*?-->|\{#.*?#\}", "", text, flags=re.S)
    skipped = {tokenize.STRING, tokenize.COMMENT}
    return " ".join(token.string for token in tokenize.generate_tokens(io.StringIO(text).readline)
                    if token.type not in skipped)


def test_nothing_but_the_budget_writes_the_sum():
    sources = [path for folder in ("context", "core", "models_catalog", "toolservers", "agents", "sessions",
                                   "runloop", "tools", "web", "agentloom", "static", "templates", "benchmarks")
               for path in sorted((REPO / folder).rglob("*")) if path.suffix in {".py", ".js", ".html"}]
    written = [f"{path.relative_to(REPO)}: {match.group(0)}" for path in sources
               for match in HAND_WRITTEN.finditer(code_of(path))]
    assert written == ["context/policy.py: window - max_output_tokens - safety_margin"]  # input_room


def test_a_version_published_after_the_window_was_learned_freezes_the_budgets_figures(learned, agent, alice):
    published = agent_publish(agent=Agent.objects.get(pk=agent.pk), published_by=alice)
    assert (published.context_window, published.max_output_tokens, published.safety_margin_tokens) == \
        (8_000, 2_000, 250)
    assert version_budget(version=published)["effective_input_tokens"] == LEARNED
    assert agent_draft_changes(agent=Agent.objects.get(pk=agent.pk))[1] == []  # nothing more to publish
