"""The context inspector's pairing: each model call beside the call it is compared with,
and what changed between the two. The API (``GET /api/v1/runs/<id>/context``) and the
console's inspector page both read it here and only shape it, for JSON or for a template.

Nothing here writes; the one hook, ``before_read``, is where a caller writes its access
audit before anything encrypted is decrypted.
"""
from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from context.request_diff import RequestDiff, request_diff, tools_changed
from sessions.models import ModelCall, Run
from sessions.selectors.model_calls import SentEntry, model_call_entries, model_call_tools


@dataclass(frozen=True)
class CallPairing:
    """A model call and the call it is compared with.

    ``previous`` is the call before it of the same instance and purpose; for a run's main
    instance, the first call of a purpose extends the last call of that purpose a main
    instance made in an earlier run of the session (a new question starts a new run, and a
    provider's prompt cache outlives the run). ``pruned`` names the call — this one first,
    else the previous — whose copy the retention period dropped: then nothing is compared.
    ``diff`` is None when nothing was compared (no previous call, or a dropped copy), and
    ``tools_changed`` is then False.
    """

    call: ModelCall
    entries: list[SentEntry]
    tools: list[dict[str, Any]]
    previous: ModelCall | None
    previous_entries: list[SentEntry] | None
    pruned: int | None
    diff: RequestDiff | None
    tools_changed: bool

    @property
    def first_changed(self) -> int | None:
        """Where a prompt cache stops matching: 0 when the tools changed (they precede every
        message), else the diff's first changed position; None when nothing was compared."""
        if self.diff is None:
            return None
        return 0 if self.tools_changed else self.diff.first_changed

    @property
    def previous_in_earlier_run(self) -> bool:
        return self.previous is not None and self.previous.run_id != self.call.run_id


def model_call_pairings(*, run: Run, ids: Collection[int] | None = None,
                        before_read: Callable[[list[int]], None] | None = None) -> list[CallPairing]:
    """The run's calls ``ids`` (all of them when None), in id order, each paired with its
    previous call and compared with it (see ``CallPairing``).

    Which calls are compared is settled from plain columns first. ``before_read`` then
    receives the ids, in order, of the previous calls read beside the shown ones (an
    earlier page, the previous run) — always, even when there are none; only after it
    returns are the requests decrypted. Call it inside the caller's transaction when its
    audit row and the read must stand or fall together.
    """
    index = list(ModelCall.objects.filter(run=run).order_by("id")
                 .values_list("pk", "instance_id", "purpose", "instance__parent_id"))
    wanted = None if ids is None else set(ids)
    shown = [pk for pk, *_ in index if wanted is None or pk in wanted]
    previous_of = _previous_of(index=index, shown=set(shown), run=run)
    compared = sorted({pk for pk in previous_of.values() if pk is not None} - set(shown))
    if before_read is not None:
        before_read(compared)
    loaded = {call.pk: call for call in ModelCall.objects.filter(run__session_id=run.session_id,
                                                                 pk__in=[*shown, *compared])
              .select_related("run", "instance").defer("run__counters", "instance__frame")}
    sent = {pk: (model_call_entries(call=call), model_call_tools(call=call)) for pk, call in loaded.items()}
    pairings = []
    for pk in shown:
        call, before_pk = loaded[pk], previous_of[pk]
        before = loaded[before_pk] if before_pk is not None else None
        entries, tools = sent[pk]
        previous_entries = sent[before_pk][0] if before_pk is not None else None
        pruned = next((c.pk for c in (call, before) if c is not None and c.pruned_at), None)
        diff, changed = None, False
        if before_pk is not None and pruned is None:  # a dropped copy has nothing to compare
            changed = tools_changed(sent[before_pk][1], tools)
            diff = request_diff([e.message for e in sent[before_pk][0]], [e.message for e in entries])
        pairings.append(CallPairing(call=call, entries=entries, tools=tools, previous=before,
                                    previous_entries=previous_entries, pruned=pruned, diff=diff,
                                    tools_changed=changed))
    return pairings


def _previous_of(*, index: list[tuple[int, int, str, int | None]], shown: set[int], run: Run) -> dict[int, int | None]:
    """For each shown call, the id of the call it is compared with (None for none).

    ``index``: every call of the run as (id, instance, purpose, parent instance), in id
    order — the previous call of a shown one may sit on another page.
    """
    last: dict[tuple[int, str], int] = {}
    earlier: dict[str, int | None] = {}
    previous: dict[int, int | None] = {}
    for pk, instance_id, purpose, parent_id in index:
        before = last.get((instance_id, purpose))
        last[(instance_id, purpose)] = pk
        if pk not in shown:
            continue
        if before is None and parent_id is None:
            if purpose not in earlier:
                earlier[purpose] = _last_before_run(run=run, purpose=purpose)
            before = earlier[purpose]
        previous[pk] = before
    return previous


def _last_before_run(*, run: Run, purpose: str) -> int | None:
    """The last call of ``purpose`` a main instance of the session made in an earlier run."""
    return (ModelCall.objects.filter(run__session_id=run.session_id, run_id__lt=run.pk, purpose=purpose,
                                     instance__parent__isnull=True)
            .order_by("-run_id", "-id").values_list("pk", flat=True).first())
