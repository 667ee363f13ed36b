"""``read_file``: read part of a file the person attached to a question (RUN-13).

The model view shows a long file's head and tail, with a note naming the exact call that
reads the middle; after a compaction the runtime-state block lists every file by name
and id. This tool reads the file's text (a PDF's extracted text) from the question
records of this conversation, by character offset and limit. A file of another session,
or of a question this run does not see (asked later, RUN-4), is "no such file".

Offered to every agent whose session has files: the run adds it to the agent's own tools
when a question it sees carries one (``files_in_view``), so agents need not choose it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents.tool_registry import Tool, ToolContext, ToolError, register
from context.attachments import READ_FILE_MAX_CHARS, READ_FILE_TOOL, file_text, session_files

if TYPE_CHECKING:
    from sessions.selectors.sessions import SessionTraits


def _question_records(run: Any) -> Any:
    """The question records the run's main line sees, as engine dicts (one at a time)."""
    from sessions.selectors.instances import main_instance
    from sessions.selectors.records import record_as_engine_dict, visible_records_query

    rows = visible_records_query(run=run, instance=main_instance(run=run)).filter(kind="user")
    return (record_as_engine_dict(row) for row in rows.iterator(chunk_size=50))


def files_in_view(*, run: Any, traits: SessionTraits | None = None) -> tuple[dict[str, Any], ...]:
    """The files of the questions ``run`` sees: ``{"id", "name", "kind", "size"}`` each.

    Asked at every run: the session's traits (``traits``, or read here in one indexed
    query) tell whether any question may carry a file, before every question it ever had
    is read and decrypted to find out."""
    from sessions.selectors.sessions import session_traits

    if not (traits or session_traits(session_id=run.session_id)).may_carry_files:
        return ()
    return session_files(_question_records(run))


def _run(arguments: dict[str, Any], context: ToolContext) -> str:
    from sessions.models import Run

    file_id, offset = arguments["file_id"], arguments.get("offset", 0)
    limit = min(arguments.get("limit", READ_FILE_MAX_CHARS), READ_FILE_MAX_CHARS)
    if offset < 0 or limit < 1:
        raise ToolError("offset must be ≥ 0 and limit ≥ 1.")
    run = Run.objects.get(pk=context.run_id, session_id=context.session_id)
    found = file_text(_question_records(run), file_id)
    if found is None:
        raise ToolError(f"No file {file_id} is attached to this conversation. The files are listed with their ids "
                        "where they were attached.")
    attachment, text = found
    name = attachment.get("name") or "the file"
    if attachment.get("kind") == "image":
        raise ToolError(f"File {file_id} ({name}) is an image: it has no text to read.")
    chunk = text[offset:offset + limit]
    end = offset + len(chunk)
    more = f"; continue with offset {end}" if end < len(text) else "; this is the end of the file"
    return f"[file {file_id} ({name}), characters {offset}–{end} of {len(text)}{more}]\n{chunk}"


read_file = register(Tool(
    name=READ_FILE_TOOL,
    description="Read part of a file the user attached to this conversation (a long file is shown as its "
                "beginning and end): give its file_id, an offset and a limit in characters "
                f"(at most {READ_FILE_MAX_CHARS:,}).",
    parameters={"type": "object", "properties": {
        "file_id": {"type": "integer"}, "offset": {"type": "integer", "minimum": 0},
        "limit": {"type": "integer", "minimum": 1}},
        "required": ["file_id"], "additionalProperties": False},
    run=_run,
    idempotent=True,
    read_only=True,
    timeout_seconds=10,
))
