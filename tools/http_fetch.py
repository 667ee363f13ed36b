"""``http_fetch``: GET a public web page as text — guarded, bounded, never private.

Private, loopback and link-local addresses are always refused here, whatever the model
connection setting says: a model must not reach the operator's network (SSRF).
"""
from __future__ import annotations

from html.parser import HTMLParser

from agents.tool_registry import Tool, ToolError, register
from models_catalog.errors import ProviderError
from models_catalog.http import fetch_url

MAX_TEXT = 50_000
_SKIP = {"script", "style", "noscript", "template", "svg", "head"}
_BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "pre", "table"}


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag, attrs) -> None:
        if tag == "title":
            self._in_title = True
        if tag in _SKIP:
            self.skipping += 1
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag) -> None:
        if tag == "title":
            self._in_title = False
        if tag in _SKIP and self.skipping:
            self.skipping -= 1
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data) -> None:
        if self._in_title:
            self.title += data  # shown once, as the heading
        elif not self.skipping:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """Visible text of an HTML page: scripts and styles dropped, blank runs collapsed."""
    extractor = _TextExtractor()
    extractor.feed(html)
    extractor.close()
    lines = [" ".join(line.split()) for line in "".join(extractor.parts).splitlines()]
    text = "\n".join(line for line in lines if line)
    title = " ".join(extractor.title.split())
    return f"# {title}\n\n{text}" if title else text


def _run(arguments: dict, context) -> str:
    url = arguments["url"]
    try:
        result = fetch_url(url, allow_private=False, **context.services.get("fetch_options", {}))
    except ProviderError as exc:
        raise ToolError(f"Could not fetch {url}: {exc}") from None
    if result.redirect_location:
        return (f"HTTP {result.status}: the page redirects to {result.redirect_location} "
                "(not followed; fetch that URL if needed).")
    if result.status >= 400:
        raise ToolError(f"Could not fetch {url}: HTTP {result.status}.")
    charset = "utf-8"
    if "charset=" in result.content_type:
        charset = result.content_type.split("charset=")[-1].split(";")[0].strip() or "utf-8"
    try:
        raw = result.body.decode(charset, errors="replace")
    except LookupError:
        raw = result.body.decode("utf-8", errors="replace")
    text = html_to_text(raw) if "html" in result.content_type or raw.lstrip()[:1] == "<" else raw
    note = "\n[page truncated at the size limit]" if result.truncated else ""
    if len(text) > MAX_TEXT:
        text, note = text[:MAX_TEXT], f"\n[text cut at {MAX_TEXT} characters]"
    return text + note


http_fetch = register(Tool(
    name="http_fetch",
    description="Fetch a public web page (HTTP GET) and return its text. Private addresses are refused.",
    parameters={"type": "object", "properties": {"url": {"type": "string", "description": "http(s) URL"}},
                "required": ["url"], "additionalProperties": False},
    run=_run,
    idempotent=True,
    read_only=True,
    timeout_seconds=20,
))
