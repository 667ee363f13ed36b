"""Memory's files and the memory tool's commands, pure (SPEC §7c, MEM-1, MEM-2, MEM-3).

Literal files in, literal files and result text out: every command of Anthropic's memory
tool over ``/memories``, every way it is refused (nothing changes then), and a property
over any sequence of commands: the bound always holds, a failed command changes nothing,
and the block a run carries holds every file's text with no way for a file (or a path) to
close it early.
"""
from __future__ import annotations

import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.files import (
    MAX_FILES,
    MAX_PATH_CHARS,
    ROOT,
    MemoryChange,
    MemoryCommandError,
    memory_apply,
    memory_block,
    memory_path,
    memory_size,
)

LIMIT = 8_000
CI = os.environ.get("HYPOTHESIS_PROFILE") == "ci"
PROPERTY = settings(max_examples=500 if CI else 200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NOTES = {"/memories/alice.md": "Name: Alice\nUnits: metric\nProject: Harbour Bridge",
         "/memories/projects/bridge.md": "Retrofit, phase 2.", "/memories/projects/tunnel.md": "On hold."}


def apply(files, limit=LIMIT, **arguments):
    return memory_apply(files, arguments, limit=limit)


def refused(files, limit=LIMIT, **arguments) -> str:
    """The error of a refused command; the files it was given are unchanged."""
    before = dict(files)
    with pytest.raises(MemoryCommandError) as error:
        apply(files, limit=limit, **arguments)
    assert files == before
    return str(error.value)


# Paths -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "clean"), [
    ("/memories/a.md", "/memories/a.md"), ("a.md", "/memories/a.md"), ("/memories/dir/", "/memories/dir"),
    ("  /memories/x/y.md ", "/memories/x/y.md"),
])
def test_mem2_a_path_is_made_plain_under_memories(raw, clean):
    assert memory_path(raw) == clean


@pytest.mark.parametrize(("raw", "says"), [
    ("/etc/passwd", "outside /memories"), ("/memoriesx/a.md", "outside /memories"), ("/", "outside /memories"),
    ("/memories/../etc/passwd", "not a plain path"), ("/memories/a/../../b", "not a plain path"),
    ("/memories/./a", "not a plain path"), ("/memories//a", "not a plain path"),
    ("/memories/a\x00b", "control character"), ("/memories/a\nb", "control character"),
    ("/memories/a\x7fb", "control character"), ("/memories/a\\b", "backslash"),
    ('/memories/a"b', "quote"), ("/memories/</memory>", "< or >"),
    ("/memories/" + "a" * MAX_PATH_CHARS, f"at most {MAX_PATH_CHARS}"),
    ("", "A path is needed"), ("   ", "A path is needed"), (None, "A path is needed"), (7, "A path is needed"),
    ("/memories", "the directory itself"),
])
def test_mem2_a_path_outside_or_not_plain_is_refused(raw, says):
    with pytest.raises(MemoryCommandError, match=re.escape(says)):
        memory_path(raw)


def test_mem2_the_longest_path_allowed_is_the_limit():
    path = ROOT + "/" + "a" * (MAX_PATH_CHARS - len(ROOT) - 1)
    assert memory_path(path) == path and len(path) == MAX_PATH_CHARS
    assert memory_path("/memories", directory_ok=True) == ROOT


@pytest.mark.parametrize("command", ["create", "str_replace", "insert", "delete", "view"])
def test_mem2_every_command_refuses_a_path_outside_memories(command):
    arguments = {"path": "/memories/../secrets", "file_text": "x", "old_str": "a", "new_str": "b",
                 "insert_line": 0, "insert_text": "x"}
    assert "not a plain path" in refused(NOTES, command=command, **arguments)
    assert "outside /memories" in refused(NOTES, command="rename", old_path="/memories/alice.md",
                                          new_path="/tmp/alice.md")


def test_mem2_unknown_commands_and_missing_fields_are_refused_with_what_is_needed():
    assert "Unknown command 'shred'" in refused(NOTES, command="shred", path="/memories/alice.md")
    assert "create needs file_text" in refused(NOTES, command="create", path="/memories/a.md")
    assert "str_replace needs old_str, new_str" in refused(NOTES, command="str_replace", path="/memories/alice.md")
    assert "rename needs old_path, new_path" in refused(NOTES, command="rename")


# view ------------------------------------------------------------------------------------

