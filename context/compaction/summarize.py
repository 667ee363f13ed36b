"""CTX-34 and CTX-35: one summary, asked for and checked, in up to three attempts.

``summarize`` is the generator the engine delegates each segment's summary to (and the
one summary of the cached form, CTX-46): it yields ``SummaryCall`` values, receives the
replies, retries what was empty, too short, degenerate or too long, and returns the
failure reason or the summary. ``Sizing`` says how long the summary may be. Every reply
is checked (CTX-48, ``check.summary_check``) and its verdict kept in ``summary_check``;
a reply that fails is never returned, and a reply the server cut is never returned either.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from context.estimators import Estimator
from context.traces import Trace, trace_json, trace_span

from .check import history_texts, shortened_problems, summary_check
from .cleaning import clean_summary, complete_sentences, fit_summary
from .prompt import summary_prompt
from .types import CompactionRequest, SummaryCall, SummaryReply

MAX_ATTEMPTS = 3  # per segment (CTX-35)
TIGHTER = 0.8  # a retry over its room asks for this share of what would have fitted
UNUSABLE = frozenset({"empty", "too_short", "degenerate"})  # CTX-35: nothing to shorten or keep



class Units:
    """Costs of texts and messages in the request's estimator units."""

    def __init__(self, estimator: Estimator) -> None:
        self.estimator = estimator
        self._empty = estimator.message({"role": "user", "content": ""})

    def text(self, text: str) -> int:
        """What ``text`` adds to a message (with the separator that joins entries)."""
        return self.estimator.message({"role": "user", "content": text + "\n\n"}) - self._empty

    def chars_per_unit(self, sample: str) -> float:
        return len(sample) / max(self.text(sample), 1)


@dataclass(frozen=True)
class Sizing:
    """How long a summary may be (CTX-34): its units, the bound the prompt states and the
    call's output limit; ``min_chars`` below which a reply is too short (CTX-35)."""

    units: Units
    body_units: int
    max_chars: int
    output_limit: int
    whole_limit: int  # the output reserve: a reply this long still fits the window
    effective: int
    min_chars: int


PromptFor = Callable[..., list[dict[str, Any]]]  # (max_chars, too_long=None) -> the request's messages


def transcript_form(texts: list[str], so_far: str | None, part: int, parts: int) -> PromptFor:
    """A segment's request in the transcript form (CTX-33): the prompt, the summary so
    far and the segment's notes, for a bound of ``max_chars``."""
    def form(max_chars: int, too_long: int | None = None) -> list[dict[str, Any]]:
        return summary_prompt(texts, previous_summary=so_far, max_chars=max_chars, part=part, parts=parts,
                              too_long=too_long)
    return form


