"""``fault_probe``: a test tool whose every execution leaves a line in a file.

The file is shared by the test process and worker processes, so a test can count how
many times a call really ran, across a SIGKILL and a resume (RUN-6: a call with a stored
result is never run again; a non-idempotent call pending at a crash is never re-run).
It is registered through the public registry, like any tool an operator adds.
"""
from __future__ import annotations

import json
import os
import signal

from agents.tool_registry import Tool, registry

PROBE_FILE_ENV = "AGENTLOOM_FAULT_PROBE_FILE"


def _run(arguments: dict, context) -> str:
    path = os.environ[PROBE_FILE_ENV]
    with open(path, "a") as log:
        log.write(json.dumps({"run": context.run_id, "tag": arguments.get("tag")}) + "\n")
        log.flush()
        os.fsync(log.fileno())
    if os.environ.get("AGENTLOOM_FAULT_WORKER") == "1" and os.environ.get("AGENTLOOM_FAULT_KILL_IN_TOOL") == "1":
        os.kill(os.getpid(), signal.SIGKILL)  # the effect happened; the result never will be saved
    return f"probe {arguments.get('tag')} done"


PROBE = Tool(
    name="fault_probe",
    description="Records that it ran (test tool).",
    parameters={"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]},
    run=_run,
    idempotent=False,
    timeout_seconds=10,
)


def probe_install() -> None:
    registry[PROBE.name] = PROBE


def probe_uninstall() -> None:
    registry.pop(PROBE.name, None)


def probe_runs(path) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as log:
        return [json.loads(line) for line in log if line.strip()]
