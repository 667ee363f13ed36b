"""``docs/requirements.md`` against the repository: the table of requirement ids stays true.

- Every id the repository cites (source, tests, templates, static files, docs, README,
  build files) has a row, and no id has two; rows run by prefix, then number.
- Every module and test a row lists exists, still cites the row's id, and sits in its
  column (tests under ``tests/``, modules outside it and outside the docs).
- A row marked *not cited yet* is cited nowhere, and every other row is cited somewhere.
- A row shows "—" for tests (or modules) only when no file of that kind cites its id.

A file cites an id by writing it out (``CTX-8``, ``CTX-21/22``, ``LOOP-1..8``); a test file also
by a test's name that spells it in lower case as one of its words (``test_ctx8_…``).

One pass over the repository's text files reads the citations; the table and this file are
left out of it, and so are virtual environments, hidden folders (``.ci`` excepted),
``var/``, ``node_modules``, ``*.egg-info``, ``context/vocab`` and binary files. Nothing
outside the repository is read: a clone has nothing beside it.
"""
from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import cache

from tests.conftest import REPO

DOC = "docs/requirements.md"
THIS = "tests/foundation/test_requirements_doc.py"
PREFIXES = ("CAT", "CTX", "LOOP", "MEM", "RUN", "TOOL")
UNCITED = "not cited yet"

# An id written out, then optional shorthand second halves: "/22" (a pair) or "..8", "…11",
# "–23" (a range, whose two ends are cited and nothing between).
CITATION = re.compile(rf"\b({'|'.join(PREFIXES)})-(\d+)\b((?:(?:/|\.\.|…|–)\d+\b)*)")
# A test's name cites ids in lower case without the dash, anywhere among its words:
# ``test_ctx8_only_the_newest_screenshot_stays``, ``test_loop3_cat3_a_run_over…``.
TEST_NAME = re.compile(r"\bdef (test_\w+)")
TEST_NAME_WORD = re.compile(rf"({'|'.join(prefix.lower() for prefix in PREFIXES)})(\d+)")
ROW = re.compile(r"^\|\s*([A-Z]+-\d+)\s*\|")
NONE = "—"  # a cell of the table: no file of that kind cites the id
SKIPPED_DIRS = frozenset({"var", "node_modules", "__pycache__"})
SKIPPED_PATHS = frozenset({"context/vocab", DOC, THIS})


def citations_in(text: str) -> set[str]:
    """The requirement ids ``text`` cites."""
    found: set[str] = set()
    for match in CITATION.finditer(text):
        prefix = match.group(1)
        for number in (match.group(2), *re.findall(r"\d+", match.group(3))):
            found.add(f"{prefix}-{int(number)}")
    return found


def citations_in_test_names(text: str) -> set[str]:
    """The requirement ids the names of the tests defined in ``text`` cite."""
    found: set[str] = set()
    for name in TEST_NAME.findall(text):
        for word in name.split("_")[1:]:
            if match := TEST_NAME_WORD.fullmatch(word):
                found.add(f"{match.group(1).upper()}-{int(match.group(2))}")
    return found


def _test_file(path: str) -> bool:
    return path.startswith("tests/")


def _module_file(path: str) -> bool:
    return not path.startswith(("tests/", "docs/")) and not path.endswith(".md")


def _skipped_dir(name: str, path: str) -> bool:
    return ((name.startswith(".") and name != ".ci") or name in SKIPPED_DIRS
            or name.endswith(".egg-info") or path in SKIPPED_PATHS)


@cache
def citations() -> dict[str, frozenset[str]]:
    """Requirement id -> the repository's files (relative POSIX paths) that cite it."""
    cited: dict[str, set[str]] = defaultdict(set)
    for root, dirs, files in os.walk(REPO):
        base = os.path.relpath(root, REPO).replace(os.sep, "/")
        base = "" if base == "." else base + "/"
        dirs[:] = [name for name in dirs if not _skipped_dir(name, base + name)]
        for name in files:
            path = base + name
            if path in SKIPPED_PATHS:
                continue
            data = (REPO / path).read_bytes()
            if b"\0" in data:
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            found = citations_in(text)
            if _test_file(path) and path.endswith(".py"):
                found |= citations_in_test_names(text)
            for requirement in found:
                cited[requirement].add(path)
    return {requirement: frozenset(paths) for requirement, paths in cited.items()}


@dataclass(frozen=True)
class Row:
    requirement: str
    line: int
    cells: tuple[str, ...]

    @property
    def modules(self) -> list[str]:
        return re.findall(r"`([^`]+)`", self.cells[2]) if len(self.cells) == 4 else []

    @property
    def tests(self) -> list[str]:
        return re.findall(r"`([^`]+)`", self.cells[3]) if len(self.cells) == 4 else []

    @property
    def uncited(self) -> bool:
        return any(UNCITED in cell for cell in self.cells[2:])


@cache
def rows() -> tuple[Row, ...]:
    found = []
    for number, line in enumerate((REPO / DOC).read_text(encoding="utf-8").splitlines(), start=1):
        if match := ROW.match(line):
            cells = tuple(cell.strip() for cell in line.strip().strip("|").split("|"))
            found.append(Row(match.group(1), number, cells))
    return tuple(found)


