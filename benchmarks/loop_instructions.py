"""Benchmark: the loop's own work per step in instructions, step 20 against the last steps.

    .venv/bin/python benchmarks/loop_instructions.py [--steps 300] [--dialect openai|anthropic]

``loop.py`` (a3) times a step's own work (from the end of one provider call to the start of
the next) on the wall clock; on a busy 2-core machine that ratio wandered from 0.5× to
1.9× between two runs of the same code. This counts the instructions of the same windows
under valgrind's callgrind instead, which repeat within a few percent: callgrind
instruments only the ten steps from step 16 and the last ten (client requests from a
five-line C shim built here with ``cc``), and each window is dumped on its own. Needs
``valgrind`` (with its headers) and a C compiler; slow (about 10 minutes for 300 steps).
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import glob
import io
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

SHIM = """#include <valgrind/callgrind.h>
void cg_on(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void cg_off(const char *name) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS_AT(name); }
"""


def _measure(steps: int, dialect: str, shim: str) -> None:
    """Inside valgrind: run the long session of loop.py (a3), instrumenting the windows."""
    from _django import setup

    setup()
    import loop as bench

    from runloop import calls

    cg = ctypes.CDLL(shim)
    windows = set(range(16, 26)) | set(range(steps - 10, steps))
    stream_once, made, on = calls._stream_once, [0], [False]

    def counted(*args, **kwargs):
        if on[0]:
            cg.cg_off(f"step-{made[0]}".encode())
            on[0] = False
        try:
            return stream_once(*args, **kwargs)
        finally:
            made[0] += 1
            if made[0] in windows:
                on[0] = True
                cg.cg_on()
    calls._stream_once = counted
    with contextlib.redirect_stdout(io.StringIO()):
        bench.bench_step_cost(steps, "postgresql", dialect)


def _report(folder: str, steps: int, dialect: str) -> None:
    from _django import table

    counts: dict[int, int] = {}
    for path in glob.glob(f"{folder}/callgrind.out.*"):
        text = open(path).read()
        step = re.search(r"^desc: Trigger: Client Request: step-(\d+)", text, re.M)
        total = re.search(r"^totals: (\d+)", text, re.M)
        if step and total:
            counts[int(step.group(1))] = int(total.group(1))
    early = statistics.median(v for k, v in counts.items() if k < steps - 10)
    late = statistics.median(v for k, v in counts.items() if k >= steps - 10)
    table(f"loop's own work per step in instructions (callgrind), {dialect} wire, {steps}-step run, median of 10", [
        ("steps 16–25", f"{early / 1e6:,.2f} M", "1.00×"),
        (f"the last 10 of {steps}", f"{late / 1e6:,.2f} M", f"{late / early:,.3f}× (target ≤ 1.1×)"),
    ], ("steps", "instructions / step", "ratio"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--dialect", choices=("openai", "anthropic"), default="openai")
    parser.add_argument("--inside", help=argparse.SUPPRESS)  # the shim's path, under valgrind
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if args.inside:
        _measure(args.steps, args.dialect, args.inside)
        return
    if shutil.which("valgrind") is None or shutil.which("cc") is None:
        print("loop_instructions.py: skipped (needs valgrind and a C compiler)")
        return
    folder = tempfile.mkdtemp(prefix="loop-instructions-")
    with open(f"{folder}/shim.c", "w") as source:
        source.write(SHIM)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", f"{folder}/shim.so", f"{folder}/shim.c"], check=True)
    subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--log-file=/dev/null",
                    f"--callgrind-out-file={folder}/callgrind.out.%p", sys.executable, os.path.abspath(__file__),
                    "--steps", str(args.steps), "--dialect", args.dialect, "--inside", f"{folder}/shim.so"],
                   check=True)
    try:
        _report(folder, args.steps, args.dialect)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