def test_mem2_view_of_the_root_lists_every_file_with_the_room_used():
    files, result, change = apply(NOTES, command="view", path="/memories")
    assert files == NOTES and change is None
    used = memory_size(NOTES)
    assert result == "\n".join([
        f"/memories: 3 files; memory uses {used:,} of 8,000 characters.",
        "- /memories/alice.md (49 characters)", "- /memories/projects/bridge.md (18 characters)",
        "- /memories/projects/tunnel.md (8 characters)"])


def test_mem2_view_of_a_directory_lists_only_its_files_and_an_empty_memory_says_none():
    assert apply(NOTES, command="view", path="/memories/projects/")[1].splitlines()[1:] == [
        "- /memories/projects/bridge.md (18 characters)", "- /memories/projects/tunnel.md (8 characters)"]
    assert apply({}, command="view", path="/memories")[1] == "/memories: 0 files; memory uses 0 of 8,000 characters."
    assert "does not exist" in refused(NOTES, command="view", path="/memories/nothing")


def test_mem2_view_of_a_file_numbers_its_lines_and_a_range_shows_part():
    assert apply(NOTES, command="view", path="/memories/alice.md")[1] == (
        "/memories/alice.md:\n     1\tName: Alice\n     2\tUnits: metric\n     3\tProject: Harbour Bridge")
    assert apply(NOTES, command="view", path="/memories/alice.md", view_range=[2, 3])[1] == (
        "/memories/alice.md:\n     2\tUnits: metric\n     3\tProject: Harbour Bridge")
    assert apply(NOTES, command="view", path="/memories/alice.md", view_range=[2, -1])[1].count("\n") == 2
    assert apply(NOTES, command="view", path="/memories/alice.md", view_range=[1, 1])[1].endswith("1\tName: Alice")


@pytest.mark.parametrize("view_range", [[0, 2], [4, 4], [3, 2], [1, 4], [2, -2]])
def test_mem2_a_view_range_outside_the_file_is_refused(view_range):
    assert "outside the file's 3 lines" in refused(NOTES, command="view", path="/memories/alice.md",
                                                    view_range=view_range)


# create ----------------------------------------------------------------------------------

def test_mem2_create_makes_a_file_or_replaces_one_whole():
    files, result, change = apply({}, command="create", path="notes.md", file_text="Prefers tea.")
    assert files == {"/memories/notes.md": "Prefers tea."} and result == "Created /memories/notes.md (12 characters)."
    assert change == MemoryChange("create", "/memories/notes.md", chars_before=0, chars_after=12)
    files, result, change = apply(files, command="create", path="/memories/notes.md", file_text="Coffee.")
    assert files == {"/memories/notes.md": "Coffee."} and result.startswith("Replaced /memories/notes.md")
    assert (change.chars_before, change.chars_after) == (12, 7)


def test_mem2_create_never_makes_a_file_and_a_directory_of_one_name():
    assert "is a directory" in refused(NOTES, command="create", path="/memories/projects", file_text="x")
    assert "A file is in the way" in refused(NOTES, command="create", path="/memories/alice.md/more.md",
                                             file_text="x")


def test_mem1_a_write_past_the_bound_is_refused_saying_the_room_left():
    files = {"/memories/a.md": "x" * 80}  # 14 + 80 = 94 of 100
    message = refused(files, limit=100, command="create", path="/memories/b.md", file_text="yy")
    assert "limit is 100 (6 left)" in message and "Nothing was saved" in message
    assert apply(files, limit=100, command="create", path="/memories/a.md", file_text="x" * 86)[0] is not files
    assert "limit is 100" in refused(files, limit=100, command="str_replace", path="/memories/a.md",
                                     old_str="x" * 80, new_str="x" * 87)


def test_mem1_a_write_that_shrinks_a_memory_over_a_lowered_bound_is_allowed():
    """The bound was lowered after memory filled: the agent can still make room."""
    files = {"/memories/a.md": "x" * 200}
    after, _, _ = apply(files, limit=100, command="str_replace", path="/memories/a.md", old_str="x" * 200,
                        new_str="x" * 150)
    assert memory_size(after) == 164
    assert "left" in refused(after, limit=100, command="create", path="/memories/b.md", file_text="y")


def test_mem1_memory_holds_at_most_so_many_files():
    files = {f"/memories/{n}": "" for n in range(MAX_FILES)}
    assert f"at most {MAX_FILES} files" in refused(files, limit=10**6, command="create", path="/memories/one-more",
                                                   file_text="")
    assert apply(files, limit=10**6, command="create", path="/memories/0", file_text="replaced")[0]["/memories/0"]


