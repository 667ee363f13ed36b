"""Compaction (SPEC §5): summaries that keep the task, views that stay valid.

Pure and sans-I/O. ``compact(request)`` is a generator that yields ``SummaryCall``s and
receives ``SummaryReply``s; the worker drives it with its provider client and the tests
with a scripted function (``drive``). The helpers are the pure steps it is made of:
the summarizer input (CTX-33), the nine-section prompt and the cleaning and fitting of its
reply (CTX-34), the runtime-state block (CTX-36), the assembly (CTX-37), the commit rule
(CTX-38), tool-output overflow (CTX-42) and prepared summaries (CTX-45). See docs/context-engine.md.
"""

from __future__ import annotations

from .cleaning import CONTROL_TAG_NAMES, clean_summary, fit_summary, neutralize_control_tags, summary_problem
from .engine import EMPTY_SUMMARY, compact, drive
from .finish import commit_decision
from .overflow import fit_tool_outputs, newest_results_overflow, omission_result
from .planner import merge_sources
from .prepared import DISCARD_REASONS, commit_prepared, prefix_digest, prepared_from, prepared_misfit
from .prompt import SUMMARIZER_SYSTEM, summarizer_input, summary_prompt
from .sections import SECTION_TITLES
from .state import (
    RUNTIME_STATE_HEADER,
    RUNTIME_STATE_SHARE,
    is_runtime_state_message,
    render_runtime_state,
    runtime_state_block,
    runtime_state_room,
)
from .summarize import MAX_ATTEMPTS
from .types import (
    COUNT_TRIGGERS,
    TRIGGERS,
    CommitDecision,
    CompactionRequest,
    CompactionResult,
    HistoryFacts,
    PreparedSummary,
    RuntimeState,
    SummaryCall,
    SummaryReply,
)
from .view import (
    CONTINUATION_HEADER,
    assemble_view,
    continuation_message,
    continuation_summary,
    is_continuation_message,
    restates_anchor,
    view_problems,
)

__all__ = [
    "CONTINUATION_HEADER",
    "CONTROL_TAG_NAMES",
    "COUNT_TRIGGERS",
    "DISCARD_REASONS",
    "EMPTY_SUMMARY",
    "MAX_ATTEMPTS",
    "RUNTIME_STATE_HEADER",
    "RUNTIME_STATE_SHARE",
    "SECTION_TITLES",
    "SUMMARIZER_SYSTEM",
    "TRIGGERS",
    "CommitDecision",
    "CompactionRequest",
    "CompactionResult",
    "HistoryFacts",
    "PreparedSummary",
    "RuntimeState",
    "SummaryCall",
    "SummaryReply",
    "assemble_view",
    "clean_summary",
    "commit_decision",
    "commit_prepared",
    "compact",
    "continuation_message",
    "continuation_summary",
    "drive",
    "fit_summary",
    "fit_tool_outputs",
    "is_continuation_message",
    "is_runtime_state_message",
    "merge_sources",
    "neutralize_control_tags",
    "newest_results_overflow",
    "omission_result",
    "prefix_digest",
    "prepared_from",
    "prepared_misfit",
    "render_runtime_state",
    "restates_anchor",
    "runtime_state_block",
    "runtime_state_room",
    "summarizer_input",
    "summary_prompt",
    "summary_problem",
    "view_problems",
]
