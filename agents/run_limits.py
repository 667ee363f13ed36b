"""A run's bounds (LOOP-2, RUN-3): one typed home for their names and their defaults.

An agent's draft and each published version keep the bounds an admin set as a JSON object
(``Agent.limits``, ``AgentVersion.limits``; only :data:`SETTABLE` keys, each an integer
from 1 to :data:`MAX_LIMIT`, absent = the default); a run freezes that object with its
budget (RUN-4) and the run loop reads it back as one :class:`RunLimits`. The agent
services validate against :data:`SETTABLE`, the console's form has one input per key,
and the loop asks :meth:`RunLimits.reached` between steps: adding a bound is adding a
field here.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

# The largest value an admin may type for any bound.
MAX_LIMIT = 1_000_000


@dataclass(frozen=True)
class RunLimits:
    """The bounds of one run; every field has the platform's default."""

    max_model_calls: int = 25  # action calls of the whole run, sub-agents' included
    max_tool_calls: int = 50
    max_wall_seconds: int = 900  # from the claim of this attempt
    max_depth: int = 2  # how deep delegation may nest (RUN-3): a sub-agent of a sub-agent at most
    # Sub-agents one run may start; not settable by admins (a guard against runaway fan-out).
    max_sub_instances: int = 8

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> RunLimits:
        """The bounds a run froze (``run.budget["limits"]``): each key given overrides its
        default; keys this version does not know (a bound since removed) are ignored, so
        an old run still reads."""
        known = {f.name for f in fields(cls)}
        return cls(**{key: int(value) for key, value in (data or {}).items()
                      if key in known and value is not None})

    def reached(self, *, model_calls: int, tool_calls: int, seconds: float) -> str | None:
        """Why a run that has made ``model_calls`` and ``tool_calls`` in ``seconds`` may not
        take another step, in the person's words; None while it may."""
        for count, limit, noun in ((model_calls, self.max_model_calls, "model calls"),
                                   (tool_calls, self.max_tool_calls, "tool calls")):
            if count >= limit:
                return f"The run reached its limit of {limit} {noun}."
        if seconds > self.max_wall_seconds:
            return f"The run reached its time limit of {self.max_wall_seconds} seconds."
        return None


DEFAULT = RunLimits()
# What an agent's draft may set, in the order the console shows them.
SETTABLE = ("max_model_calls", "max_tool_calls", "max_wall_seconds", "max_depth")