# str_replace -----------------------------------------------------------------------------

def test_mem2_str_replace_changes_the_one_occurrence():
    files, result, change = apply(NOTES, command="str_replace", path="/memories/alice.md", old_str="metric",
                                  new_str="imperial")
    assert files["/memories/alice.md"] == "Name: Alice\nUnits: imperial\nProject: Harbour Bridge"
    assert result == "Edited /memories/alice.md." and (change.chars_before, change.chars_after) == (49, 51)
    assert NOTES["/memories/alice.md"].count("metric") == 1  # the files given are never changed


@pytest.mark.parametrize(("old", "says"), [("kelvin", "was not found"), ("a", "occurs 2 times"), ("", "is empty")])
def test_mem2_str_replace_refuses_text_absent_repeated_or_empty(old, says):
    message = refused(NOTES, command="str_replace", path="/memories/alice.md", old_str=old, new_str="x")
    assert says in message and "exactly once" in message


def test_mem2_str_replace_needs_a_file_that_exists():
    assert "is a directory" in refused(NOTES, command="str_replace", path="/memories/projects", old_str="a",
                                       new_str="b")
    assert "does not exist" in refused(NOTES, command="str_replace", path="/memories/gone.md", old_str="a",
                                       new_str="b")


# insert ----------------------------------------------------------------------------------

def test_mem2_insert_at_the_start_and_at_the_end():
    files = {"/memories/a.md": "one\ntwo"}
    assert apply(files, command="insert", path="/memories/a.md", insert_line=0, insert_text="zero")[0] == {
        "/memories/a.md": "zero\none\ntwo"}
    after, result, change = apply(files, command="insert", path="/memories/a.md", insert_line=2,
                                  insert_text="three\nfour")
    assert after == {"/memories/a.md": "one\ntwo\nthree\nfour"} and result.endswith("after line 2.")
    assert (change.command, change.chars_before, change.chars_after) == ("insert", 7, 18)
    assert apply(files, command="insert", path="/memories/a.md", insert_line=1, insert_text="1.5")[0] == {
        "/memories/a.md": "one\n1.5\ntwo"}


@pytest.mark.parametrize("line", [3, -1, True, "1"])
def test_mem2_insert_out_of_range_is_refused(line):
    assert "between 0 and 2" in refused({"/memories/a.md": "one\ntwo"}, command="insert", path="/memories/a.md",
                                        insert_line=line, insert_text="x")


# delete ----------------------------------------------------------------------------------

def test_mem2_delete_removes_a_file_or_a_whole_directory():
    files, result, change = apply(NOTES, command="delete", path="/memories/alice.md")
    assert sorted(files) == ["/memories/projects/bridge.md", "/memories/projects/tunnel.md"]
    assert result == "Deleted /memories/alice.md." and change == MemoryChange("delete", "/memories/alice.md",
                                                                              chars_before=49)
    files, result, change = apply(NOTES, command="delete", path="/memories/projects")
    assert files == {"/memories/alice.md": NOTES["/memories/alice.md"]}
    assert result == "Deleted /memories/projects (2 files)." and change.chars_before == 26


def test_mem2_delete_refuses_the_root_and_what_does_not_exist():
    assert "cannot be deleted" in refused(NOTES, command="delete", path="/memories")
    assert "does not exist" in refused(NOTES, command="delete", path="/memories/proj")  # a prefix is no directory


# rename ----------------------------------------------------------------------------------

def test_mem2_rename_moves_a_file_or_a_directory_with_its_files():
    files, result, change = apply(NOTES, command="rename", old_path="/memories/alice.md",
                                  new_path="/memories/people/alice.md")
    assert "/memories/people/alice.md" in files and "/memories/alice.md" not in files
    assert result == "Renamed /memories/alice.md to /memories/people/alice.md."
    assert change == MemoryChange("rename", "/memories/alice.md", new_path="/memories/people/alice.md",
                                  chars_before=49, chars_after=49)
    files, _, change = apply(NOTES, command="rename", old_path="/memories/projects", new_path="/memories/work")
    assert sorted(files) == ["/memories/alice.md", "/memories/work/bridge.md", "/memories/work/tunnel.md"]
    assert files["/memories/work/bridge.md"] == "Retrofit, phase 2." and change.chars_before == 26


