"""The rules of slow work inside a request (core/slow_work.py), on any database: the
connection is given back before the slow part, never inside a transaction, and every
place taken is freed however the work ends."""
from __future__ import annotations

import pytest
from django.db import connections, transaction

from core.errors import TryLater
from core.slow_work import GATES, slow_work


@pytest.mark.django_db(transaction=True)
def test_the_connection_is_given_back_before_the_slow_part_and_borrowed_again_after(alice):
    connection = connections["default"]
    connection.ensure_connection()
    with slow_work("probe", person=alice.pk):
        assert connection.connection is None
    assert type(alice).objects.filter(pk=alice.pk).exists()  # the next query borrows one again


@pytest.mark.django_db
def test_slow_work_inside_a_transaction_is_a_bug_refused_before_anything_starts(alice):
    with transaction.atomic(), pytest.raises(RuntimeError, match="inside a database transaction"):
        with slow_work("extraction", person=alice.pk):
            pytest.fail("the slow part ran inside a transaction")
    assert GATES["extraction"].count() == 0


def test_a_persons_places_and_the_processs_are_freed_however_the_work_ends(settings):
    settings.AGENTLOOM_IMPORTS_PER_PERSON = 1
    settings.AGENTLOOM_IMPORTS_MAX = 2
    gate = GATES["import"]
    with pytest.raises(ValueError):
        with gate_held("import", person=7):
            raise ValueError("the work failed")
    assert gate.count() == 0 and gate.count(person=7) == 0
    with gate_held("import", person=7):
        with pytest.raises(TryLater) as mine:
            gate_enter("import", person=7)
        with gate_held("import", person=8):
            with pytest.raises(TryLater) as full:
                gate_enter("import", person=9)
    assert (mine.value.status, mine.value.code) == (429, "too_many_at_once")
    assert (full.value.status, full.value.code) == (503, "busy")
    assert mine.value.retry_after >= 1 and full.value.retry_after >= 1
    assert gate.count() == 0


def gate_enter(kind: str, *, person: int) -> None:
    from core.slow_work import KINDS

    GATES[kind].enter(KINDS[kind], person=person)
    GATES[kind].leave(person=person)


class gate_held:  # noqa: N801  (reads as the context manager it is)
    """A place of ``kind`` held for the block, without a database (the gate alone)."""

    def __init__(self, kind: str, *, person: int) -> None:
        from core.slow_work import KINDS

        self.kind, self.person, self.spec = kind, person, KINDS[kind]

    def __enter__(self) -> None:
        GATES[self.kind].enter(self.spec, person=self.person)

    def __exit__(self, *exc) -> None:
        GATES[self.kind].leave(person=self.person)
