"""Markdown for the chat, rendered on the server and safe to insert as HTML.

Two independent layers, so a gap in one is caught by the other:

1. **Markdown without raw HTML.** markdown-it-py (CommonMark, plus tables and
   strikethrough) with HTML turned off, so ``<script>`` or ``<img onerror=…>`` typed by a
   user or produced by a model is escaped as text, never parsed as markup. Images
   become plain links (a remote image loads by itself — a model could be talked into
   leaking the conversation through an image URL).
2. **An allowlist sanitiser (nh3).** Only the tags Markdown produces survive, only
   ``href``/``title`` on links and ``language-*`` classes on code, and only ``http``,
   ``https`` and ``mailto`` URLs: a ``javascript:`` or ``data:`` link keeps its text and
   loses its ``href``. Every link gets ``rel="noopener noreferrer nofollow"``.

Fenced code blocks are kept (``<pre><code class="language-…">``), with their content
escaped as text.

**Bounded work.** Any member can store text that every view of the page renders again
(an imported transcript, a model asked to echo something). markdown-it's parser has no
quadratic path (Python-Markdown's had: 8,000 ``[`` took six seconds), but its cost per
character still varies twentyfold between prose and a wall of link openers. So a message
longer than ``MAX_MARKDOWN_CHARS`` or with more than ``MAX_LINK_OPENERS`` ``[`` is shown
as escaped plain text, line breaks kept — the worst message then costs well under a
second, and an ordinary one is untouched. Past ``MAX_TEXT_CHARS`` even that text shows its
head and its tail, each half the bound, with a note of how much of the middle is not
shown: the end of a long log or answer is where its error or its conclusion is.
"""
from __future__ import annotations

import functools
import html
import re

import nh3
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore

MAX_MARKDOWN_CHARS = 50_000
MAX_LINK_OPENERS = 5_000  # "[" starts every link, image and reference the parser must try to close
MAX_TEXT_CHARS = 200_000  # past this even the plain-text fallback shows only its head and its tail
OMITTED_NOTE = ("{omitted:,} characters from the middle of this text are not shown here ({total:,} in all). "
                "The whole text is kept in the conversation's history: ask the agent about the part you need, "
                "or read it through the API (GET /api/v1/sessions/<id>/messages).")

ALLOWED_TAGS = frozenset({
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "b", "i", "del", "s",
    "code", "pre", "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td",
    "sup", "sub",
})
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "ol": {"start"}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
LINK_REL = "noopener noreferrer nofollow"
_LANGUAGE_CLASS = re.compile(r"language-[A-Za-z0-9_+#.-]{1,40}")
_FENCE_LANGUAGE = re.compile(r"[\s{.]*([A-Za-z0-9_+#-][A-Za-z0-9_+#.-]{0,39})")


def _fence_languages(state: StateCore) -> None:
    """A fence's info string keeps only its language: ``{.x onclick=…}`` → ``x``."""
    for token in state.tokens:
        if token.type == "fence":
            match = _FENCE_LANGUAGE.match(token.info)
            token.info = match.group(1) if match else ""


def _image_as_link(renderer, tokens, idx, options, env) -> str:
    """``![alt](src)`` → a link to ``src`` labelled with the alt text; nothing loads by itself."""
    token = tokens[idx]
    source = str(token.attrGet("src") or "")
    label = renderer.renderInlineAsText(token.children or [], options, env) or source or "image"
    return f'<a href="{html.escape(source)}">[image: {html.escape(label)}]</a>'


@functools.lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    # Built once: rendering keeps its state in per-call objects, so threads can share it.
    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    md.validateLink = lambda url: True  # every URL becomes a link; nh3 keeps only allowed schemes' hrefs
    md.core.ruler.after("block", "fence_languages", _fence_languages)
    md.add_render_rule("image", _image_as_link)
    return md


def _attribute_filter(tag: str, attribute: str, value: str) -> str | None:
    if tag == "code" and attribute == "class":
        match = _LANGUAGE_CLASS.fullmatch(value.strip())
        return match.group() if match else None
    return value


def sanitize_html(html_text: str) -> str:
    """The allowlist pass alone (layer 2), for HTML that did not come from :func:`render_markdown`."""
    return nh3.clean(
        html_text,
        tags=set(ALLOWED_TAGS),
        clean_content_tags={"script", "style"},
        attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
        attribute_filter=_attribute_filter,
        url_schemes=set(URL_SCHEMES),
        link_rel=LINK_REL,
        strip_comments=True,
    )


def markdown_html(text: str) -> str:
    """The renderer alone (layer 1), without the work bounds of :func:`render_markdown`."""
    return _parser().render(text)


def plain_text_html(text: str) -> str:
    """Text shown as it is, every character escaped; the ``plain`` class keeps its line
    breaks (``white-space: pre-wrap``), as for what the person wrote. Over ``MAX_TEXT_CHARS``
    the head and the tail are shown, with a note in between saying what is left out."""
    if len(text) <= MAX_TEXT_CHARS:
        return f'<p class="plain">{html.escape(text)}</p>'
    half = MAX_TEXT_CHARS // 2
    note = OMITTED_NOTE.format(omitted=len(text) - 2 * half, total=len(text))
    return (f'<p class="plain">{html.escape(text[:half])}</p><p class="note omitted">{html.escape(note)}</p>'
            f'<p class="plain">{html.escape(text[-half:])}</p>')


def render_markdown(text: str) -> str:
    """Markdown text (from a user or a model) → sanitised HTML safe to insert in a page."""
    if not text:
        return ""
    if len(text) > MAX_MARKDOWN_CHARS or text.count("[") > MAX_LINK_OPENERS:
        return plain_text_html(text)  # escaped by construction: nothing for the sanitiser to do
    return sanitize_html(markdown_html(text)).strip()
