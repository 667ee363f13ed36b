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

**A budget per page.** Those bounds are per message, and a page shows many: one imported
run of 40 messages of 25,000 characters is a megabyte on one page. A :class:`RenderBudget`
is spent by everything one page (or one run's fragment) shows, newest first — the end of
the page is what a person reads. Past ``PAGE_MARKDOWN_CHARS`` fed to the renderer, an
answer is shown as escaped plain text (linear and cheap) with a note; past
``PAGE_TEXT_CHARS`` shown in all, a text shows only its first ``SPENT_HEAD_CHARS`` with a
note of what is left out and where the whole text is.
"""
from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass

import nh3
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore

MAX_MARKDOWN_CHARS = 50_000
MAX_LINK_OPENERS = 5_000  # "[" starts every link, image and reference the parser must try to close
MAX_TEXT_CHARS = 200_000  # past this even the plain-text fallback shows only its head and its tail
OMITTED_NOTE = ("{omitted:,} characters from the middle of this text are not shown here ({total:,} in all). "
                "The whole text is kept in the conversation's history: ask the agent about the part you need, "
                "or read it through the API (GET /api/v1/sessions/<id>/messages).")

PAGE_MARKDOWN_CHARS = 200_000  # characters one page feeds to the Markdown renderer, newest first
PAGE_TEXT_CHARS = 1_000_000  # characters of message text one page shows at all
SPENT_HEAD_CHARS = 300  # what a text still shows once the page's text budget is spent
PLAIN_NOTE = ("Shown as plain text: this page has already formatted as much Markdown as one page renders. "
              "The newest messages are formatted first; the text itself is complete.")
SPENT_NOTE = ("{omitted:,} more characters of this text are not shown: this page already shows as much text as "
              "one page holds. The whole text is kept in the conversation's history: read it through the API "
              "(GET /api/v1/sessions/<id>/messages) or ask the agent about it.")

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


class _LinkingMarkdownIt(MarkdownIt):
    def validateLink(self, url: str) -> bool:
        return True  # every URL becomes a link; nh3 keeps only allowed schemes' hrefs


@functools.lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    # Built once: rendering keeps its state in per-call objects, so threads can share it.
    md = _LinkingMarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
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


@dataclass
class RenderBudget:
    """What one page may still spend on message text. ``rendered`` and ``shown`` count the
    characters fed to the Markdown renderer and shown in all: the page's work, by measure."""

    markdown_chars: int = PAGE_MARKDOWN_CHARS
    text_chars: int = PAGE_TEXT_CHARS
    rendered: int = 0
    shown: int = 0

    def text(self, text: str) -> tuple[str, int]:
        """``text`` as the page may show it, and how many characters of it are left out."""
        room = max(self.text_chars - self.shown, 0)
        if len(text) <= room:
            self.shown += len(text)
            return text, 0
        head = text[:max(room, SPENT_HEAD_CHARS)]
        self.shown += len(head)
        return head, len(text) - len(head)

    def text_with_note(self, text: str) -> str:
        """Plain text (escaped by the template) with the note appended when cut."""
        shown, omitted = self.text(text)
        return shown if not omitted else f"{shown} …\n\n[{SPENT_NOTE.format(omitted=omitted)}]"

    def answer_html(self, text: str) -> str:
        """Markdown while the page's renderer budget lasts, then escaped plain text with a note."""
        if not text:
            return ""
        if len(text) <= self.markdown_chars - self.rendered and len(text) <= self.text_chars - self.shown:
            self.rendered += len(text)
            self.shown += len(text)
            return render_markdown(text)
        shown, omitted = self.text(text)
        if omitted:
            note = SPENT_NOTE.format(omitted=omitted)
            return f'{plain_text_html(shown)}<p class="note omitted">{html.escape(note)}</p>'
        return f'{plain_text_html(shown)}<p class="note plain-note">{html.escape(PLAIN_NOTE)}</p>'
