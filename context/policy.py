"""CTX-20 to CTX-23: the context policy, the token budget, triggers and counters."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

POLICY_DEFAULTS: dict[str, Any] = {
    "context_ratio": 0.8,
    "target_ratio": 0.6,
    "user_turns": None,
    "model_steps": None,
    "max_compaction_calls": 4,
    "prepare_ratio": None,
    "mask_tool_results": True,
}
MAX_COMPACTION_CALLS = 16

# Platform fallback for a model whose window nobody could discover (CAT-2).
PLATFORM_CONTEXT_WINDOW = 32_768
PLATFORM_MAX_OUTPUT_TOKENS = 4_096
PLATFORM_SAFETY_MARGIN = 1_024
# CAT-3: the default safety margin is a share of the window with a floor and a cap, so a
# 2,048-token model does not give half its input to a fixed margin, and a 32,768-token
# one keeps the platform's 1,024.
SAFETY_MARGIN_SHARE = 32  # one thirty-second of the window
SAFETY_MARGIN_FLOOR = 64
SAFETY_MARGIN_CAP = 4_096


def default_safety_margin(context_window: int) -> int:
    """The safety margin a connection gets unless an admin sets one (CAT-3)."""
    return max(SAFETY_MARGIN_FLOOR, min(SAFETY_MARGIN_CAP, context_window // SAFETY_MARGIN_SHARE))


def input_room(context_window: int, max_output_tokens: int, safety_margin_tokens: int) -> int:
    """CTX-21, the one home of the sum: what a request may use of ``context_window`` after
    the output reserve and the safety margin. Zero or less when the figures leave nothing
    (a :class:`Budget` refuses those; a page showing an admin's figures shows the number)."""
    return context_window - max_output_tokens - safety_margin_tokens


# CAT-9: the output reserve under a window the server proved, when no admin set one: a
# quarter of the window (never more than the reserve it had), so a 2,048-token server
# keeps about three quarters of its window for the conversation instead of none.
LEARNED_OUTPUT_SHARE = 4


def budget_under_window(budget: Budget, window: int, *, margin_set: bool, output_set: bool) -> Budget:
    """CAT-9, RUN-4: the budget in force once the model's server proved it keeps only
    ``window`` tokens. Only ever lowers: a window at or above the budget's changes nothing
    (a larger one needs a new version). The safety margin and output reserve follow the
    proven window -- each lowered to the default for it -- unless an admin set them
    (``margin_set``/``output_set``), when they are kept as set. PolicyError when what is
    kept leaves no room for input (an admin's figures that do not fit the server)."""
    if window >= budget.context_window:
        return budget
    margin = budget.safety_margin_tokens if margin_set else min(budget.safety_margin_tokens,
                                                                 default_safety_margin(window))
    output = budget.max_output_tokens if output_set else min(budget.max_output_tokens,
                                                              max(1, window // LEARNED_OUTPUT_SHARE))
    return Budget(context_window=window, max_output_tokens=output, safety_margin_tokens=margin)


class PolicyError(ValueError):
    """Invalid policy or budget figures. ``fields`` maps each bad field to what is wrong,
    so an API can answer 400 naming the field and an admin form can mark it."""

    def __init__(self, fields: Mapping[str, str]) -> None:
        self.fields = dict(fields)
        super().__init__("; ".join(f"{name}: {why}" for name, why in self.fields.items()))


def _is_number(value: Any) -> bool:
    # bool is an int subclass; True must not pass for 1.
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class ContextPolicy:
    """An agent version's ``context_policy`` (CTX-20), validated on construction."""

    context_ratio: float = 0.8
    target_ratio: float = 0.6
    user_turns: int | None = None
    model_steps: int | None = None
    max_compaction_calls: int = 4
    # CTX-45: where a summary starts being prepared in the background; None: halfway
    # between target_ratio and context_ratio.
    prepare_ratio: float | None = None
    # CTX-47: older tool results are first folded to reference notes (no model call) before
    # any summary is asked for; False goes straight to the summary tier.
    mask_tool_results: bool = True

    def __post_init__(self) -> None:
        errors: dict[str, str] = {}
        context, target = self.context_ratio, self.target_ratio
        if not _is_number(context) or not 0 < context <= 1:
            errors["context_ratio"] = "must be a number greater than 0 and at most 1"
        if not _is_number(target) or not 0 < target < 1:
            errors["target_ratio"] = "must be a number greater than 0 and less than context_ratio"
        elif "context_ratio" not in errors and target >= context:
            errors["target_ratio"] = "must be less than context_ratio"
        for name in ("user_turns", "model_steps"):
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or value < 1):
                errors[name] = "must be a positive integer or null"
        calls = self.max_compaction_calls
        if not _is_int(calls) or not 1 <= calls <= MAX_COMPACTION_CALLS:
            errors["max_compaction_calls"] = f"must be an integer from 1 to {MAX_COMPACTION_CALLS}"
        prepare = self.prepare_ratio
        if prepare is not None and not ("context_ratio" in errors or "target_ratio" in errors) and (
                not _is_number(prepare) or not target < prepare < context):
            errors["prepare_ratio"] = "must be a number between target_ratio and context_ratio, or null"
        if not isinstance(self.mask_tool_results, bool):
            errors["mask_tool_results"] = "must be true or false"
        if errors:
            raise PolicyError(errors)

    @property
    def prepare_share(self) -> float:
        """CTX-45: the share of the effective input at which a summary is prepared."""
        if self.prepare_ratio is not None:
            return float(self.prepare_ratio)
        return (self.target_ratio + self.context_ratio) / 2

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> ContextPolicy:
        """Build a policy from stored or submitted JSON, filling defaults for missing
        fields. Unknown fields are an error too, so a typo never silently means default."""
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = {name: "unknown field" for name in data if name not in known}
        if unknown:
            raise PolicyError(unknown)
        return cls(**{**POLICY_DEFAULTS, **data})

    def to_dict(self) -> dict[str, Any]:
        """All seven fields, as stored in a draft or a published version (a version stored
        before ``mask_tool_results`` existed reads back with its default, True, through
        :meth:`from_dict`)."""
        return asdict(self)


@dataclass(frozen=True)
class Budget:
    """A model's token figures (CTX-21). ``effective_input`` is what a request may use."""

    context_window: int = PLATFORM_CONTEXT_WINDOW
    max_output_tokens: int = PLATFORM_MAX_OUTPUT_TOKENS
    safety_margin_tokens: int = PLATFORM_SAFETY_MARGIN

    def __post_init__(self) -> None:
        errors: dict[str, str] = {}
        for name in ("context_window", "max_output_tokens"):
            if not _is_int(getattr(self, name)) or getattr(self, name) < 1:
                errors[name] = "must be a positive integer"
        if not _is_int(self.safety_margin_tokens) or self.safety_margin_tokens < 0:
            errors["safety_margin_tokens"] = "must be a non-negative integer"
        if not errors and self.effective_input < 1:
            errors["max_output_tokens"] = "output reserve and safety margin leave no room for input"
        if errors:
            raise PolicyError(errors)

    @classmethod
    def platform_default(cls) -> Budget:
        """32,768 / 4,096 / 1,024: the figures used when a model's window is unknown."""
        return cls()

    @property
    def effective_input(self) -> int:
        """context_window - max_output_tokens - safety_margin_tokens (:func:`input_room`)."""
        return input_room(self.context_window, self.max_output_tokens, self.safety_margin_tokens)

    def fits(self, figure: int) -> bool:
        """CTX-39, the one hard-limit rule: a request whose calibrated figure plus the output
        reserve stays within the window less the safety margin may be sent. Every request
        of a run (action, summary, completion check) and every throttle reads this."""
        return figure + self.max_output_tokens <= self.context_window - self.safety_margin_tokens

    def output_room(self, figure: int) -> int:
        """CAT-12: the ``max_tokens`` to send with a request of calibrated size ``figure``:
        the output limit, never more than what the window leaves after the prompt (at least
        1). Under CTX-39 (:meth:`fits`) it is the output limit itself; it is stated here
        so that no body ever asks a server for more than its window can hold."""
        return max(1, min(self.max_output_tokens, self.context_window - max(0, figure)))

    def trigger_threshold(self, policy: ContextPolicy) -> float:
        """effective_input x context_ratio, exactly; an estimate at or above it triggers."""
        return self.effective_input * policy.context_ratio

    def trigger_tokens(self, policy: ContextPolicy) -> int:
        """The trigger threshold rounded down, as shown to people (27,648 x 0.8 -> 22,118)."""
        return math.floor(self.trigger_threshold(policy) + 1e-9)

    def prepare_threshold(self, policy: ContextPolicy) -> float:
        """CTX-45: effective_input x the policy's prepare share; a request at or above it has
        a summary prepared in the background, before the trigger fires."""
        return self.effective_input * policy.prepare_share

    def target_tokens(self, policy: ContextPolicy) -> int:
        """The size a compaction aims for: effective_input x target_ratio, rounded down."""
        return math.floor(self.effective_input * policy.target_ratio + 1e-9)


@dataclass(frozen=True)
class Counters:
    """An instance's counts and the baselines its last compaction left (CTX-23)."""

    user_turns: int = 0
    model_steps: int = 0
    baseline_user_turns: int = 0
    baseline_model_steps: int = 0

    def with_user_turn(self) -> Counters:
        """A new question (never a resume, a supplement or a model retry)."""
        return replace(self, user_turns=self.user_turns + 1)

    def with_model_step(self) -> Counters:
        """An action model response received and saved in this instance."""
        return replace(self, model_steps=self.model_steps + 1)

    def after_compaction(self) -> Counters:
        """After a successful compaction the baselines move to the current counts."""
        return replace(self, baseline_user_turns=self.user_turns, baseline_model_steps=self.model_steps)

    @classmethod
    def from_records(
        cls,
        records: Iterable[Mapping[str, Any]],
        *,
        instance: str | None = "main",
        baseline_user_turns: int = 0,
        baseline_model_steps: int = 0,
    ) -> Counters:
        """Count from the records (a new run inherits totals this way), with the baselines
        of the view the run starts from.

        A user turn is a ``user`` record. A model step is a complete ``assistant`` record
        of an action call: cut streams (``partial``) were not received, and messages whose
        ``purpose`` is ``summary`` or ``verification`` are not action steps.
        """
        turns = steps = 0
        for record in records:
            if instance is not None and record.get("instance") != instance:
                continue
            kind = record.get("kind")
            if kind == "user":
                turns += 1
            elif kind == "assistant":
                message = record.get("message")
                message = message if isinstance(message, Mapping) else {}
                if not message.get("partial") and message.get("purpose", "action") == "action":
                    steps += 1
        return cls(turns, steps, baseline_user_turns, baseline_model_steps)


@dataclass(frozen=True)
class TriggerResult:
    """Which triggers fired (CTX-22), in the fixed order budget, user_turns, model_steps."""

    fired: tuple[str, ...]
    estimated_tokens: int
    threshold: float

    def __bool__(self) -> bool:
        return bool(self.fired)


# CAT-12: an answer that ended with ``length`` having written less than this share of the
# output limit it was sent with was not stopped by that limit: the server's context filled
# (llama.cpp-style servers stop generating when prompt + answer reach their window).
LENGTH_FAR_BELOW_SHARE = 0.5
LENGTH_OUTPUT_LIMIT = "output_limit"
LENGTH_CONTEXT_FILLED = "context_filled"


def length_cause(*, output_limit: int, answer_tokens: int | None) -> str:
    """Why an answer ended with finish reason ``length`` (CAT-12): ``context_filled`` when
    it wrote far less than the ``output_limit`` it was sent with (``answer_tokens``: the
    provider's completion count, else our calibrated estimate), else ``output_limit``."""
    if answer_tokens is not None and answer_tokens < output_limit * LENGTH_FAR_BELOW_SHARE:
        return LENGTH_CONTEXT_FILLED
    return LENGTH_OUTPUT_LIMIT


def evaluate_triggers(
    *, policy: ContextPolicy, budget: Budget, estimated_tokens: int, counters: Counters
) -> TriggerResult:
    """Evaluate CTX-22: any one trigger suffices, and every one that fired is named."""
    fired: list[str] = []
    threshold = budget.trigger_threshold(policy)
    if estimated_tokens >= threshold:
        fired.append("budget")
    if policy.user_turns is not None and counters.user_turns - counters.baseline_user_turns >= policy.user_turns:
        fired.append("user_turns")
    if policy.model_steps is not None and counters.model_steps - counters.baseline_model_steps >= policy.model_steps:
        fired.append("model_steps")
    return TriggerResult(tuple(fired), estimated_tokens, threshold)
