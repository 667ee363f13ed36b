"""What people's memory costs a version's runs (SPEC §7c, MEM-3): each run that carried
memory, its frozen block and how many requests of its main line carried it.

``Run.memory`` is read to be counted, never shown: the usage page turns it into an estimate
of tokens and shows only that number (a size, as the memory console shows sizes), so the
page writes no access-audit row. Runs are read ``chunk`` at a time, keyset on the id.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from django.db.models import Count, Q

from sessions.models import ModelCall, Run

RUNS_CHUNK = 500


@dataclass(frozen=True)
class RunMemory:
    """One run that carried memory: its block (decrypted, to be counted) and the action
    calls of its main line, each of which sent the block (sub-agents have no memory)."""

    run_id: int
    session_id: int
    status: str
    memory: str
    requests: int


def version_memory_runs(*, version, chunk: int = RUNS_CHUNK) -> Iterator[RunMemory]:
    """Every run of ``version`` that carried memory, in id order (two queries per chunk)."""
    after = 0
    while True:
        runs = list(Run.objects.filter(version=version, memory__isnull=False, pk__gt=after).order_by("pk")
                    .values_list("pk", "session_id", "status", "memory")[:chunk])
        if not runs:
            return
        after = runs[-1][0]
        calls = dict(ModelCall.objects.filter(run_id__in=[run[0] for run in runs])
                     .values("run_id").order_by("run_id")
                     .annotate(n=Count("id", filter=Q(purpose=ModelCall.Purpose.ACTION,
                                                      instance__parent__isnull=True)))
                     .values_list("run_id", "n"))
        for run_id, session_id, status, memory in runs:
            yield RunMemory(run_id=run_id, session_id=session_id, status=status, memory=memory or "",
                            requests=calls.get(run_id, 0))
