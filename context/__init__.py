"""AgentLoom's context engine: records in, valid model requests out.

Pure Python -- no Django, DRF or Celery, no I/O -- so every rule of SPEC sections 3 to 5
is tested with literal inputs. The Django apps load records, call these functions and
save what they return. See docs/context-engine.md.
"""

from __future__ import annotations

from context.adapters import RequestBuilder, RequestValidationError, adapt_messages, build_request_body
from context.attachments import DEFAULT_IMAGE_BUDGET, ImageBudget, apply_image_budget
from context.calibration import (
    CalibratedEstimator,
    Calibration,
    calibrated,
    prior_ratio,
    prompt_truncated,
    ratio_sample,
    truncation_confirmed,
    usage_prompt_tokens,
)
from context.estimate_cache import EstimateCache
from context.estimators import (
    BYTES_V1,
    BytesEstimator,
    DENSE_V1,
    DenseEstimator,
    Estimator,
    TiktokenEstimator,
    encoding_for_model,
    estimate_is_exact,
    estimator_by_id,
    get_estimator,
)
from context.legacy import DEFAULT_LEGACY_CHAR_LIMIT, LegacyCharPolicy, message_groups
from context.media import DEFAULT_SCREEN_TOOLS
from context.policy import (
    POLICY_DEFAULTS,
    Budget,
    ContextPolicy,
    Counters,
    PolicyError,
    TriggerResult,
    budget_under_window,
    default_safety_margin,
    evaluate_triggers,
    length_cause,
)
from context.projector import CallStates, Projected, Projection, project_records, tool_call_states
from context.truncation import DEFAULT_TOOL_RESULT_LIMIT, answer_bound, truncate_content, truncate_text
from context.validate import DIALECTS, Problem, validate_request

# Compaction last: it is built on the modules above.
from context.compaction import (  # noqa: E402
    CompactionRequest,
    CompactionResult,
    CommitDecision,
    RuntimeState,
    SummaryCall,
    SummaryReply,
    assemble_view,
    clean_summary,
    commit_decision,
    compact,
    continuation_message,
    drive,
    fit_tool_outputs,
    is_continuation_message,
    is_runtime_state_message,
    render_runtime_state,
    summarizer_input,
    summary_prompt,
    view_problems,
)

# The native Anthropic body reads compaction's continuation preamble, so it comes after it.
from context.anthropic import AnthropicBuilder, build_anthropic_body  # noqa: E402
from context.anthropic_validate import anthropic_body_problems  # noqa: E402

# The pipeline of a step is built on all of the above.
from context.pipeline import (  # noqa: E402
    CompactFirst,
    ContextPipeline,
    ContextTooLong,
    InstanceContext,
    RequestShape,
    RunFigures,
    Send,
    Start,
    answer_limit,
    build_body,
    within_window,
    request_builder,
    throttled,
)

__all__ = [
    "length_cause",
    "AnthropicBuilder",
    "CompactFirst",
    "ContextPipeline",
    "ContextTooLong",
    "InstanceContext",
    "RequestShape",
    "RunFigures",
    "Send",
    "Start",
    "answer_limit",
    "build_body",
    "within_window",
    "request_builder",
    "throttled",
    "BYTES_V1",
    "DENSE_V1",
    "CalibratedEstimator",
    "Calibration",
    "calibrated",
    "budget_under_window",
    "default_safety_margin",
    "estimate_is_exact",
    "prior_ratio",
    "prompt_truncated",
    "truncation_confirmed",
    "ratio_sample",
    "usage_prompt_tokens",
    "DEFAULT_IMAGE_BUDGET",
    "DEFAULT_LEGACY_CHAR_LIMIT",
    "DEFAULT_SCREEN_TOOLS",
    "DEFAULT_TOOL_RESULT_LIMIT",
    "DIALECTS",
    "POLICY_DEFAULTS",
    "Budget",
    "ImageBudget",
    "BytesEstimator",
    "DenseEstimator",
    "CommitDecision",
    "CompactionRequest",
    "CompactionResult",
    "ContextPolicy",
    "Counters",
    "EstimateCache",
    "Estimator",
    "LegacyCharPolicy",
    "PolicyError",
    "Problem",
    "RequestBuilder",
    "RequestValidationError",
    "RuntimeState",
    "SummaryCall",
    "SummaryReply",
    "TiktokenEstimator",
    "TriggerResult",
    "adapt_messages",
    "apply_image_budget",
    "anthropic_body_problems",
    "assemble_view",
    "build_anthropic_body",
    "build_request_body",
    "clean_summary",
    "commit_decision",
    "compact",
    "continuation_message",
    "drive",
    "encoding_for_model",
    "estimator_by_id",
    "evaluate_triggers",
    "fit_tool_outputs",
    "get_estimator",
    "is_continuation_message",
    "is_runtime_state_message",
    "message_groups",
    "project_records",
    "Projected",
    "Projection",
    "CallStates",
    "tool_call_states",
    "render_runtime_state",
    "summarizer_input",
    "summary_prompt",
    "answer_bound",
    "truncate_content",
    "truncate_text",
    "validate_request",
    "view_problems",
]
