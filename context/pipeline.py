"""One instance's context, step after step: records in, the next action out (LOOP-1).

Sans-I/O, like the compaction engine beside it. The run loop keeps one
:class:`ContextPipeline` per instance; ``sessions`` only loads and saves rows. A step:

1. the loop hands the pipeline what it read (``load``: the starting point and the records
   after it, once) and what it wrote since (``feed``);
2. it asks :meth:`ContextPipeline.next_action` — the answer is :class:`Send` (this body,
   estimated once, under the hard limit) or :class:`CompactFirst` (a trigger fired);
3. after a compaction it asks :meth:`ContextPipeline.after_compaction` for the body of
   the compacted view, or :meth:`ContextPipeline.without_compaction` when none was made;
4. what the provider counted goes to the run's :class:`RunFigures` (``learn``).

Every figure a decision reads is one calibrated estimate of the request as it is sent
(CTX-24, CTX-25): the trigger (CTX-22), the hard limit (CTX-39, :meth:`Budget.fits`), the
call log and the context meter. The request builder is the dialect's own, kept between
steps so a step adapts and checks only what is new.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from context.adapters import RequestBuilder
from context.anthropic import AnthropicBuilder
from context.attachments import DEFAULT_IMAGE_BUDGET, apply_image_budget
from context.calibration import CalibratedEstimator, Calibration, ratio_sample
from context.compaction import newest_results_overflow
from context.estimate_cache import EstimateCache
from context.legacy import LegacyCharPolicy
from context.media import DEFAULT_SCREEN_TOOLS
from context.policy import Budget, ContextPolicy, Counters, evaluate_triggers
from context.projector import Projected, Projection
from context.truncation import DEFAULT_TOOL_RESULT_LIMIT, answer_bound
from context.undo import UNDONE, undo_holds

# CTX-44: after a failed compaction, wait until the request grew by this share, or this long.
RETRY_GROWTH = 0.10
RETRY_AFTER_SECONDS = 600


@dataclass(frozen=True)
class RequestShape:
    """What of a model target shapes its requests (from its ``ProviderSpec``)."""

    model: str
    dialect: str
    output_limit_field: str = "max_tokens"
    supports_images: bool = False
    stream_usage: bool = True  # ask for usage in a stream's last chunk (CTX-25)
    # Every message's content a string and only the classic roles (``string_contents``):
    # what local servers' chat templates can read (llama-cpp-python answers 500 otherwise).
    string_content: bool = False
    # Tools offered on the native wire as one of Anthropic's own types, as (name, type)
    # pairs: ``("memory", "memory_20250818")`` for the memory tool (MEM-2).
    native_tools: tuple[tuple[str, str], ...] = ()

    @property
    def native(self) -> bool:
        """A native Messages API body: system text outside its messages, merged turns."""
        return self.dialect == "anthropic"


Builder = RequestBuilder | AnthropicBuilder


def request_builder(shape: RequestShape) -> Builder:
    """What keeps one conversation's successive bodies, for the shape's dialect."""
    return AnthropicBuilder() if shape.native else RequestBuilder()


def build_body(shape: RequestShape, messages: Sequence[Mapping[str, Any]], *, max_output_tokens: int,
               tools: Sequence[Mapping[str, Any]] | None = None, keep_thinking: bool = False,
               builder: Builder | None = None) -> dict[str, Any]:
    """A request body in the shape's dialect (CTX-11); raises RequestValidationError (CTX-10).

    The ``anthropic`` dialect is the native Messages API body (top-level system, content
    blocks, prompt-cache breakpoints); ``keep_thinking`` passes signed thinking blocks back
    when the model that wrote them is the one called now. ``builder`` keeps what the
    previous request of the same conversation adapted and checked (LOOP-1)."""
    builder = builder if builder is not None else request_builder(shape)
    if isinstance(builder, AnthropicBuilder):
        return builder.build(messages, model=shape.model, max_tokens=max_output_tokens, tools=tools or None,
                             supports_images=shape.supports_images, keep_thinking=keep_thinking,
                             native_types=dict(shape.native_tools) or None)
    body = builder.build(messages, dialect=shape.dialect, output_limit_field=shape.output_limit_field,
                         model=shape.model, max_output_tokens=max_output_tokens, tools=tools or None,
                         supports_images=shape.supports_images, stream_usage=shape.stream_usage,
                         string_contents=shape.string_content)
    return body


def within_window(body: dict[str, Any], *, shape: RequestShape, room: int) -> dict[str, Any]:
    """``body`` whose output limit asks for no more than ``room`` (CAT-12: what the window
    leaves after the prompt, ``Budget.output_room``); the same body when it already does."""
    field = "max_tokens" if shape.native else shape.output_limit_field
    asked = body.get(field)
    if isinstance(asked, int) and asked > room:
        return {**body, field: room}
    return body


def answer_limit(budget: Budget) -> int:
    """Characters of one answer an instance's view shows (CTX-7, CTX-42): whole up to what
    the output limit lets a model write (``answer_bound``), and never more than twice the
    effective input in characters — so a record no model could have written within its
    limit (an import, a provider that ignored the limit) is shown with head and tail and
    leaves room for the next question, while ordinary long answers are shown whole."""
    return min(answer_bound(budget.max_output_tokens), 2 * budget.effective_input)


class RunFigures:
    """A run's one estimator, calibration and budget, shared by the pipelines of its
    instances and by its summary and check calls: every decision of the run reads
    :meth:`figure` and :meth:`fits` (CTX-25)."""

    def __init__(self, estimates: EstimateCache, calibration: Calibration, budget: Budget) -> None:
        self.estimates, self.calibration, self.budget = estimates, calibration, budget

    @property
    def estimator_id(self) -> str:
        return self.estimates.id

    def figure(self, estimate: int) -> int:
        """The calibrated figure of one of our estimates."""
        return self.calibration.figure(estimate)

    def fits(self, estimate: int) -> bool:
        """CTX-39 on the calibrated figure of ``estimate``."""
        return self.budget.fits(self.figure(estimate))

    def calibrated_estimator(self) -> CalibratedEstimator:
        """An estimator whose figures are calibrated, for the compaction engine."""
        return CalibratedEstimator(self.estimates, self.calibration.ratio)

    def learn(self, *, estimate: int, provider_count: Any) -> float | None:
        """A provider's count of a request we estimated, in force at once; returns the
        sample for the caller to keep (None when the provider counted nothing usable)."""
        sample = ratio_sample(estimate=estimate, provider_count=provider_count)
        if sample is not None:
            self.calibration = self.calibration.with_sample(sample)
        return sample


@dataclass(frozen=True)
class Start:
    """Where an instance's context starts: a compaction snapshot, a reusable view, or the
    records themselves. ``key`` names the starting point: a new key starts afresh."""

    kind: str = "records"  # "snapshot", "view" or "records"
    key: tuple[Any, ...] = ("records",)
    watermark: int = 0
    messages: Sequence[Mapping[str, Any]] | None = None
    estimator_id: str | None = None
    traces: Sequence[Any] | None = None  # stored with ``messages``: the records each stands for (CTX-41)


@dataclass(frozen=True)
class Send:
    """The next action: send ``body``. ``estimate`` is ours of the body as it is sent,
    ``per_message`` its figures by message (empty for a native body, whose turns do not
    line up with the inspector's messages), ``repairs`` what the projection changed to make
    it valid (positions in the sent messages; None where they do not line up)."""

    body: dict[str, Any]
    estimate: int
    figure: int
    estimator_id: str
    per_message: list[int] = field(default_factory=list)
    repairs: list[dict[str, Any]] = field(default_factory=list)
    throttled: bool = False  # a trigger fired but a recent failure holds compaction back (CTX-44)
    prepare: bool = False  # past the prepare point: a summary can be made in the background (CTX-45)


@dataclass(frozen=True)
class CompactFirst:
    """The next action: compact before sending (CTX-30). ``tokens`` is the calibrated
    figure of the request the trigger judged and ``estimate`` our estimate of it before
    calibration (CTX-41); ``projected`` what the summary reads."""

    trigger: str
    tokens: int
    projected: Projected
    start: Start
    estimate: int | None = None


class ContextTooLong(Exception):
    """The request is over the hard limit even now (CTX-39): nothing may be sent."""

    def __init__(self, figure: int, reserve: int) -> None:
        self.figure, self.reserve = figure, reserve
        super().__init__(f"The conversation is too long for this model's context window (about {figure:,} tokens "
                         f"plus {reserve:,} reserved for the answer).")


def throttled(failure: Mapping[str, Any] | None, figure: int, budget: Budget, *, now: float) -> bool:
    """CTX-44: after a failed compaction, try again only once the request grew by a tenth,
    ten minutes passed, or it is over the hard limit. After an undone compaction, growth
    or the hard limit only (CTX-51, ``context.undo.undo_holds``)."""
    if not failure:
        return False
    if failure.get("reason") == UNDONE:
        return undo_holds(failure, figure, growth=RETRY_GROWTH, fits=budget.fits(figure))
    grown = figure >= failure.get("tokens", 0) * (1 + RETRY_GROWTH)
    waited = now - failure.get("at", 0) >= RETRY_AFTER_SECONDS
    return not (grown or waited or not budget.fits(figure))


class InstanceContext:
    """An instance's records and their projection, kept between steps (LOOP-1: a step
    reads and projects only what is new).

    What it holds is valid while the starting point stays the same: records before a
    run's inherited watermark never change, and everything newer is the instance's own,
    appended at the end by the loop that owns it.
    """

    def __init__(self, *, open_runs: Collection[Any], screen_tools: Iterable[str] = (),
                 tool_result_limit: int = DEFAULT_TOOL_RESULT_LIMIT, answer_limit: int | None = None) -> None:
        self.open_runs = set(open_runs)
        self.screen_tools = DEFAULT_SCREEN_TOOLS | frozenset(screen_tools)
        self.tool_result_limit = tool_result_limit
        self.answer_limit = answer_limit  # see ``project_records``
        self.start: Start | None = None  # None: the next step must ``load``
        self.records: list[Mapping[str, Any]] = []  # every record read, in seq order
        self.last_seq = 0
        self._projection: Projection | None = None
        self._fed = 0  # how many records ``_projection`` has read

    @property
    def loaded(self) -> bool:
        return self.start is not None

    def load(self, start: Start, records: Iterable[Mapping[str, Any]]) -> None:
        """The starting point and the records after it (SPEC §3 dicts, in seq order). The
        same starting point keeps what was read and projected; another starts afresh."""
        if self.start is None or self.start.key != start.key:
            self.records, self._projection, self._fed, self.last_seq = [], None, 0, start.watermark
        self.start = start
        self.feed(records)

    def feed(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Records written to this instance since, in seq order; ignored until loaded
        (``load`` reads them then); records already held are skipped."""
        if self.start is None:
            return
        for record in records:
            if record["seq"] > self.last_seq:
                self.records.append(record)
                self.last_seq = record["seq"]

    def reload(self) -> None:
        """A compaction moved the starting point: the next step loads again."""
        self.start = None

    def projected(self) -> Projected:
        """The projection of every record read so far (without the system message)."""
        start = self.start if self.start is not None else Start()
        if self._projection is None:
            view, watermark = (start.messages, start.watermark) if start.messages is not None else (None, None)
            self._projection = Projection(screen_tools=self.screen_tools, tool_result_limit=self.tool_result_limit,
                                          start_view=view, start_watermark=watermark, repairs=True,
                                          answer_limit=self.answer_limit, start_traces=start.traces)
            self._fed = 0
        self._projection.extend(self.records[self._fed:])
        self._fed = len(self.records)
        return self._projection.project(self.open_runs)