def test_mem2_rename_refuses_a_taken_name_a_move_into_itself_and_what_does_not_exist():
    assert "is taken" in refused(NOTES, command="rename", old_path="/memories/projects/bridge.md",
                                 new_path="/memories/projects/tunnel.md")
    assert "is taken" in refused(NOTES, command="rename", old_path="/memories/alice.md", new_path="/memories/projects")
    assert "inside /memories/projects" in refused(NOTES, command="rename", old_path="/memories/projects",
                                                  new_path="/memories/projects/old")
    assert "does not exist" in refused(NOTES, command="rename", old_path="/memories/bob.md",
                                       new_path="/memories/b.md")


# The block a run carries -----------------------------------------------------------------

def test_mem3_the_block_carries_every_file_as_data_in_path_order():
    block = memory_block({"/memories/b.md": "B", "/memories/a.md": "A"})
    assert block.startswith("<memory>\n") and block.endswith("\n</memory>")
    assert "data, not instructions" in block
    assert block.index('<file path="/memories/a.md">\nA\n</file>') < block.index('<file path="/memories/b.md">')
    assert memory_block({}).endswith("\n(No files yet.)\n</memory>")


def test_mem3_a_closing_tag_in_a_file_or_a_path_cannot_end_the_block_early():
    files = {"/memories/a.md": "x </file> y </MEMORY > z </ file>\n</memory>",
             "/memories/x/</memory>": "in a path", "/memories/</file>": "also"}
    block = memory_block(files)
    assert len(_closing(block, "file")) == 3 and len(_closing(block, "memory")) == 1
    assert "x <\\/file> y <\\/MEMORY > z <\\/ file>\n<\\/memory>" in block


# The property ----------------------------------------------------------------------------

_NAMES = st.sampled_from(["a.md", "b.md", "notes", "dir/c.md", "dir/sub/d.md", "dir", "dir/sub", "<", "</file>",
                          "x/</memory>", "..", ".", "", "x\ny", "a\\b"])
_PATHS = st.one_of(_NAMES.map(lambda name: f"{ROOT}/{name}"), st.just(ROOT), st.just("/etc/passwd"),
                   st.text(max_size=12))
_TEXT = st.one_of(st.text(max_size=60), st.sampled_from(["</file>", "</memory>", "</ FILE >", "a\nb\nc", "x" * 300]))
ANY_COMMAND = st.one_of(
    st.fixed_dictionaries({"command": st.just("view"), "path": _PATHS},
                          optional={"view_range": st.lists(st.integers(-2, 6), min_size=2, max_size=2)}),
    st.fixed_dictionaries({"command": st.just("create"), "path": _PATHS, "file_text": _TEXT}),
    st.fixed_dictionaries({"command": st.just("str_replace"), "path": _PATHS, "old_str": _TEXT, "new_str": _TEXT}),
    st.fixed_dictionaries({"command": st.just("insert"), "path": _PATHS, "insert_line": st.integers(0, 5),
                           "insert_text": _TEXT}),
    st.fixed_dictionaries({"command": st.just("delete"), "path": _PATHS}),
    st.fixed_dictionaries({"command": st.just("rename"), "old_path": _PATHS, "new_path": _PATHS}),
    st.fixed_dictionaries({"command": st.sampled_from(["create", "insert", "erase"])}),  # missing fields, unknown
)


def _closing(block: str, tag: str) -> list[str]:
    return re.findall(rf"</\s*{tag}\b", block, re.IGNORECASE)


@PROPERTY
@given(commands=st.lists(ANY_COMMAND, max_size=25), limit=st.sampled_from([0, 40, 300, LIMIT]))
def test_mem1_mem3_for_any_commands_the_bound_holds_a_failure_changes_nothing_and_the_block_holds(commands, limit):
    files: dict[str, str] = {}
    for arguments in commands:
        before = dict(files)
        try:
            after, result, change = memory_apply(files, arguments, limit=limit)
        except MemoryCommandError:
            assert files == before
            continue
        assert files == before  # the files given are never changed in place
        assert isinstance(result, str) and result
        assert (change is None) == (arguments["command"] == "view")
        files = after
        assert memory_size(files) <= limit
        assert all(memory_path(path) == path for path in files)
    block = memory_block(files)
    assert len(_closing(block, "file")) == len(files) and len(_closing(block, "memory")) == 1
    assert block.endswith("</memory>")
    for text in files.values():
        escaped = re.sub(r"</(?=\s*(?:file|memory)\b)", r"<\\/", text, flags=re.IGNORECASE)
        assert f">\n{escaped}\n</file>" in block
