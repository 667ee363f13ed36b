"""The shape of the code, read from its imports with ``ast`` (docs/architecture.md).

- No import cycle between modules. Function-local imports count, and so do imports under
  ``if TYPE_CHECKING:``: a cycle hidden from the interpreter is still a cycle to a reader.
- No private name (``_name``) imported from another module.
- The floors: ``context`` < common (errors, API fields, parsers, upload bounds and client addresses,
  accounts, spaces, crypto, env, the database pool and row inserts, the console's admin mixins, the
  bound on slow work, child processes and the image check, the redactor of known secrets) <
  ``models_catalog`` and ``toolservers`` < ``agents`` < ``sessions`` and ``memory`` < the run loop, tools, web and
  the project's wiring. A module never imports from a floor above its own.
- No module over 400 lines.

Implicit imports of a parent package (``a.b`` runs ``a/__init__``) are not edges: a
package's ``__init__`` is judged by what it imports itself.
"""
from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO

PACKAGES = ("context", "core", "models_catalog", "toolservers", "agents", "sessions", "memory", "runloop", "tools",
            "web", "agentloom")
MAX_LINES = 400

# (floor, packages): each package sits on exactly one floor (docs/architecture.md).
FLOORS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (0, ("context",)),
    (1, ("core",)),
    (2, ("models_catalog", "toolservers")),
    (3, ("agents",)),
    (4, ("sessions", "memory")),
    (5, ("runloop", "tools", "web", "agentloom")),
)
FLOOR_NAMES = {0: "context", 1: "core", 2: "models_catalog, tool servers", 3: "agents", 4: "sessions",
               5: "run loop, tools, web, wiring"}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    names: tuple[str, ...]


def modules_in(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """Every module of ``packages`` under ``root`` (migrations left out: Django writes them)."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def import_edges(modules: dict[str, Path]) -> list[Edge]:
    """Every import between the given modules, wherever it sits in the file."""
    edges: list[Edge] = []
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = _resolve(alias.name, modules)
                    if target and target != name:
                        edges.append(Edge(name, target, node.lineno, ()))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                for alias in node.names:
                    # ``from pkg import module`` imports the module; ``from mod import name`` the module.
                    target = _resolve(f"{source}.{alias.name}", modules) or _resolve(source, modules)
                    if target and target != name:
                        edges.append(Edge(name, target, node.lineno, (alias.name,)))
    return edges


def import_cycles(modules: Iterable[str], edges: Iterable[Edge]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iteratively)."""
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for edge in edges:
        graph[edge.source].add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    cycles.append(sorted(group))
    return cycles


def floor_of(module: str) -> int:
    for floor, prefixes in FLOORS:
        if any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes):
            return floor
    raise AssertionError(f"{module} is on no floor: add it to FLOORS")


def upward_imports(edges: Iterable[Edge]) -> list[str]:
    return [f"{e.source}:{e.line} imports {e.target} ({FLOOR_NAMES[floor_of(e.target)]} is above "
            f"{FLOOR_NAMES[floor_of(e.source)]})" for e in edges if floor_of(e.target) > floor_of(e.source)]


def private_imports(edges: Iterable[Edge]) -> list[str]:
    return [f"{e.source}:{e.line} imports {name} from {e.target}" for e in edges for name in e.names
            if name.startswith("_") and not name.startswith("__")]


def oversized(modules: dict[str, Path], limit: int = MAX_LINES) -> list[str]:
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules.items()}
    return [f"{name}: {lines} lines" for name, lines in sorted(sizes.items()) if lines > limit]


# --- the project ----------------------------------------------------------------------------

MODULES = modules_in(REPO)
EDGES = import_edges(MODULES)


def test_no_two_modules_import_each_other_even_through_function_local_imports():
    assert import_cycles(MODULES, EDGES) == []


def test_no_module_imports_a_private_name_of_another():
    assert private_imports(EDGES) == []


def test_every_import_points_down_the_floors():
    assert upward_imports(EDGES) == []


def test_no_module_is_longer_than_one_person_can_hold_in_their_head():
    assert oversized(MODULES) == []


def test_the_context_engine_imports_nothing_from_django():
    offenders = []
    for name, path in MODULES.items():
        if floor_of(name) != 0:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            roots = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            offenders += [f"{name}:{node.lineno} {root}" for root in roots
                          if root.split(".")[0] in {"django", "rest_framework", "celery"}]
    assert offenders == []


# --- the checks themselves find what they look for -------------------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    for relative, text in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return modules_in(tmp_path, packages=("context", "sessions", "agentloom"))


def test_a_cycle_through_a_function_local_import_is_found(tmp_path):
    modules = _tree(tmp_path, {
        "agentloom/__init__.py": "",
        "agentloom/a.py": "from agentloom.b import thing\n",
        "agentloom/b.py": "def thing():\n    from agentloom import a\n    return a\n",
        "agentloom/c.py": "from agentloom.a import thing\n",
    })
    assert import_cycles(modules, import_edges(modules)) == [["agentloom.a", "agentloom.b"]]


def test_a_relative_private_import_and_an_upward_import_are_found(tmp_path):
    modules = _tree(tmp_path, {
        "context/__init__.py": "",
        "context/engine.py": "from sessions.models import Run\n",
        "sessions/__init__.py": "",
        "sessions/models.py": "class Run: ...\n",
        "sessions/services.py": "from .models import _hidden\n",
    })
    edges = import_edges(modules)
    assert private_imports(edges) == ["sessions.services:1 imports _hidden from sessions.models"]
    assert upward_imports(edges) == ["context.engine:1 imports sessions.models (sessions is above context)"]


def test_a_long_module_is_named(tmp_path):
    modules = _tree(tmp_path, {"context/__init__.py": "", "context/long.py": "x = 1\n" * (MAX_LINES + 1)})
    assert oversized(modules) == [f"context.long: {MAX_LINES + 1} lines"]


def test_no_script_or_benchmark_shadows_a_package_of_the_product():
    # A script runs with its own folder first on sys.path: a benchmarks/tools.py made
    # `import tools` find the benchmark, and the load run found no built-in tools.
    for folder in ("benchmarks", "scripts"):
        shadows = sorted(path.name for path in (REPO / folder).glob("*.py") if path.stem in PACKAGES)
        assert not shadows, f"{folder}/ has modules named like the product's packages: {shadows}"
