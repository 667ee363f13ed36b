"""The load run in its short form (issue: reliability): no error, no invalid request, no lost
record; and when the product fails, the run still ends by itself, prints its table with the
errors, and exits non-zero."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.skipif(not os.environ.get("DATABASE_URL", "").startswith("postgres"),
                                reason="the load run needs PostgreSQL (web and workers are separate processes)")


def _load(*args: str) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    # The hard time-out is far above any bounded run; the run's own bounds are what is tested.
    result = subprocess.run([sys.executable, "-W", "ignore", "load.py", *args],
                            cwd=REPO / "benchmarks", capture_output=True, text=True, timeout=240)
    lines = result.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("figure ")), None)
    assert start is not None, "no table printed:\n" + result.stdout[-3000:] + result.stderr[-3000:]
    figures = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in lines[start + 2:]
                   if line and not line.startswith(" "))
    return result, figures


def test_a_short_load_run_of_concurrent_chat_users_loses_nothing_and_sends_nothing_invalid():
    result, figures = _load("--users", "8", "--seconds", "10")
    # load.py exits non-zero on any error, invalid provider request, lost record or run left behind.
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert int(figures["runs completed"]) > 0
    assert {k: figures[k] for k in ("errors", "errors by kind", "users cancelled at the deadline",
                                    "runs left queued/running", "invalid provider requests", "lost records")} == {
        "errors": "0", "errors by kind": "none", "users cancelled at the deadline": "0",
        "runs left queued/running": "0", "invalid provider requests": "0", "lost records": "0"}, result.stdout
    # The first questions (every user at once, on processes just started) apart from the rest.
    assert re.search(r"of questions asked in the first 2 s +\d+\.\d\d / ", result.stdout), result.stdout
    assert re.search(r"of questions asked after that +\d+\.\d\d / ", result.stdout), result.stdout
    # How late the users' own clock ran: what the times above include of the benchmark itself.
    assert re.search(r"the users' own clock late by p50 / p95 / p99 \(s\) +\d+\.\d\d / ", result.stdout), \
        result.stdout


def test_a_failing_product_still_ends_the_run_prints_its_errors_and_exits_non_zero():
    # Half the users ask at a path that answers 500; the provider never answers the others,
    # so their runs never end: they must be cancelled after the drain and counted as left behind.
    result, figures = _load("--users", "4", "--seconds", "2", "--drain", "2", "--workers", "1",
                            "--fault", "500", "--fault", "hang")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert figures["runs completed"] == "0"
    assert re.fullmatch(r"500 ×\d+", figures["errors by kind"]), figures
    assert int(figures["errors"]) > 0
    # The two users on the hanging provider can never finish, so they are always cancelled;
    # a user on the failing path may be cancelled mid-request too. How many hanging
    # questions were accepted before the deadline depends on the machine's load, so only
    # the bound is asserted (no timing margin).
    assert 2 <= int(figures["users cancelled at the deadline"]) <= 4, figures
    assert 0 <= int(figures["runs left queued/running"]) <= 2, figures
    assert "error 500: ask:" in result.stdout
