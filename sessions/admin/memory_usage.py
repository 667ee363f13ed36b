"""What people's memory costs on a version's usage page (SPEC §7c, MEM-3): for the runs that
carried memory, the tokens of the frozen block — an estimate, counted with the estimator of
the version's model, as the run loop counts the requests it builds — and how many tokens
the requests of each run's main line sent of it (the block is in every one of them, mostly
read from the provider's cache after the first).

Runs without memory are left out. The blocks are counted, never shown (see
``sessions.selectors.memory_usage``); a block the same as one already counted is not
counted again (a person's runs carry the same memory until it changes).
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from context.estimators import Estimator, get_estimator
from models_catalog.providers import get_provider
from sessions.selectors.memory_usage import version_memory_runs

LATEST_SHOWN = 50


@dataclass(frozen=True)
class RunMemoryCost:
    run_id: int
    session_id: int
    status: str
    tokens: int  # of the block, estimated
    requests: int  # main-line action calls, each carrying the block

    @property
    def sent(self) -> int:
        return self.tokens * self.requests


@dataclass(frozen=True)
class MemoryCost:
    runs: int
    tokens: int  # the blocks of every run, summed
    sent: int  # what the runs' requests carried of them
    largest: int
    estimator: str
    latest: tuple[RunMemoryCost, ...]  # the newest runs first, at most LATEST_SHOWN

    @property
    def per_run(self) -> float:
        return self.tokens / self.runs if self.runs else 0.0


def memory_runs_counted(*, version) -> Iterator[RunMemoryCost]:
    """Each run of ``version`` that carried memory, in id order, with its memory's tokens."""
    estimator = get_estimator(version.model, exact_tokenizer=_exact(version.provider))
    counted: dict[str, int] = {}
    for run in version_memory_runs(version=version):
        if run.memory not in counted:
            counted[run.memory] = block_tokens(estimator, run.memory)
        yield RunMemoryCost(run_id=run.run_id, session_id=run.session_id, status=run.status,
                            tokens=counted[run.memory], requests=run.requests)


def memory_cost(*, version) -> MemoryCost | None:
    """The memory figures of ``version``'s runs; None when no run carried memory."""
    latest: deque[RunMemoryCost] = deque(maxlen=LATEST_SHOWN)
    tokens = sent = largest = runs = 0
    for row in memory_runs_counted(version=version):
        runs, tokens, sent, largest = runs + 1, tokens + row.tokens, sent + row.sent, max(largest, row.tokens)
        latest.append(row)
    if not runs:
        return None
    estimator = get_estimator(version.model, exact_tokenizer=_exact(version.provider))
    return MemoryCost(runs=runs, tokens=tokens, sent=sent, largest=largest, estimator=estimator.id,
                      latest=tuple(reversed(latest)))


def memory_tokens_beside(runs: Iterable[Any], *, version) -> Iterator[tuple[Any, int | None]]:
    """Each of ``runs`` (in id order, with ``run_id``) with its memory's tokens, None for a
    run without memory: a merge of two walks in id order, no query per run (the CSV)."""
    counted = memory_runs_counted(version=version)
    pending = next(counted, None)
    for run in runs:
        while pending is not None and pending.run_id < run.run_id:
            pending = next(counted, None)
        yield run, (pending.tokens if pending is not None and pending.run_id == run.run_id else None)


def block_tokens(estimator: Estimator, block: str) -> int:
    """What the block adds to a request: the system message with it as its second text part
    (``runloop.state.system_message``), less the same message without it."""
    instructions = {"type": "text", "text": "."}
    with_block = {"role": "system", "content": [instructions, {"type": "text", "text": block}]}
    return max(0, estimator.message(with_block) - estimator.message({"role": "system", "content": [instructions]}))


def _exact(provider: str) -> bool:
    try:
        return get_provider(provider).exact_tokenizer
    except Exception:  # noqa: BLE001 - a provider no longer registered counts with the proxy
        return False
