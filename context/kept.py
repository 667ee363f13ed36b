"""What a step keeps from the one before (LOOP-1): the same objects at the same places.

A step's request repeats the previous one's messages — the same, never-changed objects —
and adds a few. Finding where they stop being the same is a walk over the whole list, done
here at C speed (``map`` and ``operator.indexOf``: no Python frame, no new object per
item), so a step late in a long run does not pay a Python loop over every message it keeps
(issue #46).
"""
from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from typing import Any


def same_until(new: Sequence[Any], old: Sequence[Any], start: int = 0) -> int:
    """The first place at or after ``start`` where ``new`` does not hold the very object
    ``old`` holds there (``is``, not ``==``); ``min(len(new), len(old))`` when none does."""
    end = min(len(new), len(old))
    if start >= end:
        return start
    return _first_true(map(operator.is_not, new[start:end], old[start:end]), start, end)


def equal_until(new: Sequence[Any], old: Sequence[Any]) -> int:
    """The length of the longest common prefix of ``new`` and ``old``, by value (``==``)."""
    return _first_true(map(operator.ne, new, old), 0, min(len(new), len(old)))


def _first_true(flags: Iterator[Any], start: int, end: int) -> int:
    try:
        return start + operator.indexOf(flags, True)
    except ValueError:
        return end
