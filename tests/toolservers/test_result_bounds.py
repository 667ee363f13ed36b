"""What a tool server's result may put in a record (TOOL-4, CTX-7): its structured content
under the same cap as its text, and its images only once they decode as the image they say
they are (RUN-13's rules for uploads). Real SDK servers, real runs."""
from __future__ import annotations

import json

import pytest

from agents.tool_registry import Tool
from sessions.models import Run
from tests.fakes.fake_provider import chat_stream, sequence
from tests.toolservers.runs import ask_and_run, call, results, session_with

pytestmark = pytest.mark.django_db(transaction=True)
CAP = Tool.__dataclass_fields__["output_limit"].default  # characters of one result kept in the records


def registered_with(client, server):
    response = client.post("/api/v1/tool-servers", {"name": "tests", "url": server.url, "headers": server.headers},
                           format="json")
    assert response.status_code == 201, response.json()


def test_tool4_a_huge_structured_content_is_not_stored_whole_and_the_records_say_so(
        as_alice, space, alice, fake, dialect, strict, mcp_server):
    def rows(count: int) -> dict[str, list[str]]:
        """A table of ``count`` rows, as structured content (and its JSON as text, by the SDK)."""
        return {"rows": [f"row {i:07d} of the report" for i in range(count)]}

    mcp_server.mcp.add_tool(rows)
    registered_with(as_alice, mcp_server)
    session = session_with(space, alice, fake, dialect, ["tests.rows"])
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__rows", {"count": 100_000})]),
                              chat_stream(["A long table."]))
    run = ask_and_run(session)
    assert run.status == Run.Status.COMPLETED, run.error
    result = results(session)[0]
    whole = len(json.dumps(rows(100_000), ensure_ascii=False))
    assert whole > 2 * CAP  # what the server sent, twice over the cap
    assert "structured_content" not in result
    assert result["structured_content_omitted"] == {"characters": whole, "limit": CAP}
    assert len(result["content"]) <= CAP and result["content"].startswith("{")  # the text's head and tail
    page = as_alice.get(f"/api/v1/sessions/{session.pk}/messages")
    assert page.status_code == 200 and len(page.content) < CAP + 200_000


def test_tool4_structured_content_under_the_cap_is_kept_whole(as_alice, space, alice, fake, dialect, strict,
                                                              mcp_server):
    registered_with(as_alice, mcp_server)
    session = session_with(space, alice, fake, dialect, ["tests.add"])
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__add", {"a": 2, "b": 3})]), chat_stream(["5."]))
    assert ask_and_run(session).status == Run.Status.COMPLETED
    result = results(session)[0]
    assert result["structured_content"] == {"sum": 5} and "structured_content_omitted" not in result


def png_claiming(width: int, height: int) -> bytes:
    """A PNG whose header says ``width`` × ``height`` but whose pixels are a few bytes: a
    decompression bomb's shape, refused from the header before anything is decoded."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


def test_tool4_images_from_a_server_are_kept_only_when_they_decode_as_images(as_alice, space, alice, fake, dialect,
                                                                            strict, mcp_server, settings):
    import base64

    from mcp_types import ImageContent, TextContent

    from tests.fakes.mcp_servers import tiny_png

    def encoded(data: bytes) -> str:
        return base64.b64encode(data).decode()

    svg = b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><rect width="9" height="9"/></svg>'
    whole = tiny_png(24, 16)
    settings.AGENTLOOM_IMAGE_MAX_BYTES = len(whole) + 32  # the upload bound, here just above the real picture

    def pictures() -> list:
        """Pictures, as a careless or hostile server sends them."""
        return [TextContent(type="text", text="Five pictures."),
                ImageContent(type="image", data=encoded(svg), mime_type="image/png"),  # markup, called a PNG
                ImageContent(type="image", data=encoded(whole[:60]), mime_type="image/png"),  # cut short
                ImageContent(type="image", data=encoded(png_claiming(30_000, 30_000)), mime_type="image/png"),
                ImageContent(type="image", data=encoded(whole), mime_type="image/jpeg"),  # a PNG called a JPEG
                ImageContent(type="image", data=encoded(whole), mime_type="image/png"),
                ImageContent(type="image", data=encoded(whole + b"\0" * 64), mime_type="image/png")]  # too large

    mcp_server.mcp.add_tool(pictures)
    registered_with(as_alice, mcp_server)
    session = session_with(space, alice, fake, dialect, ["tests.pictures"])
    strict.handler = sequence(chat_stream(tool_calls=[call("tests__pictures", {})]), chat_stream(["Two of five."]))
    run = ask_and_run(session)
    assert run.status == Run.Status.COMPLETED, run.error
    content = results(session)[0]["content"]
    assert content[0] == {"type": "text", "text": "Five pictures."}
    notes = [part["text"] for part in content[1:4]]
    assert all(part["type"] == "text" for part in content[1:4])
    assert all(note.startswith("[an image the tool sent as image/png was left out: ") for note in notes)
    assert "not an image" in notes[0] and "damaged" in notes[1] and "30000 × 30000" in notes[2]
    assert "alert(1)" not in json.dumps(content) and encoded(svg) not in json.dumps(content)
    # A real picture stays a picture, under the type its bytes say.
    assert content[4] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded(whole)}"}}
    assert content[5] == content[4]
    assert content[6]["type"] == "text" and f"more than the {len(whole) + 32:,}" in content[6]["text"]
