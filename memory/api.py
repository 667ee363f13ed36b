"""The memory API (SPEC §7c, MEM-4): a person sees, edits and erases their own memory for
one agent, and chooses whether the agent uses it.

``/api/v1/agents/{id}/memory`` (GET the overview, PUT ``{use_memory}``, DELETE = forget
everything) and ``/api/v1/agents/{id}/memory/{path}`` (GET, PUT ``{content}``, DELETE one
file or a directory of files), ``{path}`` being under ``/memories`` (``notes.md``,
``projects/a.md``). Members of the agent's space only, each always and only reaching their
own memory (``memory.access``); another space's agent is a 404. With the agent's memory
off, reading and erasing still work (what is kept stays the person's to see and erase),
and writing a file is a 409. Every change is a ``MemoryChange`` with who and when, in the
session named (the caller's own, of this agent) or in the memory log.
"""
from __future__ import annotations

import sys

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import api_view
from rest_framework.response import Response

from core.api.fields import id_from_text
from core.errors import Conflict, NotFound, ValidationFailed
from memory.access import MemoryReach, memory_reach_for_user, memory_session_for_user
from memory.files import MemoryCommandError, memory_apply, memory_path
from memory.selectors import memory_changes, memory_files, memory_overview
from memory.serializers import MemoryFileIn, MemoryFileOut, MemoryOut, MemoryUseIn
from memory.services import memory_file_delete, memory_file_put, memory_forget, memory_use_set

CHANGES_SHOWN = 50
MEMORY_OFF = "This agent's memory is off: nothing can be saved to it. What is kept can still be read and erased."

SESSION_PARAMETER = OpenApiParameter("session", int, description=(
    "Optional: your own session of this agent in which the change is made (the session then shows it)."))
PATH_PARAMETER = OpenApiParameter("path", str, OpenApiParameter.PATH, description=(
    "A file (or, for DELETE, a directory) under /memories, without the prefix: `notes.md`, `projects/a.md`."))


def _overview(reach: MemoryReach) -> dict:
    return {**memory_overview(owner=reach.owner), "agent_memory": reach.agent_memory,
            "changes": memory_changes(owner=reach.owner, limit=CHANGES_SHOWN)}


def _path(raw: str, *, directory_ok: bool = False) -> str:
    try:
        return memory_path(raw, directory_ok=directory_ok)
    except MemoryCommandError as exc:
        raise ValidationFailed(str(exc), fields={"path": str(exc)}) from None


def _path_free(reach: MemoryReach, name: str) -> None:
    """A 400 naming ``path`` when a file cannot be written there whatever its text (a
    directory of files, or a file in the way): the pure command, tried without a bound,
    says so; the write itself checks again under the owner's lock."""
    try:
        memory_apply(memory_files(owner=reach.owner), {"command": "create", "path": name, "file_text": ""},
                     limit=sys.maxsize)
    except MemoryCommandError as exc:
        raise ValidationFailed(str(exc), fields={"path": str(exc)}) from None


def _session_query(request, reach: MemoryReach) -> int | None:
    raw = request.query_params.get("session")
    if raw is None:
        return None
    session_id = id_from_text(raw)
    if session_id is None or session_id == 0:
        raise ValidationFailed("The session is not valid.", fields={"session": "must be a session id"})
    return memory_session_for_user(reach=reach, session_id=session_id, user=request.user)


@extend_schema(methods=["GET"], responses={200: MemoryOut})
@extend_schema(methods=["PUT"], request=MemoryUseIn, responses={
    200: MemoryOut, 400: OpenApiResponse(description="`invalid`: `use_memory` not true/false, an unknown field, "
                                                      "or a `session` not yours with this agent; nothing changes")})
@extend_schema(methods=["DELETE"], request=None, parameters=[SESSION_PARAMETER], responses={
    204: OpenApiResponse(description="Forgotten: every file is gone (the record of the change says how much).")})
@api_view(["GET", "PUT", "DELETE"])
def agent_memory(request, agent_id: int):
    """Your memory for this agent: GET its files, size, bound and recent changes; PUT
    `{use_memory}` ("don't use memory for me" is false); DELETE forgets everything."""
    reach = memory_reach_for_user(agent_id=agent_id, user=request.user)
    if request.method == "PUT":
        data = MemoryUseIn(data=request.data)
        data.is_valid(raise_exception=True)
        session_id = memory_session_for_user(reach=reach, session_id=data.validated_data.get("session"),
                                             user=request.user)
        memory_use_set(owner=reach.owner, use=data.validated_data["use_memory"], session_id=session_id)
    elif request.method == "DELETE":
        memory_forget(owner=reach.owner, session_id=_session_query(request, reach))
        return Response(status=status.HTTP_204_NO_CONTENT)
    return Response(MemoryOut(_overview(reach)).data)


@extend_schema(methods=["GET"], operation_id="api_v1_agents_memory_file_retrieve", parameters=[PATH_PARAMETER],
               responses={200: MemoryFileOut})
@extend_schema(methods=["PUT"], operation_id="api_v1_agents_memory_file_update", parameters=[PATH_PARAMETER],
               request=MemoryFileIn, responses={
    200: MemoryFileOut,
    400: OpenApiResponse(description="`invalid`: a path outside /memories, past the bound (the message says how "
                                     "much room is left), content not a string, an unknown field; nothing changes"),
    409: OpenApiResponse(description="`memory_off`: the agent's memory is off; nothing is saved")})
@extend_schema(methods=["DELETE"], operation_id="api_v1_agents_memory_file_destroy",
               parameters=[PATH_PARAMETER, SESSION_PARAMETER], request=None, responses={
    204: OpenApiResponse(description="Deleted: the file, or every file in the directory."),
    404: OpenApiResponse(description="No such file or directory in your memory.")})
@api_view(["GET", "PUT", "DELETE"])
def agent_memory_file(request, agent_id: int, path: str):
    """One file of your memory for this agent: GET it, PUT `{content}` writes it whole,
    DELETE removes it (or a directory of files)."""
    reach = memory_reach_for_user(agent_id=agent_id, user=request.user)
    name = _path(path, directory_ok=request.method == "DELETE")
    if request.method == "PUT":
        data = MemoryFileIn(data=request.data)
        data.is_valid(raise_exception=True)
        session_id = memory_session_for_user(reach=reach, session_id=data.validated_data.get("session"),
                                             user=request.user)
        if not reach.agent_memory:
            raise Conflict(MEMORY_OFF, code="memory_off")
        _path_free(reach, name)
        try:
            memory_file_put(owner=reach.owner, path=name, content=data.validated_data["content"],
                            session_id=session_id)
        except MemoryCommandError as exc:
            raise ValidationFailed(str(exc), fields={"content": str(exc)}) from None
    elif request.method == "DELETE":
        session_id = _session_query(request, reach)
        try:
            memory_file_delete(owner=reach.owner, path=name, session_id=session_id)
        except MemoryCommandError as exc:
            raise NotFound(str(exc)) from None
        return Response(status=status.HTTP_204_NO_CONTENT)
    found = next((file for file in memory_overview(owner=reach.owner)["files"] if file["path"] == name), None)
    if found is None:
        raise NotFound(f"{name} is not in your memory.")
    return Response(MemoryFileOut(found).data)