class ContextPipeline:
    """One instance's way from records to requests: its context (:class:`InstanceContext`),
    its dialect's request builder, and the trigger and hard-limit decisions on the run's
    figures (:class:`RunFigures`)."""

    def __init__(self, *, shape: RequestShape, figures: RunFigures, policy: ContextPolicy | None,
                 context: InstanceContext, track: Hashable, keep_thinking: bool = False) -> None:
        self.shape, self.figures, self.policy, self.context = shape, figures, policy, context
        self.track, self.keep_thinking = track, keep_thinking
        self.builder = request_builder(shape)
        self._pending: _Pending | None = None

    # --- the step ---

    def next_action(self, system: Mapping[str, Any], tools: Sequence[Mapping[str, Any]], *, counters: Counters,
                    manual: bool = False, force: str | None = None, failure: Mapping[str, Any] | None = None,
                    now: float = 0.0) -> Send | CompactFirst:
        """CTX-30: send the request, or compact first. ``manual``: a person asked for a
        compaction (CTX-43); ``force`` names a trigger that fires whatever the figures say
        (after the provider refused a request as too long, CAT-3); ``failure`` is the last
        failed compaction (CTX-44) and ``now`` the wall clock it is judged by.

        Raises RequestValidationError (CTX-10) and ContextTooLong (CTX-39)."""
        projected = self.context.projected()
        messages: list[Mapping[str, Any]] = [system, *projected.messages]
        if self.policy is None:  # CTX-40: a version without a policy keeps the legacy character threshold
            messages = list(LegacyCharPolicy().select(messages))
            # The threshold drops whole messages: the repairs stand, their positions do not.
            repairs = [{**r, "position": None} for r in projected.repairs]
        else:
            repairs = [{**r, "position": r["position"] + 1} if isinstance(r.get("position"), int) else r
                       for r in projected.repairs]
        pending = self._pending = _Pending(*self._request(messages, tools), repairs=repairs)
        if self.policy is None:
            return self._checked(pending)
        figures = self.figures
        figure = figures.figure(pending.estimate)
        triggers = evaluate_triggers(policy=self.policy, budget=figures.budget, estimated_tokens=figure,
                                     counters=counters)
        if not triggers and not manual and not force:
            prepare = figure >= figures.budget.prepare_threshold(self.policy)
            return replace(self._checked(pending), prepare=prepare) if prepare else self._checked(pending)
        trigger = "manual" if manual else force or triggers.fired[0]
        if trigger == "budget" and newest_results_overflow(
                messages, estimator=figures.calibrated_estimator(), tools=tools,
                threshold=figures.budget.trigger_threshold(self.policy)):
            trigger = "tool_output_overflow"  # CTX-42: the results just in overflow on their own
        if not manual and not force and throttled(failure, figure, figures.budget, now=now):
            return replace(self._checked(pending), throttled=True)
        start = self.context.start
        if start is None:
            raise RuntimeError("load the context before its first step")
        return CompactFirst(trigger=trigger, tokens=figure, projected=projected, start=start,
                            estimate=pending.estimate)

    def measure(self, system: Mapping[str, Any], tools: Sequence[Mapping[str, Any]]) -> tuple[int, int, bool]:
        """Our estimate and the calibrated figure of a request of the view as it is now
        (after the last answer), and whether it is past the prepare point (CTX-45: a run
        that ends above it has a summary prepared for the next question). Builds nothing
        it keeps."""
        if self.policy is None:
            return 0, 0, False
        messages = [system, *self.context.projected().messages]
        _, estimate, _ = self._request(messages, tools, builder=request_builder(self.shape))
        figure = self.figures.figure(estimate)
        return estimate, figure, figure >= self.figures.budget.prepare_threshold(self.policy)

    def without_compaction(self) -> Send:
        """The request ``next_action`` prepared, when the compaction it asked for made
        nothing (skipped or failed): under the hard limit, or ContextTooLong."""
        if self._pending is None:
            raise RuntimeError("next_action first")
        return self._checked(self._pending)

    def after_compaction(self, system: Mapping[str, Any], tools: Sequence[Mapping[str, Any]],
                         messages: Sequence[Mapping[str, Any]]) -> Send:
        """The request of a compacted view (``messages``, without the system message); the
        next step loads from the new snapshot."""
        self.context.reload()
        # The compacted view keeps the last question (CTX-31) beside the newest messages: both
        # may carry images, so the request is held to the image budget as a projection is.
        kept = [dict(message) for message in messages]
        apply_image_budget(kept, DEFAULT_IMAGE_BUDGET)
        self._pending = _Pending(*self._request([system, *kept], tools), repairs=[])
        return self._checked(self._pending)

    def _request(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], *,
                 builder: Builder | None = None) -> tuple[dict[str, Any], int, list[int]]:
        """The body, and its one estimate: of the messages as sent for an OpenAI-shaped
        body; for a native one, of the OpenAI-shaped messages it was built from (our
        estimators count those shapes; a native body keeps the system text outside its
        messages, and its image blocks carry raw base64)."""
        shape = self.shape
        body = build_body(shape, messages, max_output_tokens=self.figures.budget.max_output_tokens, tools=tools,
                          keep_thinking=self.keep_thinking, builder=builder or self.builder)
        counted = messages if shape.native else body["messages"]
        estimates = self.figures.estimates
        # Read-only (LOOP-1): the projection and the builders never change a message they handed out.
        per_message = estimates.messages(counted, track=self.track, read_only=True)
        estimate = estimates.request([], tools if shape.native else body.get("tools")) + sum(per_message)
        return body, estimate, [] if shape.native else per_message

    def _checked(self, pending: _Pending) -> Send:
        figures = self.figures
        figure = figures.figure(pending.estimate)
        if not figures.budget.fits(figure):
            raise ContextTooLong(figure, figures.budget.max_output_tokens)
        body = within_window(pending.body, shape=self.shape, room=figures.budget.output_room(figure))
        # A native body merges turns and moves the system text out: positions would mislead.
        repairs = [{**r, "position": None} for r in pending.repairs] if self.shape.native else pending.repairs
        return Send(body=body, estimate=pending.estimate, figure=figure, estimator_id=figures.estimator_id,
                    per_message=pending.per_message, repairs=repairs)


@dataclass(frozen=True)
class _Pending:
    body: dict[str, Any]
    estimate: int
    per_message: list[int]
    repairs: list[dict[str, Any]]
