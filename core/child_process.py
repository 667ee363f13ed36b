"""Untrusted bytes read in a child process with a hard deadline (RUN-13).

A reader run on hostile bytes (pypdf on a PDF, Pillow's decoders on an image) can take as
long and as much memory as the bytes make it: a check between pages cannot stop a page
being read, and memory a decoder took stays with the process that took it (twenty image
bombs grew a web process by 2.5 GB). So the reading happens in a child — a fresh
interpreter, not a fork of the multi-threaded web server or worker — that gets the bytes
on stdin, bounds its own memory and CPU time, and writes one JSON record a line on
stdout. The parent reads the records until the child closes its output or the deadline
passes, then kills it, whatever it was doing; its output is bounded on this side too.

The child gets no secrets: its environment keeps only what finds the interpreter and
its packages. Plain Python, no Django.
"""
from __future__ import annotations

import json
import os
import selectors
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ENV_KEPT = ("PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")


@dataclass(frozen=True)
class ChildOutput:
    """What a child wrote: its complete ``records``; ``finished`` when it closed its output
    before the deadline; ``malformed`` when its output passed the bound or was not one JSON
    object a line (the records are then not to be trusted). ``pid`` is gone by now."""

    pid: int
    records: list[dict] = field(default_factory=list)
    finished: bool = False
    malformed: bool = False


def child_run(command: Sequence[str], data: bytes, *, max_seconds: float, max_output_bytes: int,
              cwd: Path | None = None) -> ChildOutput:
    """Start ``command``, write ``data`` to its stdin, read its records for at most
    ``max_seconds``, and kill it. Never raises on the child's account."""
    deadline = time.monotonic() + max_seconds
    env = {key: os.environ[key] for key in ENV_KEPT if key in os.environ}
    child = subprocess.Popen(list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, cwd=cwd, env=env)
    feeder = threading.Thread(target=_feed, args=(child, data), daemon=True)
    feeder.start()
    try:
        records, finished, malformed = _records(child, deadline, max_output_bytes)
    finally:
        child.kill()  # the reading stops here, whether or not it has finished
        feeder.join()
        assert child.stdout is not None
        child.stdout.close()
        child.wait()
    return ChildOutput(pid=child.pid, records=records, finished=finished, malformed=malformed)


def _feed(child: subprocess.Popen, data: bytes) -> None:
    assert child.stdin is not None
    try:
        child.stdin.write(data)
    except OSError:
        pass  # the child stopped reading (it failed, or it was killed)
    try:
        child.stdin.close()
    except OSError:
        pass  # what was left in the buffer had nowhere to go


def _records(child: subprocess.Popen, deadline: float, max_output_bytes: int) -> tuple[list[dict], bool, bool]:
    """The child's complete records until it closes stdout (finished), the deadline passes
    (not finished) or its output passes the bound or is not JSON (malformed)."""
    assert child.stdout is not None
    stream = child.stdout.fileno()
    records: list[dict] = []
    pending = b""
    received = 0
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                return records, False, False
            chunk = os.read(stream, 65536)
            if not chunk:
                return records, True, False
            received += len(chunk)
            if received > max_output_bytes:
                return records, False, True
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                try:
                    record = json.loads(line)
                except ValueError:
                    return records, False, True
                if not isinstance(record, dict):
                    return records, False, True
                records.append(record)
