"""The data the compaction engine takes, yields, receives and returns (SPEC §5).

Plain frozen dataclasses: the worker builds a ``CompactionRequest`` from the frame and the
projected view, drives the ``compact()`` generator with ``SummaryReply`` values, and saves
what the ``CompactionResult`` says. Nothing here refers to Django or to a provider.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from context.estimators import Estimator
from context.policy import Budget, ContextPolicy
from context.traces import Trace

TRIGGERS = ("budget", "user_turns", "model_steps", "tool_output_overflow", "manual")
COUNT_TRIGGERS = frozenset({"user_turns", "model_steps"})

Source = tuple[int, int] | None


@dataclass(frozen=True)
class RuntimeState:
    """CTX-36: facts that come from code, never from the summary.

    ``pending_calls`` and ``unknown_calls`` hold ``{"id", "name", "arguments"}`` dicts;
    ``sub_instances`` hold ``{"id", "task", "status"}``; ``files`` ``{"id", "name", "kind", "size"}``.
    """

    plan: str | None = None
    pending_calls: tuple[dict[str, Any], ...] = ()
    unknown_calls: tuple[dict[str, Any], ...] = ()
    sub_instances: tuple[dict[str, Any], ...] = ()
    queued_supplements: tuple[str, ...] = ()
    # RUN-13: the files attached to the session's questions, ``{"id", "name", "kind", "size"}``
    # each (``context.attachments.session_files``), so the agent can read one again.
    files: tuple[dict[str, Any], ...] = ()
    # CTX-49: the artifact ledger, newest first, computed by code from the records
    # (``{"kind", "label", "ref", "outcome"}`` each; see context/compaction/ledger.py).
    ledger: tuple[dict[str, Any], ...] = ()

    def is_empty(self) -> bool:
        """True when there is nothing to tell the model."""
        return not ((self.plan or "").strip() or self.pending_calls or self.unknown_calls
                    or self.sub_instances or self.queued_supplements or self.files or self.ledger)


@dataclass(frozen=True)
class HistoryFacts:
    """CTX-48: what a summary written by code is made of, read from the records (never from
    the view being replaced): every real user message of the main line in order, the tool
    calls with their statuses (``{"id", "name", "arguments", "status"}``), and the last
    assistant answer."""

    user_messages: tuple[str, ...] = ()
    calls: tuple[dict[str, Any], ...] = ()
    last_answer: str | None = None


@dataclass(frozen=True)
class PreparedSummary:
    """CTX-45: a summary made in the background of a snapshot of the view.

    ``prefix`` messages at the start of the view are what it covers, ``digest`` their
    fingerprint (``context.compaction.prefix_digest``): it is committed only onto a view
    that starts with exactly those messages, under the policy (``policy``, as a dict) and
    estimator it was made with. ``metrics`` are its preparation's (summary calls,
    retries, segments and the records each consumed, the summary's form).
    """

    summary: str
    prefix: int
    digest: str
    policy: dict[str, Any]
    estimator_id: str
    metrics: dict[str, Any]


@dataclass(frozen=True)
class CompactionRequest:
    """Everything one preparation's compaction needs (CTX-30 to CTX-38).

    ``messages`` is the current projected view *after* the system message, and
    ``sources[i]`` the ``(first_seq, last_seq)`` of the record ``messages[i]`` was read
    from, None for a message of a checkpoint or starting view or from no record
    (``project_records(..., sources_out=[])`` gives them). ``traces[i]`` is what
    ``messages[i]`` stands for through earlier checkpoints (``context.traces``;
    ``project_records(..., traces_out=[])``): the metrics' record ranges are read from it
    (CTX-41). Without ``traces`` they are read from ``sources``, and what came through a
    checkpoint is not traced.
    ``task_anchor`` is the last real user question of the run, kept verbatim (it may also
    be inside ``messages``). ``max_summary_calls`` bounds the summary calls, retries
    included. ``summary_share`` is the share of the effective input held for the
    continuation summary while the retained groups are chosen (capped by the output
    reserve: a summary cannot be longer than one model reply); the summary then gets
    whatever room the assembled view has left up to the target.
    """

    system: dict[str, Any]
    messages: list[dict[str, Any]]
    sources: list[Source]
    task_anchor: dict[str, Any] | None
    runtime_state: RuntimeState
    budget: Budget
    policy: ContextPolicy
    estimator: Estimator
    tools: list[dict[str, Any]]
    trigger: str
    max_summary_calls: int
    dialect: str = "openai"
    summary_share: float = 0.15
    ride_cache: bool = False
    headroom: int = 0
    cut: int | None = None
    prepared: PreparedSummary | None = None
    traces: list[Trace] | None = None
    # CTX-50: the seqs of the pinned records; a message whose source is ``(s, s)`` with ``s``
    # pinned stays verbatim (never masked, never summarized while the pins' room holds it).
    pinned: frozenset[int] = frozenset()
    # CTX-48: the records' facts for a summary written by code when the summarizer fails the check.
    history: HistoryFacts | None = None
    # CTX-45, CTX-47: a background preparation wants a summary: the mask tier is not tried.
    summary_only: bool = False


@dataclass(frozen=True)
class SummaryCall:
    """A summarizer request, yielded by ``compact()``.

    ``messages`` (system + user prompt) passes ``validate_request`` in every mode, and
    ``estimated_tokens`` (the request's estimate with the request's estimator) is at most
    the budget's effective input, so with the output reserve it is under the hard limit.
    Send it with ``max_output_tokens`` as its output limit: what the compacted view can
    hold of a summary, with room for some overrun, never more than the budget's output
    reserve (None: the reserve). ``tools``: send these tool schemas with it -- a summary
    request in the cached form (CTX-46) is the action request's prefix, tools included,
    and ends with an instruction not to call them. ``ranges`` are the exact record ranges
    the call's summary consumes (CTX-41); ``consumed`` the one range that holds them.
    """

    messages: list[dict[str, Any]]
    segment: int
    attempt: int
    consumed: Source
    estimated_tokens: int = 0
    planned_segments: int = 1
    max_output_tokens: int | None = None
    tools: list[dict[str, Any]] | None = None
    ranges: Trace = ()

    @property
    def cached(self) -> bool:
        """The cached form (CTX-46): the action request's prefix plus the instruction."""
        return self.tools is not None


