"""Markdown for the chat, rendered on the server and safe to insert as HTML.

Two independent layers, so a gap in one is caught by the other:

1. **Markdown without raw HTML.** Python-Markdown's raw-HTML block preprocessor and
   inline pattern are removed, so ``<script>`` or ``<img onerror=…>`` typed by a user or
   produced by a model is escaped as text, never parsed as markup. Images become plain
   links (a remote image loads by itself — a model could be talked into leaking the
   conversation through an image URL).
2. **An allowlist sanitiser (nh3).** Only the tags Markdown produces survive, only
   ``href``/``title`` on links and ``language-*`` classes on code, and only ``http``,
   ``https`` and ``mailto`` URLs: a ``javascript:`` or ``data:`` link keeps its text and
   loses its ``href``. Every link gets ``rel="noopener noreferrer nofollow"``.

Fenced code blocks are kept (``<pre><code class="language-…">``), with their content
escaped as text.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as etree

import markdown
import nh3
from markdown.treeprocessors import Treeprocessor

MAX_MARKDOWN_CHARS = 200_000

ALLOWED_TAGS = frozenset({
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "b", "i", "del", "s",
    "code", "pre", "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td",
    "sup", "sub",
})
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "ol": {"start"}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
LINK_REL = "noopener noreferrer nofollow"
_LANGUAGE_CLASS = re.compile(r"language-[A-Za-z0-9_+#.-]{1,40}")


class _ImagesAsLinks(Treeprocessor):
    """``![alt](src)`` → a link to ``src`` labelled with the alt text; nothing loads by itself."""

    def run(self, root: etree.Element) -> None:
        for element in root.iter("img"):
            source = element.get("src", "")
            label = element.get("alt") or source or "image"
            element.attrib.clear()
            element.tag = "a"
            element.set("href", source)
            element.text = f"[image: {label}]"


def _markdown() -> markdown.Markdown:
    # A fresh instance per call: Markdown objects keep state and are not thread-safe.
    md = markdown.Markdown(extensions=["fenced_code", "tables", "sane_lists"], output_format="html")
    md.preprocessors.deregister("html_block")
    md.inlinePatterns.deregister("html")
    md.treeprocessors.register(_ImagesAsLinks(md), "images_as_links", 0)
    return md


def _attribute_filter(tag: str, attribute: str, value: str) -> str | None:
    if tag == "code" and attribute == "class":
        match = _LANGUAGE_CLASS.fullmatch(value.strip())
        return match.group() if match else None
    return value


def sanitize_html(html: str) -> str:
    """The allowlist pass alone (layer 2), for HTML that did not come from :func:`render_markdown`."""
    return nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        clean_content_tags={"script", "style"},
        attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
        attribute_filter=_attribute_filter,
        url_schemes=set(URL_SCHEMES),
        link_rel=LINK_REL,
        strip_comments=True,
    )


def render_markdown(text: str) -> str:
    """Markdown text (from a user or a model) → sanitised HTML safe to insert in a page."""
    if not text:
        return ""
    if len(text) > MAX_MARKDOWN_CHARS:
        text = text[:MAX_MARKDOWN_CHARS] + "\n\n…"
    return sanitize_html(_markdown().convert(text))
