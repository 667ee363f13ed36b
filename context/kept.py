"""What a step keeps from the one before (LOOP-1): the same objects at the same places.

A step's request repeats the previous one's messages — the same, never-changed objects —
and adds a few. Finding where they stop being the same is a walk over the whole list, done
here at C speed (``map``/``compress``, no Python frame per message), so a step late in a
long run does not pay a Python loop over every message it keeps (issue #46).
"""
from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import compress, count, islice
from typing import Any


def same_until(new: Sequence[Any], old: Sequence[Any], start: int = 0) -> int:
    """The first place at or after ``start`` where ``new`` does not hold the very object
    ``old`` holds there (``is``, not ``==``); ``min(len(new), len(old))`` when none does."""
    end = min(len(new), len(old))
    if start >= end:
        return start
    differs = map(operator.is_not, islice(new, start, end), islice(old, start, end))
    return next(compress(count(start), differs), end)
