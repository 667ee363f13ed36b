"""What a step does once the model has answered: the typed decision after the call (LOOP-1).

Before the call the pipeline decides :class:`~context.pipeline.Send` or
:class:`~context.pipeline.CompactFirst`; after it, :func:`after_answer` decides from the
answer's parts (:class:`Answer`) and three facts the run knows — which line answered, whether
a supplement waits, whether an empty answer was already asked again — and the run loop carries
the decision out. Pure: no Django, no I/O; the loop saves the step first (the answer, its
calls, its events, in one commit that reads back Stop and the API's requests) and then asks.

The rules, in the order they apply (the first that holds decides):

1. :class:`Cut` ``stopped`` — Stop ended the stream (LOOP-7, CTX-6): what was said is kept,
   marked interrupted, and no call is run, not even a complete one.
2. :class:`RunTools` — the answer's complete calls run (LOOP-1, CTX-6), whatever else the
   answer says: a call is never dropped unless the answer was cut.
3. :class:`TakeSupplement` — the main line answered without calls while a supplement waits:
   it is taken and the instance goes on (RUN-5). A sub-agent's line never takes one.
4. :class:`AskAgain` — an empty answer, the first in a row: the same request once more (LOOP-10).
5. :class:`FailedEmpty` — an empty answer after asking again: ``empty_answer`` (LOOP-10).
6. :class:`Cut` ``output_limit`` — the output limit stopped the answer (CAT-12): it is the
   instance's answer as it is, and the chat offers Continue.
7. :class:`Finish` — the instance's answer.

Between 1 and 2, :class:`Wait` (TOOL-8): on the main line, when some of the answer's complete
calls need a person's approval (the run says which, by position, in ``waiting``), the others
run and the run waits for the decisions; no request is built until the whole group is
answered. A sub-agent's line never waits: its calls run, and those that would ask are
answered as denied by the loop.

Run limits (LOOP-2) are not an input: they are checked between steps, before the next call,
so an answer that ends the instance is never refused for the call that produced it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, Protocol, TypeVar


class CutReason(StrEnum):
    """Why an answer ended before it was whole: stable slugs, like the compaction engine's."""

    STOPPED = "stopped"  # Stop ended the stream (LOOP-7)
    OUTPUT_LIMIT = "output_limit"  # the output limit stopped it (CAT-12)


class Call(Protocol):
    """What the decision reads of a tool call: whether its arguments arrived whole."""

    @property
    def complete(self) -> bool: ...


C = TypeVar("C", bound=Call)


@dataclass(frozen=True)
class Answer(Generic[C]):
    """An answer's parts, as the provider's last event gave them: the visible ``text``, its
    tool ``calls`` (complete or not), the ``finish_reason`` (``"length"`` when the output limit
    stopped it, ``"cancelled"`` when Stop did) and whether the stream was ``cut``.

    A stream the server cut is retried inside the call (LOOP-3) and never becomes an
    answer; a cut answer here is one Stop ended (LOOP-7)."""

    text: str = ""
    calls: tuple[C, ...] = ()
    finish_reason: str | None = None
    cut: bool = False

    @property
    def runnable(self) -> tuple[C, ...]:
        """The calls that may run (CTX-6): the complete ones, and none of a cut answer."""
        return () if self.cut else tuple(call for call in self.calls if call.complete)

    @property
    def empty(self) -> bool:
        """LOOP-10: no text, no complete call, and neither Stop nor the output limit ended it
        (a cut answer, or one the limit stopped, is never empty)."""
        return (self.finish_reason not in ("cancelled", "length") and not self.cut and not self.text.strip()
                and not any(call.complete for call in self.calls))


@dataclass(frozen=True)
class RunTools(Generic[C]):
    """Run these calls, save their results, and take the next step (LOOP-1)."""

    calls: tuple[C, ...]


@dataclass(frozen=True)
class TakeSupplement:
    """A supplement waits and the main line answered without calls: take it and go on (RUN-5)."""


@dataclass(frozen=True)
class AskAgain:
    """The model answered nothing: send the same request once more and say so (LOOP-10)."""


@dataclass(frozen=True)
class FailedEmpty:
    """The model answered nothing again: the run (or the sub-agent's delegation) fails
    ``empty_answer`` (LOOP-10)."""


@dataclass(frozen=True)
class Cut:
    """The answer ended before it was whole: ``reason`` is :attr:`CutReason.STOPPED` (Stop
    ended the stream, LOOP-7: the run is cancelled) or :attr:`CutReason.OUTPUT_LIMIT` (the
    output limit stopped it, CAT-12: it stands as the instance's answer, and the chat offers
    Continue)."""

    reason: CutReason


@dataclass(frozen=True)
class Finish:
    """The instance has its answer: the run's, or the sub-agent's result for its delegation."""


@dataclass(frozen=True)
class Wait(Generic[C]):
    """TOOL-8: the step's calls, of which those at the positions ``waiting`` need a
    person's approval: the others run, then the run waits without a worker."""

    calls: tuple[C, ...]
    waiting: frozenset[int]


AfterAnswer = RunTools[C] | TakeSupplement | AskAgain | FailedEmpty | Cut | Finish | Wait[C]


def after_answer(answer: Answer[C], *, main: bool, supplement_waiting: bool,
                 asked_again: bool, waiting: frozenset[int] = frozenset()) -> AfterAnswer[C]:
    """What the instance does after ``answer``, by the rules of this module's docstring.

    ``main``: the run's main line answered (only it takes supplements, RUN-5);
    ``supplement_waiting``: the step's commit read a supplement queued for the run;
    ``asked_again``: the previous answer in a row was empty and was asked again (LOOP-10);
    ``waiting``: the positions of the complete calls whose tool asks a person first (TOOL-8).
    """
    if answer.cut:
        return Cut(CutReason.STOPPED)
    calls = answer.runnable
    if calls and main and any(0 <= index < len(calls) for index in waiting):
        return Wait(calls, frozenset(index for index in waiting if 0 <= index < len(calls)))
    if calls:
        return RunTools(calls)
    if main and supplement_waiting:
        return TakeSupplement()
    if answer.empty:
        return FailedEmpty() if asked_again else AskAgain()
    if answer.finish_reason == "length":
        return Cut(CutReason.OUTPUT_LIMIT)
    return Finish()