@dataclass(frozen=True)
class SummaryReply:
    """The outcome of one summary call, sent back into the generator.

    ``deterministic`` marks errors that the same request would hit again
    (authentication, invalid parameters, context overflow): no retry (CTX-35).
    ``truncated``: the provider stopped the reply at its output limit (``finish_reason``
    ``length``), so its last sentence is cut off.
    """

    text: str | None
    error_code: str | None = None
    deterministic: bool = False
    truncated: bool = False


@dataclass(frozen=True)
class CompactionResult:
    """What a compaction came to (the generator's return value).

    ``outcome`` is ``compacted``, ``skipped`` or ``failed``; ``reason`` a stable slug.
    ``summary`` is None when no summary was made -- a compaction the masking tier resolved
    alone (CTX-47, ``metrics["tiers"] == ["mask"]``) among them.
    ``messages`` is the new view after the system message, only when compacted, with
    ``sources`` per message (None for the summary, the anchor and the state block) and
    ``traces`` per message (CTX-41): the summary stands for every record its segments
    consumed, the retained messages for what they stood for, the anchor and the state
    block for no record. Store ``traces`` with the checkpoint (``context.traces``) and
    hand them back to the projector, and the next compaction traces its summary through
    this one.
    """

    outcome: str
    reason: str
    messages: list[dict[str, Any]] | None
    summary: str | None
    metrics: dict[str, Any]
    sources: list[Source] | None = None
    traces: list[Trace] | None = None


@dataclass(frozen=True)
class CommitDecision:
    """CTX-38: whether a candidate view replaces the old one, and why."""

    commit: bool
    outcome: str
    reason: str
    target_reached: bool