def summarize(r: CompactionRequest, sizing: Sizing, prompt_for: PromptFor, *, consumed: Trace,
               messages_count: int, index: int, parts: int, metrics: dict[str, Any],
               tools: list[dict[str, Any]] | None = None,
               ) -> Generator[SummaryCall, SummaryReply, tuple[str | None, str]]:
    """One segment's summary (CTX-34, CTX-35, CTX-48) in up to three attempts: returns the
    failure reason (None when it worked) and the summary so far.

    Every reply is checked (``check.summary_check``; its verdict appended to
    ``metrics["summary_check"]``) and only one that passed is returned. A passing reply
    over its room is asked for once more with a tighter bound, when a call is left beside
    those the later segments need; one the output limit stopped is never taken (CTX-48):
    it is asked for the same way, once, and allowed the whole output reserve, so that the
    next reply arrives whole. A reply the output limit stopped before it held a usable
    summary (empty, too short or degenerate: a reasoning model still thinking) is retried
    with the whole output reserve too. A passing reply still over is shortened between
    sentences.
    ``consumed``: the records this summary stands for (CTX-41), recorded with the segment."""
    units = sizing.units
    prompt = prompt_for(sizing.max_chars)
    problem: str | None = None
    done: str | None = None
    over: tuple[int, str] | None = None  # (length, text) of the best whole reply that was too long
    limit, tightened = sizing.output_limit, False
    history = history_texts(r)
    verdicts = metrics.setdefault("summary_check", [])
    for attempt in range(1, MAX_ATTEMPTS + 1):
        if metrics["summary_calls"] >= r.max_summary_calls:
            if over is not None:
                break
            metrics["summary_failure"] = problem
            return "summary_call_limit", ""
        # A copy per attempt: whatever the driver does with it cannot change the next one.
        reply = yield SummaryCall(messages=[dict(m) for m in prompt], segment=index, attempt=attempt,
                                  consumed=trace_span(consumed), ranges=consumed,
                                  estimated_tokens=r.estimator.request(prompt, tools),
                                  planned_segments=parts, max_output_tokens=limit,
                                  tools=[dict(t) for t in tools] if tools is not None else None)
        if not isinstance(reply, SummaryReply):
            raise TypeError(f"compact() expects a SummaryReply, got {type(reply).__name__}")
        metrics["summary_calls"] += 1
        metrics["retries"] += attempt > 1
        if reply.error_code is not None:
            metrics["error_code"] = reply.error_code
            if reply.deterministic:
                metrics["summary_failure"] = "deterministic_error"
                return "summary_failed", ""
            problem = "error"
            continue
        body = clean_summary(reply.text)
        if reply.truncated:
            body = complete_sentences(body)  # stopped inside a word: that sentence goes
        # CTX-48: every reply is checked, and its verdict kept (the console shows it).
        problems = summary_check(body, truncated=reply.truncated, history=history, min_chars=sizing.min_chars)
        verdicts.append({"segment": index, "attempt": attempt, "problems": problems})
        if problems and problems[0] in UNUSABLE:
            problem = problems[0]
            if reply.truncated:
                # Stopped before a usable summary: a reasoning model spends part of its
                # limit thinking, and the same limit would stop it again. One reply can
                # use the whole output reserve and the view still holds it.
                limit = sizing.whole_limit
            continue
        cost = units.text(body)
        if reply.truncated:
            # CTX-48: a cut reply is never committed, however much of it is there: which
            # section lost what cannot be told. Asked for less, once, and allowed the whole
            # output reserve, so that the next reply arrives whole.
            problem, limit = "cut", sizing.whole_limit
            if not tightened:
                bound = max(sizing.min_chars, int(sizing.max_chars * min(1.0, sizing.body_units / cost) * TIGHTER))
                tighter = prompt_for(bound, too_long=len(body))
                if r.estimator.request(tighter, tools) <= sizing.effective:
                    tightened, prompt = True, tighter
            continue
        if problems:
            problem = problems[0]  # no summary (CTX-48): asked again as it was
            continue
        if cost <= sizing.body_units:
            done = body
            break
        candidate = (len(body), body)
        over = candidate if over is None or candidate < over else over
        if tightened or metrics["summary_calls"] + parts - index - 1 >= r.max_summary_calls:
            break  # retried tighter once already, or the calls left are the later segments'
        bound = max(sizing.min_chars, int(sizing.max_chars * min(1.0, sizing.body_units / cost) * TIGHTER))
        tighter = prompt_for(bound, too_long=len(body))
        if r.estimator.request(tighter, tools) > sizing.effective:
            break
        tightened, prompt = True, tighter
    if done is None:
        if over is None:
            metrics["summary_failure"] = problem
            return "summary_failed", ""
        done = fit_summary(over[1], max_units=sizing.body_units, cost_of=units.text)
        problems = shortened_problems(done, min_chars=sizing.min_chars)
        if problems:  # shortening took what made it a summary: never committed
            verdicts.append({"segment": index, "attempt": "shortened", "problems": problems})
            metrics["summary_failure"] = problems[0]
            return "summary_failed", ""
        metrics["summary_cut_chars"] += over[0] - len(done)
    span = trace_span(consumed)
    metrics["segments"].append({"index": index, "consumed": list(span) if span else None,
                                "ranges": trace_json(consumed), "messages": messages_count})
    return None, done
