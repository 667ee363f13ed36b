"""The chat's runs as HTML, a finished run's rendered once and kept (issue #44 item 15).

A chat page renders up to 20 runs, and a run can be an import of 18,000 messages: reading
and decrypting its records, building its items and rendering the template cost a second
and a half of CPU, on every view of the page and every fragment the chat fetches. A
finished run's HTML only changes when something the rendering reads changes, so it is
kept, in this process's memory, under a key that holds all of it:

- the run (its id and creation), its status, attempt (a resume is a new one) and end;
- the last seq of its records and of its events (any record or event written since);
- whether it is the session's latest run (only that one offers Resume and Continue) and
  the agent's name the page shows;
- whether the reader is staff who may open the run's context inspector (the run links it);
- the compaction its summary marker offers to undo, if any (CTX-51: only the newest one,
  only while no run works — another run's answer or compaction changes it);
- the page's render budget as this run's turn came (``markdown.RenderBudget`` is spent
  from the newest run back: the same run renders differently under a spent budget).

An entry also keeps the budget as the run left it, so the runs before it on the page go
on spending from there exactly as a rendering from the records would have. A working
run is never kept (the browser builds it from its events).

The HTML holds the person's decrypted words, so it is never written anywhere: it lives in
the process (as ``crypto.RecentPlaintexts`` does), bounded to
``AGENTLOOM_RUN_HTML_CACHE_BYTES`` and dropping the least recently used first; a deploy
starts empty. It is only ever read after the caller's reach to the run was checked.
"""
from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.template.loader import render_to_string
from django.urls import reverse

from sessions.models import ModelCall, Run
from sessions.staff import staff_may_read
from web.markdown import RenderBudget
from web.presenters import RunsShared, run_view
from web.selectors import last_record_seqs, main_records_of_runs

BudgetState = tuple[int, int, int, int]  # markdown_chars, text_chars, rendered, shown


@dataclass(frozen=True)
class RunIdentity:
    """Everything about a finished run its HTML depends on, but the page's budget."""

    run_id: int
    created_at: str  # an id is never reused, but a restored database is not this process's to know
    status: str
    attempt: int
    finished_at: str
    last_record: int
    last_event: int
    latest: bool
    agent_name: str
    undo_compaction: int = 0  # CTX-51: the compaction its newest summary marker offers to undo (0: none)
    inspector: bool = False  # the reader may open the run's context inspector: its HTML links it


@dataclass(frozen=True)
class Kept:
    html: str
    budget_after: BudgetState
    continuable: bool


@dataclass(frozen=True)
class RenderedRun:
    """One run of a page: its HTML and what the page and the chat's script read beside it."""

    run: Run
    html: str
    live: bool
    continuable: bool
    last_seq: int
    supplements: dict[str, str]


