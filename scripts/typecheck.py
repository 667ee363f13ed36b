"""The type-check gate of ``make lint``: mypy over the product, against a baseline that only shrinks.

    python scripts/typecheck.py           # check; exit 0 when no file has more errors than its baseline
    python scripts/typecheck.py --shrink  # also rewrite mypy-baseline.txt, when every file has at most its baseline

mypy reads its configuration from pyproject.toml, django-stubs' plugin included (it imports
``agentloom.settings_test`` and opens no database). What runs under the strict flags — the
context engine (``context/``), the model providers (``models_catalog/providers/``) and the step
machine (``runloop/loop.py``, ``runloop/calls.py``) — has no baseline at all, so any error
there fails; every other checked file may keep the errors listed for it in
``mypy-baseline.txt``, and no more. The baseline holds each error once per line, without its line number (code moves;
the count per file is what is compared). When a file has fewer errors than listed, the check
passes and asks for ``--shrink``, so the fixed errors cannot come back unnoticed.

Exit status: 0 the gate passes; 1 a file has more errors than its baseline (they are
printed); 2 mypy itself failed (bad configuration, crash) or the baseline cannot be read.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "mypy-baseline.txt"
# Files under the strict flags (pyproject.toml's overrides): no error, baseline or not.
STRICT = ("context/", "models_catalog/providers/", "runloop/loop.py", "runloop/calls.py")
HEADER = """\
# mypy errors the code still has (scripts/typecheck.py, run by `make lint`), one per line,
# without line numbers. A file may have at most as many as listed here; the strict ones
# (context/, models_catalog/providers/, runloop/loop.py and calls.py) may have none.
# Never add to this file: fix the new error. When a file has fewer, shrink it:
#     .venv/bin/python scripts/typecheck.py --shrink
"""
_ERROR = re.compile(r"^(?P<path>[^:\s][^:]*\.pyi?):(?P<line>\d+): error: (?P<message>.*)$")
_LINE_REFERENCE = re.compile(r"\bon line \d+\b")  # "already defined on line 12": code moves


def errors_text(count: int) -> str:
    return f"{count} error" if count == 1 else f"{count} errors"


def fail(message: str) -> SystemExit:
    """Exit status 2: the check itself could not run."""
    print(f"typecheck: {message}", file=sys.stderr)
    return SystemExit(2)


def mypy_errors() -> list[tuple[str, int, str]]:
    """Every error mypy reports with the project's configuration, as (path, line, message)."""
    command = [sys.executable, "-m", "mypy", "--no-pretty", "--no-color-output", "--no-error-summary",
               "--hide-error-context", "--show-error-codes"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):  # 1 means "errors found"; anything else is mypy failing
        sys.stderr.write(done.stdout + done.stderr)
        raise fail(f"mypy failed (exit status {done.returncode}); see above.")
    errors = []
    for line in done.stdout.splitlines():
        found = _ERROR.match(line)
        if found:
            message = _LINE_REFERENCE.sub("on line N", found["message"].strip())
            errors.append((found["path"].replace("\\", "/"), int(found["line"]), message))
    if done.returncode == 1 and not errors:
        sys.stderr.write(done.stdout + done.stderr)
        raise fail("mypy reported a failure this script cannot read; see above.")
    return errors


def baseline_read() -> list[tuple[str, str]]:
    """The baseline's entries as (path, message)."""
    if not BASELINE.exists():
        raise fail(f"{BASELINE.name} is missing (it is part of the repository).")
    entries = []
    for number, line in enumerate(BASELINE.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        path, separator, message = line.partition(": error: ")
        if not separator:
            raise fail(f"{BASELINE.name} line {number} is not `path: error: message`.")
        entries.append((path, message))
    return entries


def baseline_write(errors: list[tuple[str, int, str]]) -> None:
    lines = sorted(f"{path}: error: {message}" for path, _, message in errors)
    BASELINE.write_text(HEADER + "".join(line + "\n" for line in lines), encoding="utf-8")


def compare(errors: list[tuple[str, int, str]], baseline: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """(files over their baseline, files under it), each as lines to print."""
    now = Counter(path for path, _, _ in errors)
    allowed = Counter(path for path, _ in baseline if not path.startswith(STRICT))
    over, under = [], []
    for path in sorted(set(now) | set(allowed)):
        if now[path] > allowed[path]:
            # The errors the baseline does not know by their text are the likely new ones;
            # when the texts all match (one more of the same), show them all.
            known = Counter(message for p, message in baseline if p == path)
            mine = [(line, message) for p, line, message in errors if p == path]
            new = []
            for line, message in mine:
                if known[message]:
                    known[message] -= 1
                else:
                    new.append((line, message))
            limit = ("none allowed: it is under the strict flags" if path.startswith(STRICT)
                     else f"{allowed[path]} allowed")
            over.append(f"{path}: {errors_text(now[path])}, {limit}")
            over.extend(f"    {path}:{line}: error: {message}" for line, message in (new or mine))
        elif now[path] < allowed[path]:
            under.append(f"{path}: {errors_text(now[path])}, the baseline allows {allowed[path]}")
    return over, under


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shrink", action="store_true",
                        help="rewrite mypy-baseline.txt to the current errors (only when no file has more)")
    args = parser.parse_args(argv)
    errors = mypy_errors()
    over, under = compare(errors, baseline_read())
    total = len(errors)
    if over:
        print("typecheck: FAILED: mypy finds more errors than mypy-baseline.txt allows in these files.")
        print("Fix the new errors (never add them to the baseline):\n")
        print("\n".join(over))
        if args.shrink:
            print("\nThe baseline was left as it was: it only shrinks.")
        return 1
    if under and args.shrink:
        baseline_write(errors)
        print(f"typecheck: ok; mypy-baseline.txt shrunk to {errors_text(total)}; fewer than before in:")
        print("\n".join(f"    {line}" for line in under))
        print("Commit mypy-baseline.txt with the fixes.")
        return 0
    if under:
        print(f"typecheck: ok ({errors_text(total)}, all known), and fewer than the baseline here:")
        print("\n".join(f"    {line}" for line in under))
        print("Shrink the baseline so they stay fixed: .venv/bin/python scripts/typecheck.py --shrink")
        return 0
    print(f"typecheck: ok ({errors_text(total)}, each in mypy-baseline.txt; none in the strict files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
