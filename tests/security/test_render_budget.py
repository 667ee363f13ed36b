"""A page's rendering is bounded by measure, not by a clock (SPEC §10, §11).

Anyone can import a transcript that every view of its session renders again. The work
is counted, never timed: the characters fed to the Markdown renderer, the characters a
page shows, and the Python calls the renderer makes for adversarial text four times as
long (about four times as many when linear, sixteen when quadratic).
"""
from __future__ import annotations

import json
import sys

import pytest
from django.test import Client
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.security.conftest import token_for
from web import markdown
from web.markdown import (
    PAGE_MARKDOWN_CHARS,
    PAGE_TEXT_CHARS,
    PLAIN_NOTE,
    SPENT_HEAD_CHARS,
    RenderBudget,
    render_markdown,
)

STARS = "*" * 25_000


@pytest.fixture
def fed(monkeypatch) -> list[int]:
    """The length of each text handed to the Markdown renderer (the renderer itself runs)."""
    lengths: list[int] = []
    real = markdown.markdown_html

    def counting(text: str) -> str:
        lengths.append(len(text))
        return real(text)

    monkeypatch.setattr(markdown, "markdown_html", counting)
    return lengths


def _import(alice, agent, messages: list[dict]) -> int:
    client = Client(HTTP_AUTHORIZATION=f"Token {token_for(alice)}")
    response = client.post("/api/v1/sessions/import", json.dumps({"agent": agent.pk, "transcript": messages}),
                           content_type="application/json")
    assert response.status_code == 201, response.content[:300]
    return response.json()["id"]


def _alternating(count: int, text: str) -> list[dict]:
    return [{"role": "user" if index % 2 == 0 else "assistant", "content": text} for index in range(count)]


@pytest.mark.django_db
def test_an_imported_run_of_long_star_runs_renders_within_the_pages_budget(alice, agent, version, fed):
    session_id = _import(alice, agent, _alternating(40, STARS))  # the review's case: 40 × 25,000 "*"
    browser = Client()
    browser.force_login(alice)
    page = browser.get(f"/sessions/{session_id}/")
    assert page.status_code == 200
    assert sum(fed) <= PAGE_MARKDOWN_CHARS, f"{sum(fed):,} characters rendered as Markdown"
    html = page.content.decode()
    assert html.count("<hr") == PAGE_MARKDOWN_CHARS // len(STARS)  # the newest answers are still Markdown
    assert html.count("Shown as plain text") == 20 - PAGE_MARKDOWN_CHARS // len(STARS)
    assert html.rindex("Shown as plain text") < html.index("<hr")  # older answers first give way


@pytest.mark.django_db
def test_past_the_pages_text_budget_a_text_shows_its_head_and_says_what_is_left_out(alice, agent, version, fed):
    session_id = _import(alice, agent, _alternating(60, STARS))  # 1.5 MB: over what one page shows
    browser = Client()
    browser.force_login(alice)
    page = browser.get(f"/sessions/{session_id}/")
    html = page.content.decode()
    assert sum(fed) <= PAGE_MARKDOWN_CHARS
    assert html.count("*") <= PAGE_TEXT_CHARS + 60 * SPENT_HEAD_CHARS
    assert len(html) < PAGE_TEXT_CHARS + 200_000
    assert "more characters of this text are not shown" in html and "GET /api/v1/sessions/&lt;id&gt;/messages" in html
    assert html.index("more characters of this text are not shown") < html.index("<hr")  # the oldest are cut


@pytest.mark.django_db
def test_the_budget_is_one_per_page_across_its_runs_newest_first(alice, agent, version, fed):
    first = _import(alice, agent, _alternating(16, STARS))  # 8 answers each: two runs, 16 in all
    from sessions.models import Run

    Run.objects.filter(session_id=_import(alice, agent, _alternating(16, STARS))).update(session_id=first)
    browser = Client()
    browser.force_login(alice)
    html = browser.get(f"/sessions/{first}/").content.decode()
    assert sum(fed) <= PAGE_MARKDOWN_CHARS
    newest_run = html.rindex('<section class="run')
    assert html.count("<hr", newest_run) == 8 and "Shown as plain text" not in html[newest_run:]
    assert html[:newest_run].count("<hr") == PAGE_MARKDOWN_CHARS // len(STARS) - 8


def test_a_budget_renders_markdown_while_it_lasts_then_escaped_text_with_a_note():
    budget = RenderBudget(markdown_chars=10, text_chars=1_000)
    assert budget.answer_html("**bold**") == "<p><strong>bold</strong></p>"
    plain = budget.answer_html("**<b>more</b>**")
    assert plain.startswith('<p class="plain">**&lt;b&gt;more&lt;/b&gt;**</p>') and PLAIN_NOTE in plain
    assert (budget.rendered, budget.shown) == (8, 8 + 15)


def test_a_spent_budget_still_shows_the_head_of_each_text():
    budget = RenderBudget(markdown_chars=0, text_chars=0)
    shown, omitted = budget.text("x" * 1_000)
    assert (len(shown), omitted) == (SPENT_HEAD_CHARS, 1_000 - SPENT_HEAD_CHARS)
    assert "700 more characters of this text are not shown" in budget.text_with_note("y" * 1_000)


# --- the renderer itself: operations, not seconds -------------------------------------------------

def _calls(text: str) -> int:
    """Python and C function calls made while rendering ``text``: a work count that no
    other process on the machine can change."""
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        render_markdown(text)
    finally:
        sys.setprofile(None)
    return count


def _linear(small: str, large: str) -> None:
    a, b = _calls(small), _calls(large)
    # Four times the input: about 4× the calls when linear (measured ≤ 4.05), 16× when quadratic.
    assert b <= 5 * a + 2_000, f"{a:,} calls → {b:,}"


ALPHABET = "*_`[]()!<>\\~-#|&; \n\ta1:/\"'="


@settings(max_examples=40, deadline=None, database=None)
@given(unit=st.text(alphabet=ALPHABET, min_size=1, max_size=8))
def test_markdown_work_grows_linearly_for_repeated_adversarial_units(unit):
    _linear(unit * (2_000 // len(unit)), unit * (8_000 // len(unit)))


GROWING = {
    "backtick runs of growing length": lambda k: "".join("`" * i + "a" for i in range(1, k)),
    "star runs of growing length": lambda k: "".join("*" * i + "a" for i in range(1, k)),
    "nested brackets": lambda k: "[" * (k * k // 4) + "a" + "]" * (k * k // 4),
    "nested link text": lambda k: "[a" * (k * k // 4) + "](b)",
    "open then closed emphasis": lambda k: "*a " * (k * k // 6) + "b*" * (k * k // 6),
    "a star wall inside a word": lambda k: "x" + "*" * (k * k // 2) + "x",
}


@pytest.mark.parametrize("make", GROWING.values(), ids=GROWING.keys())
def test_markdown_work_grows_linearly_for_nested_and_growing_delimiters(make):
    _linear(make(60), make(120))  # k doubled: the input is four times as long