def _order(requirement: str) -> tuple[str, int]:
    prefix, number = requirement.split("-")
    return prefix, int(number)


def _where(requirement: str) -> str:
    paths = sorted(citations().get(requirement, ()))
    return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def test_it_reads_written_ids_pairs_and_range_ends_and_nothing_else():
    assert citations_in("CTX-7 and CTX-21/22; LOOP-1..8, CTX-1…11, CTX-20–23 (RUN-11)") == {
        "CTX-7", "CTX-21", "CTX-22", "LOOP-1", "LOOP-8", "CTX-1", "CTX-11", "CTX-20", "CTX-23", "RUN-11"}
    assert citations_in("UTF-8, XCTX-3, CTX-3a, SPEC-2, ctx-4, CTX-") == set()


def test_a_tests_name_cites_the_ids_it_spells_in_lower_case_as_whole_words():
    text = ("def test_ctx8_only_the_newest_screenshot_stays():\n"
            "async def test_loop3_cat3_a_run_learns_its_window():\n"
            "def test_ctx42_cut_to_fit_with_the_ctx7_marker():\n"
            "def test_loop3_429_honours_retry_after():\n"
            "def helper_ctx9_not_a_test():\n"
            "def test_ctx10x_run_twice_rerun2_and_runner5_tool():\n")
    assert citations_in_test_names(text) == {"CTX-8", "LOOP-3", "CAT-3", "CTX-42", "CTX-7"}


def test_the_table_has_a_row_of_four_cells_for_every_prefix():
    assert {row.requirement.split("-")[0] for row in rows()} == set(PREFIXES)
    malformed = [f"line {row.line}: {row.requirement}" for row in rows()
                 if len(row.cells) != 4 or row.requirement.split("-")[0] not in PREFIXES]
    assert not malformed, f"rows without exactly four cells or with an unknown prefix in {DOC}: {malformed}"


def test_every_cited_id_has_a_row():
    listed = {row.requirement for row in rows()}
    missing = sorted(set(citations()) - listed, key=_order)
    assert not missing, f"ids cited but missing from {DOC}: " + "; ".join(
        f"{requirement} (cited in {_where(requirement)})" for requirement in missing)


def test_no_id_has_two_rows():
    twice = sorted((rid for rid, count in Counter(row.requirement for row in rows()).items() if count > 1),
                   key=_order)
    assert not twice, f"ids with more than one row in {DOC}: {twice}"


def test_rows_run_by_prefix_then_number():
    listed = [row.requirement for row in rows()]
    assert listed == sorted(listed, key=_order), (
        f"rows of {DOC} out of order; expected {sorted(listed, key=_order)}")


def test_every_listed_path_exists():
    absent = [f"{row.requirement}: {path}" for row in rows() for path in (*row.modules, *row.tests)
              if not (REPO / path).is_file()]
    assert not absent, f"paths listed in {DOC} that do not exist: {absent}"


def test_every_listed_path_still_cites_its_id():
    cited = citations()
    stale = [f"{row.requirement}: {path}" for row in rows() for path in (*row.modules, *row.tests)
             if path not in cited.get(row.requirement, frozenset())]
    assert not stale, f"paths listed in {DOC} that no longer cite their id: {stale}"


def test_modules_and_tests_sit_in_their_own_columns():
    misplaced = [f"{row.requirement}: module {path}" for row in rows() for path in row.modules
                 if path.startswith(("tests/", "docs/")) or path.endswith(".md")]
    misplaced += [f"{row.requirement}: test {path}" for row in rows() for path in row.tests
                  if not path.startswith("tests/")]
    assert not misplaced, f"paths in the wrong column of {DOC}: {misplaced}"


def test_a_row_marked_not_cited_yet_is_cited_nowhere_and_every_other_row_is_cited():
    cited = citations()
    now_cited = [f"{row.requirement} (cited in {_where(row.requirement)})" for row in rows()
                 if row.uncited and row.requirement in cited]
    assert not now_cited, f"rows of {DOC} marked '{UNCITED}' that are cited now; list their carriers: {now_cited}"
    never_cited = [row.requirement for row in rows() if not row.uncited and row.requirement not in cited]
    assert not never_cited, f"rows of {DOC} that nothing cites any more; mark them '{UNCITED}': {never_cited}"


def test_a_dash_stands_only_where_no_file_of_its_kind_cites_the_id():
    """A row showing "—" for tests while a test cites the id (a test's name included) hides
    where the rule is checked; the same for modules."""
    cited = citations()
    hidden = []
    for row in rows():
        if len(row.cells) != 4 or row.uncited:
            continue
        carriers = sorted(cited.get(row.requirement, ()))
        for column, kind, of_kind in ((2, "modules", _module_file), (3, "tests", _test_file)):
            found = [path for path in carriers if of_kind(path)]
            if row.cells[column] == NONE and found:
                hidden.append(f"{row.requirement} ({kind}: {', '.join(found[:4])})")
    assert not hidden, f"rows of {DOC} showing '{NONE}' where files cite the id; list them: {hidden}"
