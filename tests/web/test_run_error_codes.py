"""Run error codes have one home (issue #46, LOOP-3): ``sessions.run_errors.RunErrorCode``.

Every code carries the words the chat shows (a title, and a hint saying what to do next)
and whether resuming may help; every code the product can give a run is a member — read
from the source with ``ast``, so a new ``RunStopped("…")`` or provider error class
without words fails here — and the chat is handed the table instead of keeping its own.
"""
from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator

import pytest

from models_catalog import errors as provider_errors
from sessions.run_errors import RunError, RunErrorCode
from tests.conftest import REPO
from web.errors import error_table

PRODUCT = ("context", "core", "models_catalog", "toolservers", "agents", "sessions", "runloop", "tools", "web",
           "agentloom")
ENUM_VALUES = {code.value for code in RunErrorCode}


def product_trees() -> Iterator[tuple[str, ast.AST]]:
    for package in PRODUCT:
        for path in sorted((REPO / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield str(path.relative_to(REPO)), ast.parse(path.read_text(encoding="utf-8"))


def provider_error_classes() -> set[str]:
    """Names of the provider boundary's error classes (``models_catalog.errors``)."""
    return {name for name, value in vars(provider_errors).items()
            if isinstance(value, type) and issubclass(value, provider_errors.ProviderError)}


def codes_the_product_gives() -> dict[str, str]:
    """code → where: a provider error class's ``default_code``, a ``code="…"`` given to a
    provider error, and the code of a ``RunError(…)``/``RunStopped(…)`` written as a literal."""
    classes = provider_error_classes()
    found: dict[str, str] = {}
    for where, tree in product_trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name in classes:
                for statement in node.body:
                    if (isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant)
                            and any(isinstance(t, ast.Name) and t.id == "default_code" for t in statement.targets)):
                        found[statement.value.value] = f"{where}: {node.name}"
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else \
                node.func.attr if isinstance(node.func, ast.Attribute) else ""
            if name in classes:
                for keyword in node.keywords:
                    if keyword.arg == "code" and isinstance(keyword.value, ast.Constant):
                        found[keyword.value.value] = f"{where}:{node.lineno}"
            if name in ("RunError", "RunStopped") and node.args and isinstance(node.args[0], ast.Constant):
                found[node.args[0].value] = f"{where}:{node.lineno}"
    return found


def test_every_code_has_words_and_says_whether_resuming_helps():
    assert len(RunErrorCode.__members__) == len(RunErrorCode)  # no two members share a code
    for code in RunErrorCode:
        assert code.value and re.fullmatch(r"[a-z_]+", code.value)
        assert code.title.strip() and code.title[0].isupper(), code
        assert code.hint.strip() and code.hint.rstrip()[-1] in ".!", code
        assert isinstance(code.retryable, bool)
        assert code.at_once.strip()


def test_every_code_the_product_can_give_a_run_is_in_the_enum():
    given = codes_the_product_gives()
    assert len(given) >= 15, given  # the scan sees the provider classes and the loop's codes
    assert {code: where for code, where in given.items() if code not in ENUM_VALUES} == {}


def test_the_code_always_comes_from_the_enum_in_the_run_loop():
    """``RunStopped(RunErrorCode.X, …)``: the run loop names no code as a bare string."""
    literal = [f"{where}:{node.lineno}" for where, tree in product_trees() for node in ast.walk(tree)
               if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
               and node.func.id in ("RunError", "RunStopped") and node.args and isinstance(node.args[0], ast.Constant)]
    assert literal == []
    named = {node.attr for _, tree in product_trees() for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "RunErrorCode"
             and node.attr.isupper()}
    assert named - set(RunErrorCode.__members__) == set()


@pytest.mark.parametrize("cls", sorted(provider_error_classes()))
def test_a_provider_errors_code_is_resumable_exactly_when_the_error_is_transient(cls):
    error = getattr(provider_errors, cls)("The provider said no.")
    code = RunErrorCode(error.code)
    assert code.retryable is error.transient
    assert RunError.from_provider(error) == RunError(code.value, "The provider said no.", retryable=code.retryable)


@pytest.mark.django_db
def test_the_chat_page_carries_every_codes_words_and_its_script_none(client_for, alice, make_session):
    page = client_for(alice).get(f"/sessions/{make_session(alice).pk}/").content.decode()
    config = json.loads(re.search(r'<script id="chat-config" type="application/json">(.*?)</script>', page,
                                  re.S).group(1))
    assert config["errors"] == json.loads(json.dumps(error_table()))
    assert {code: words["title"] for code, words in config["errors"]["runs"].items()} == \
        {code.value: code.title for code in RunErrorCode}
    script = (REPO / "static/web/chat.js").read_text(encoding="utf-8")
    templates = "".join(path.read_text(encoding="utf-8") for path in (REPO / "templates/web").glob("*.html"))
    for code in RunErrorCode:
        for quoted in (f'"{code.value}"', f"'{code.value}'"):
            assert quoted not in script and quoted not in templates, code