class RenderedRuns:
    """Finished runs' HTML by (identity, budget at its turn), least recently used dropped
    first past ``max_bytes`` (read from the settings at each store; 0 keeps nothing)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: OrderedDict[tuple[RunIdentity, BudgetState], Kept] = OrderedDict()
        self.identities: dict[RunIdentity, int] = {}  # entries per identity, whatever the budget
        self.size = 0
        self.hits = 0
        self.renders = 0

    def get(self, identity: RunIdentity, budget: BudgetState) -> Kept | None:
        with self.lock:
            kept = self.entries.get((identity, budget))
            if kept is not None:
                self.entries.move_to_end((identity, budget))
                self.hits += 1
            return kept

    def knows(self, identity: RunIdentity) -> bool:
        """Whether a rendering of this run, under some budget, is kept."""
        with self.lock:
            return identity in self.identities

    def put(self, identity: RunIdentity, budget: BudgetState, kept: Kept) -> None:
        bound = settings.AGENTLOOM_RUN_HTML_CACHE_BYTES
        size = sys.getsizeof(kept.html)
        with self.lock:
            self.renders += 1
            if size > bound or (identity, budget) in self.entries:
                return
            self.entries[(identity, budget)] = kept
            self.identities[identity] = self.identities.get(identity, 0) + 1
            self.size += size
            while self.size > bound:
                (old, _), dropped = self.entries.popitem(last=False)
                self.size -= sys.getsizeof(dropped.html)
                self.identities[old] -= 1
                if not self.identities[old]:
                    del self.identities[old]

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.identities.clear()
            self.size = self.hits = self.renders = 0


KEPT = RenderedRuns()


def _state(budget: RenderBudget) -> BudgetState:
    return budget.markdown_chars, budget.text_chars, budget.rendered, budget.shown


def _may_inspect(request: Any) -> bool:
    """Whether the reader is staff who may open a run's context inspector in the console
    (``sessions.staff``): only they get the link from each run to it."""
    user = getattr(request, "user", None)
    return user is not None and staff_may_read(user=user, row_model=Run, content_model=ModelCall)


def _inspector_url(run: Run) -> str:
    return reverse("admin:agent_sessions_run_context", args=[run.pk])


def runs_rendered(*, runs: list[Run], latest_run_id: int | None, agent_name: str,
                  request: Any = None) -> list[RenderedRun]:
    """``runs`` (oldest first, as a page lists them) rendered by ``web/_run.html``; a
    finished run's HTML taken from what is kept when its key matches, else rendered from
    its records and kept. The same HTML, byte for byte, as rendering every run each time."""
    ids = [run.pk for run in runs]
    inspector = _may_inspect(request)
    shared = RunsShared.load(run_ids=ids, session_id=runs[0].session_id if runs else None,
                             version_ids={run.version_id for run in runs})
    last_records = last_record_seqs(run_ids=ids)
    identities = {run.pk: RunIdentity(run_id=run.pk, created_at=run.created_at.isoformat(), status=run.status,
                                      attempt=run.attempt,
                                      finished_at=run.finished_at.isoformat() if run.finished_at else "",
                                      last_record=last_records.get(run.pk, 0),
                                      last_event=shared.last_seqs.get(run.pk, 0), latest=run.pk == latest_run_id,
                                      agent_name=agent_name, undo_compaction=shared.undo_in(run),
                                      inspector=inspector)
                  for run in runs if run.status not in Run.ACTIVE_STATUSES}
    records: dict[int, list] = {}
    budget = RenderBudget()  # one per page, spent from the newest run back (markdown.py)
    rendered: list[RenderedRun] = []
    for index in range(len(runs) - 1, -1, -1):
        run = runs[index]
        identity = identities.get(run.pk)
        state = _state(budget)
        kept = KEPT.get(identity, state) if identity is not None else None
        if kept is None:
            if run.pk not in records:
                # This run and every earlier one never rendered yet are read in one query
                # (a page seen for the first time); a run kept under another budget is not.
                wanted = [older.pk for older in runs[:index + 1]
                          if older.pk == run.pk or older.pk not in identities or not KEPT.knows(identities[older.pk])]
                records.update({pk: [] for pk in wanted})
                records.update(main_records_of_runs(run_ids=wanted))
            view = run_view(run=run, records=records[run.pk], shared=shared, latest_run_id=latest_run_id,
                            budget=budget)
            html = render_to_string("web/_run.html", {"run": view, "agent_name": agent_name,
                                                      "inspector_url": _inspector_url(run) if inspector else ""},
                                    request=request)
            kept = Kept(html=html, budget_after=_state(budget), continuable=view.continuable)
            if identity is not None:
                KEPT.put(identity, state, kept)
            rendered.append(RenderedRun(run=run, html=html, live=view.live, continuable=view.continuable,
                                        last_seq=view.last_seq, supplements=view.supplements))
            continue
        budget.markdown_chars, budget.text_chars, budget.rendered, budget.shown = kept.budget_after
        rendered.append(RenderedRun(run=run, html=kept.html, live=False, continuable=kept.continuable,
                                    last_seq=shared.last_seqs.get(run.pk, 0), supplements={}))
    return rendered[::-1]
