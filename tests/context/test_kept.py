"""``context.kept``: where a step's list stops being the previous step's (LOOP-1, issue #46)."""
from __future__ import annotations

from context.kept import equal_until, same_until

A, B, C, D = ({"role": "user", "content": "x"} for _ in range(4))  # equal by value, four objects


def test_same_until_stops_at_the_first_object_that_is_not_the_same_one():
    assert same_until([A, B, C, D], [A, B, C, D]) == 4
    assert same_until([A, B, D], [A, B, C]) == 2  # D == C by value, but another object
    assert same_until([A, B, C, D], [A, B]) == 2  # the new items after the old ones
    assert same_until([], [A]) == 0


def test_same_until_starts_where_it_is_told():
    assert same_until([dict(A), B, C], [A, B, C], 1) == 3  # the system text rebuilt each step
    assert same_until([A, B, C], [A, B, D], 1) == 2
    assert same_until([A, B], [A, B], 5) == 5


def test_equal_until_compares_by_value():
    assert equal_until([1, 2, 3], [1, 2, 4]) == 2
    assert equal_until([1, None, 3], [1, None]) == 2
    assert equal_until([A, B], [C, D]) == 2
    assert equal_until([], [1]) == 0
    assert equal_until([0], [None]) == 0
