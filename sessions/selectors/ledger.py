"""CTX-49: the artifact ledger of an instance, read from the records it may see. Nothing
here writes."""
from __future__ import annotations

from collections.abc import Collection
from typing import Any

from context.compaction.ledger import artifact_ledger
from sessions.models import Instance, Run
from sessions.selectors.records import visible_records_for_engine


def instance_ledger(*, run: Run, instance: Instance, idempotent: Collection[str]) -> tuple[dict[str, Any], ...]:
    """The ledger of every record ``instance``'s context is built from (``visible_records_for_engine``:
    its run's inherited prefix and its own records, never a later question's or a
    sub-agent's internals), never of its view, which a compaction may have summarized: so
    it is carried across every compaction. ``run`` is the open one (its unanswered calls
    are pending, not in the ledger); ``idempotent`` names the tools without side effects."""
    return artifact_ledger(visible_records_for_engine(run=run, instance=instance), idempotent=idempotent,
                           open_runs={run.pk})
